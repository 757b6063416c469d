"""The doctor's check process: runs the requested checks in order and reports each one.

``python -m skill_server.doctor.child FD`` reads a :class:`ChildRequest` as JSON on stdin and
writes one :class:`ChildEvent` JSON line per step to file descriptor FD: ``start`` before a
check (the parent's clock for its time limit starts there), ``result`` after it. stdout and
stderr are the parent's log of the libraries' own noise, never the protocol. A check that
raises is reported ``failed`` with the exception; a check that hangs or kills the process is
the parent's business (it kills this process and starts another for the rest).
"""
from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from skill_server.doctor.context import CheckContext
from skill_server.doctor.result import CheckResult, result

from skill_server.doctor.plan import BY_ID, blocked


class ChildRequest(BaseModel):
    checks: list[str]
    prior: dict[str, list[CheckResult]] = Field(default_factory=dict, description="results of checks already done")
    skills_dir: str | None = None


class ChildEvent(BaseModel):
    event: Literal["start", "result"]
    id: str
    results: list[CheckResult] = Field(default_factory=list)


def run_one(spec_id: str, ctx: CheckContext, done: dict[str, list[CheckResult]]) -> list[CheckResult]:
    spec = BY_ID[spec_id]
    skipped = blocked(spec, done)
    if skipped is not None:
        return [skipped]
    module, _, name = spec.target.partition(":")
    t0 = time.monotonic()
    try:
        out = getattr(importlib.import_module(module), name)(ctx)
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]
        out = result(spec.id, spec.title, "failed", f"the check raised {text} (at {Path(where.filename).name}:{where.lineno})",
                     "send this doctor JSON back; the check itself may be wrong for this box")
    results = out if isinstance(out, list) else [out]
    elapsed = time.monotonic() - t0
    for r in results:
        r.elapsed_s = round(elapsed / len(results), 3)
    return results


def main(argv: list[str]) -> int:
    fd = int(argv[0])
    request = ChildRequest.model_validate_json(sys.stdin.read())
    channel = os.fdopen(fd, "w", buffering=1)

    def send(event: ChildEvent) -> None:
        channel.write(event.model_dump_json() + "\n")
        channel.flush()

    done = dict(request.prior)
    ctx = CheckContext(skills_dir=Path(request.skills_dir) if request.skills_dir else None,
                       results={k: v[0] for k, v in done.items() if v})
    for check_id in request.checks:
        send(ChildEvent(event="start", id=check_id))
        results = run_one(check_id, ctx, done)
        done[check_id] = results
        ctx.results[check_id] = results[0]
        send(ChildEvent(event="result", id=check_id, results=results))
    channel.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - run as the parent's subprocess
    sys.exit(main(sys.argv[1:]))
