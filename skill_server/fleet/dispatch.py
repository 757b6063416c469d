"""Fleet re-verification on Ray: one task per (card, platform the cluster offers).

The driver (``skill-server reverify --ray HOST:PORT``, or the MCP ``reverify`` tool of a
server started with ``--ray-address``) connects to the cluster, reads which platforms the
live nodes advertise (``gpu_gen:<generation>`` resources, ``fleet_node``), submits one task
per card and platform asking for one unit of that platform's resource, and lets Ray place
and retry them. Each task runs ``fleet_task.run_card_on_node`` on its node. As each answer
arrives the driver checks it (the same card, a report that binds to it, the platform it
claims) and records it, signed with the deployment's key, through the same path as a local
re-verification (``EvidenceService.record_card_run``).

Nothing is ever silently missing: a task whose node died is retried once by Ray on another
node offering the platform; when none can finish it (the node is gone and no other offers
that platform, the task raised, it ran past its time limit), the driver records a
``NOT_APPLICABLE_HERE`` row saying the platform was not re-verified and why, and the run's
summary lists it as lost. Ray's scheduling and PostgreSQL are the only moving parts: no
scheduler or store of our own.
"""
from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skill_server import is_embedded
from skill_server.fleet.models import (
    GEN_PREFIX,
    VENDOR_PREFIX,
    FleetOptions,
    FleetOutcome,
    FleetProgress,
    FleetRun,
    FleetTarget,
    NodeRun,
)
from skill_server.fleet.task import card_digest, run_card_on_node
from skill_server.ledger.models import PlatformInfo, normalise_platform
from skill_server.ledger.report_records import bind_report, derive_records
from skill_server.reverify.models import CardReverification, short
from skill_server.reverify.run import CardRun, now
from verifiers.provenance import read_git_revision
from verifiers.report import VerificationReport

POLL_S = 0.5
LOST_GRACE_S = 3.0  # a platform no live node offers for this long: its pending tasks are lost
CONNECT_TIMEOUT_S = 5.0
DEFAULT_TASK_TIMEOUT_S = 4 * 3600.0

ProgressFn = Callable[[FleetProgress], None]


class RunRecorder(Protocol):
    """Where the driver records each card's outcome (the service's evidence side)."""

    project_root: Path
    ledger: Any

    def record_card_run(self, run: Any, platform: Any, recorded_by: str, git_rev: str | None, *, record: bool = True,
                        detail_extra: dict | None = None) -> None: ...


class FleetError(RuntimeError):
    """The fleet could not be used; the message says what failed and what to do."""


# ------------------------------------------------------------------------ connecting
def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` of the Ray head's GCS, or ``ray://HOST:PORT`` (Ray Client)."""
    text = (address or "").strip()
    rest = text[len("ray://"):] if text.startswith("ray://") else text
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in rest:
        raise FleetError(f"Ray address {address!r}: expected HOST:PORT of the Ray head (as `ray start --head` or "
                         "`skill-server fleet-node --head` prints it) or ray://HOST:PORT; nothing was run or written")
    return host.strip("[]"), int(port)


def connect(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> Any:
    """Check that something answers at ``address``, then join the cluster as a driver.
    Returns the ``ray`` module."""
    host, port = parse_address(address)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise FleetError(f"Ray at {address} does not answer ({why}): start the head there (`skill-server fleet-node "
                         f"--head --port {port}`) or fix the address; nothing was run or written") from None
    if not _speaks_grpc(host, port, timeout_s):
        raise FleetError(f"the server at {address} is not a Ray head (it does not answer Ray's gRPC protocol within "
                         f"{timeout_s:.0f} s): check the address and port (`ray status` on the head prints it); "
                         "nothing was run or written")
    try:
        import ray
    except ImportError:
        raise FleetError("fleet re-verification needs Ray: pip install 'gpu-skill-server[fleet]'") from None
    if ray.is_initialized():
        ray.shutdown()
    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, namespace="skill-server")
    except Exception as exc:  # noqa: BLE001 - any failure to join is one clear line
        raise FleetError(f"Ray at {address} did not accept this driver ({type(exc).__name__}: "
                         f"{short(str(exc), 160)}): check that it is a Ray head of the same Ray version; "
                         "nothing was run or written") from None
    return ray


def _speaks_grpc(host: str, port: int, timeout_s: float) -> bool:
    """True when the server answers an HTTP/2 client preface with its SETTINGS frame (as
    Ray's GCS and Ray Client servers, both gRPC, do at once). ``ray.init`` itself would wait
    without end on a port where something else listens."""
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            conn.sendall(preface)
            header = b""
            while len(header) < 9:
                chunk = conn.recv(9 - len(header))
                if not chunk:
                    return False
                header += chunk
    except OSError:
        return False
    return header[3] == 0x04  # frame type SETTINGS


def offered_targets(ray: Any) -> list[FleetTarget]:
    """The platforms the live nodes advertise."""
    found: dict[str, FleetTarget] = {}
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        resources = node.get("Resources", {})
        vendors = [k[len(VENDOR_PREFIX):] for k in resources if k.startswith(VENDOR_PREFIX)]
        for key in resources:
            if key.startswith(GEN_PREFIX):
                gen = key[len(GEN_PREFIX):]
                vendor = vendors[0] if len(vendors) == 1 else _vendor_of(gen)
                try:
                    found.setdefault(gen, FleetTarget(generation=gen, vendor=vendor))
                except ValueError:
                    continue  # a resource name we cannot use: not a platform of ours
    return sorted(found.values(), key=lambda t: t.key)


def _vendor_of(generation: str) -> str:
    return "amd" if generation.startswith("gfx") else "nvidia" if generation.startswith("sm_") else "cpu"


def _offered_resources(ray: Any) -> set[str]:
    return {k for n in ray.nodes() if n.get("Alive") for k, v in n.get("Resources", {}).items() if v > 0}


# ------------------------------------------------------------------------ running
@dataclass
class _Task:
    card: Any  # ParsedCard
    target: FleetTarget
    submitted: float
    missing_since: float | None = None
    notes: list[str] = field(default_factory=list)


def run_fleet(service: RunRecorder, address: str, cards: list[Any], *, progress: ProgressFn | None = None, gates: bool = True,
              verifier: bool = True, record: bool = True, recorded_by: str = "reverify (fleet)",
              cpu_smoke: bool = False, platforms: list[str] | None = None,
              task_timeout_s: float | None = None) -> FleetRun:

    ray = connect(address)
    try:
        return _run(ray, service, address, cards, progress, gates, verifier, record, recorded_by, cpu_smoke,
                    platforms, task_timeout_s or DEFAULT_TASK_TIMEOUT_S, now)
    finally:
        ray.shutdown()


def _run(ray, service, address, cards, progress, gates, verifier, record, recorded_by, cpu_smoke, platforms,
         task_timeout_s, now) -> FleetRun:


    started = now()
    targets = offered_targets(ray)
    if platforms:
        wanted = {p.lower() for p in platforms}
        targets = [t for t in targets if t.generation.lower() in wanted or t.key.lower() in wanted]
    if not targets:
        raise FleetError(f"no live node of the Ray cluster at {address} advertises "
                         + (f"the platform(s) {', '.join(platforms)}" if platforms else "a platform (gpu_gen:* resource)")
                         + f": start one with `skill-server fleet-node --address {address}`; nothing was run or written")
    rev = None if is_embedded(service.project_root) else read_git_revision(service.project_root).text
    options = FleetOptions(gates=gates, verifier=verifier, cpu_smoke=cpu_smoke, recorded_by=recorded_by, git_rev=rev)
    remote = ray.remote(run_card_on_node)
    env = {"env_vars": {"TRITON_INTERPRET": "1"}} if cpu_smoke else None
    pending: dict[Any, _Task] = {}
    outcomes: list[FleetOutcome] = []
    total = len(cards) * len(targets)

    def say(task: _Task, event: str, message: str) -> None:
        if progress is not None:
            progress(FleetProgress(done=len(outcomes), total=total, card_id=task.card.card.id, target=task.target.key,
                                   event=event, message=message))

    for parsed in cards:
        for target in targets:
            ref = remote.options(num_cpus=1, resources={target.resource: 1}, max_retries=1, retry_exceptions=False,
                                 name=f"reverify {parsed.card.id} @ {target.key}", runtime_env=env).remote(
                parsed.card.id, target.model_dump_json(), options.model_dump_json())
            task = _Task(card=parsed, target=target, submitted=time.monotonic())
            pending[ref] = task
            say(task, "submitted", f"asks for {target.resource}")

    def finish(task: _Task, outcome: FleetOutcome) -> None:
        outcomes.append(outcome)
        say(task, outcome.outcome if outcome.outcome != "done" else "done",
            f"{outcome.status}" + (f" on {outcome.node}" if outcome.node else "") + f": {short(outcome.reason, 120)}")

    try:
        last_check = 0.0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for ref in ready:
                task = pending.pop(ref)
                try:
                    answer = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - RayError: node died, worker crashed, task raised
                    finish(task, _lost(service, task, _describe(exc), record, recorded_by, address))
                    continue
                finish(task, _accept(service, task, answer, record, recorded_by, address))
            clock = time.monotonic()
            if clock - last_check >= 1.0 and pending:
                last_check = clock
                offered = _offered_resources(ray)
                for ref, task in list(pending.items()):
                    why = None
                    if task.target.resource in offered:
                        task.missing_since = None
                    else:
                        task.missing_since = task.missing_since or clock
                        if clock - task.missing_since >= LOST_GRACE_S:
                            why = (f"no live node offers {task.target.resource} any more (the node running it was "
                                   "lost, and Ray had no other node to retry on)")
                    if why is None and clock - task.submitted > task_timeout_s:
                        why = f"did not finish within {task_timeout_s:.0f} s"
                    if why is not None:
                        ray.cancel(ref, force=True)
                        del pending[ref]
                        finish(task, _lost(service, task, why, record, recorded_by, address))
    finally:
        for ref in pending:  # an error while recording: leave nothing running on the cluster
            ray.cancel(ref, force=True)
    return FleetRun(address=address, started_at=started, finished_at=now(), targets=targets, outcomes=outcomes,
                       ledger=service.ledger.location if record else None)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {short(text, 300)}"


def _accept(service, task: _Task, answer: Any, record: bool, recorded_by: str, address: str) -> FleetOutcome:
    """Check a node's answer against the driver's own card and record it; a refusal is
    recorded as not re-verified, like a lost task."""

    card = task.card.card
    try:
        run = NodeRun.model_validate_json(answer) if isinstance(answer, str | bytes) else None
        if run is None:
            raise ValueError(f"the node answered a {type(answer).__name__}, not a NodeRun")
        problem = _refusal(task, run)
        if problem:
            raise ValueError(problem)
        report, records = None, []
        if run.report_json is not None:

            report = VerificationReport.model_validate_json(run.report_json)
            bind_report(report, {card.id: card}, card.id)
            reported_on = report.provenance.platform_info()
            if not task_cpu(run) and reported_on.key != run.platform.key:
                raise ValueError(f"the report was measured on {reported_on.key}, the node says {run.platform.key}")
            records = derive_records(report, card, recorded_by, "reverify").records
    except ValueError as exc:  # pydantic ValidationError, ReportRejected (a LedgerError) and ours
        return _lost(service, task, f"the node's answer was refused: {short(str(exc), 300)}", record, recorded_by,
                     address, outcome="rejected")
    node = f"{run.hostname} ({run.node_id[:8]})"
    service.record_card_run(CardRun(result=run.result, report=report, records=records), run.platform, recorded_by,
                            _git_rev(service), record=record,
                            detail_extra={"fleet": {"address": address, "node": node, "requested": task.target.key,
                                                    "seconds": round(run.seconds, 3)}})
    note = None
    if run.platform.generation != task.target.generation and not task_cpu(run):
        note = f"the node advertises {task.target.resource} but measured on {run.platform.key}"
    return FleetOutcome(card_id=card.id, target=task.target, outcome="done", status=run.result.status,
                        reason=run.result.reason if note is None else f"{note}; {run.result.reason}", node=node,
                        measured_on=run.platform.key, report_id=run.result.report_id, seconds=run.seconds,
                        attempts_note=note)


def task_cpu(run: NodeRun) -> bool:
    """A CPU smoke run measures on the CPU whatever the node advertises."""
    return run.platform.runtime == "cpu"


def _refusal(task: _Task, run: NodeRun) -> str | None:

    if run.card_id != task.card.card.id or run.target != task.target:
        return f"it answers for {run.card_id} @ {run.target.key}, the task was {task.card.card.id} @ {task.target.key}"
    if run.card_digest != card_digest(task.card.folder):
        return (f"the node's {run.card_id}/SKILL.md differs from this server's: install the same gpu-skill-server "
                "version on every node")
    if run.result.card_id != run.card_id or run.result.platform != run.platform.key:
        return "its result names another card or platform than it ran"
    return None


def _git_rev(service: RunRecorder) -> str | None:


    return None if is_embedded(service.project_root) else read_git_revision(service.project_root).text


def _lost(service, task: _Task, why: str, record: bool, recorded_by: str, address: str,
          outcome: str = "lost") -> FleetOutcome:
    """Record that (card, platform) was not re-verified in this run, and why."""

    target = task.target
    reason = f"fleet: not re-verified on {target.key}: {why}"
    try:
        platform = normalise_platform(PlatformInfo(device=f"Ray fleet node ({target.key})", generation=target.generation,
                                                   runtime=target.runtime))
    except ValueError:
        platform = PlatformInfo(device=f"Ray fleet node ({target.key})", generation=None, runtime=target.runtime)
    result = CardReverification(card_id=task.card.card.id, platform=platform.key, status="NOT_APPLICABLE_HERE",
                                reason=reason)
    service.record_card_run(CardRun(result=result), platform, recorded_by, _git_rev(service), record=record,
                            detail_extra={"fleet": {"address": address, "outcome": outcome, "why": why,
                                                    "requested": target.key}})
    return FleetOutcome(card_id=task.card.card.id, target=target, outcome=outcome, status="NOT_APPLICABLE_HERE",
                        reason=reason, seconds=time.monotonic() - task.submitted)
