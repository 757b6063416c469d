"""The part of fleet re-verification that runs on a node: one card on this box.

Called by Ray on the node Ray chose for the task's ``gpu_gen:<generation>`` resource.
It uses the node's own installation of gpu-skill-server (the same version as the
driver's: the card digest lets the driver check), detects the node's platform with the
project's detector, runs the prerequisites, the static gates and the verifier there
(``Reverifier``: the same stages as ``skill-server reverify``), and returns what it found
as JSON. It writes nothing: the driver validates the answer and records it, signed, in
the shared ledger, so nodes need neither the ledger's credentials nor the signing key.
"""
from __future__ import annotations

import hashlib
import math
import os
import socket
import time
from pathlib import Path
from typing import Any

from skill_server import DEFAULT_SKILLS_DIR
from skill_server.cards.catalog import Catalog
from skill_server.fleet.models import FleetOptions, FleetTarget, NodeRun
from skill_server.ledger.models import PlatformInfo, normalise_platform
from skill_server.reverify.run import Reverifier
from skill_server.reverify.stages import default_gate_runner, default_verifier_runner
from verifiers.options import VerifyOptions
from verifiers.problem import load_problem
from verifiers.provenance import detect_platform
from skill_server.settings import settings


def card_digest(folder) -> str:  # noqa: ANN001 - pathlib.Path
    return hashlib.sha256((folder / "SKILL.md").read_bytes()).hexdigest()


def cpu_smoke_settings(cards: list[Any]) -> dict[str, Any]:
    """``Reverifier`` settings for the CPU smoke run: each problem's smallest smoke shape,
    the CPU arms, quick verifier options (as bench/reverify_h200.py --smoke)."""
    shapes: dict[str, list[str]] = {}
    for parsed in cards:
        vb = parsed.card.verifier
        if vb is None:
            continue
        problem = load_problem(vb.problem)
        if problem.smoke_shapes:
            small = min(problem.smoke_shapes, key=lambda d: math.prod(d[n] for n in problem.dim_names))
            shapes[parsed.card.id] = [",".join(f"{n}={small[n]}" for n in problem.dim_names)]
    options = VerifyOptions(rounds=5, block_ms=1.0, warmup_ms=25.0, bootstrap_samples=200, hidden_shapes=False,
                            flush_bytes=1 << 20,  # a smoke run: 2 x LLC per call (~100 ms on CPU) buys nothing
                            secret_seed=False, seeds=[0], time_limit_s=120.0, device="cpu", profile=False)
    return {"shapes_override": shapes, "verifier_on_cpu": True, "verifier_options": options}


def run_card_on_node(card_id: str, target_json: str, options_json: str) -> str:
    """One (card, platform) task; returns ``NodeRun`` JSON."""
    started = time.monotonic()
    target, options = FleetTarget.model_validate_json(target_json), FleetOptions.model_validate_json(options_json)
    # the node's own cards (the driver checks the card digest); a node never opens a ledger
    skills_dir = Path(settings().skills_dir or DEFAULT_SKILLS_DIR)
    parsed = Catalog.load(skills_dir).get(card_id)
    platform = detect_platform()
    smoke: dict[str, Any] = {}
    if options.cpu_smoke:
        platform = PlatformInfo(**{**platform.model_dump(), "runtime": "cpu"})
        smoke = cpu_smoke_settings([parsed])
    platform = normalise_platform(platform)
    rv = Reverifier(project_root=skills_dir.resolve().parent, platform=platform, recorded_by=options.recorded_by,
                    git_rev=options.git_rev, gate_runner=default_gate_runner if options.gates else None,
                    verifier_runner=default_verifier_runner if options.verifier else None, **smoke)
    run = rv.reverify_card(parsed)
    return NodeRun(card_id=card_id, target=target, card_digest=card_digest(parsed.folder), node_id=_node_id(),
                   hostname=socket.gethostname(), platform=platform, result=run.result,
                   report_json=run.report.model_dump_json() if run.report is not None else None,
                   seconds=time.monotonic() - started).model_dump_json()


def _node_id() -> str:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray (a direct call)
        return f"local-{os.getpid()}"
