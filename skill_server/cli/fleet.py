"""Fleet commands: ``fleet-node`` (join a Ray cluster advertising this box's platform) and
the terminal side of ``reverify --ray`` (progress bar, summary table, exit code)."""
from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
from typing import Literal

from pydantic import Field, model_validator

from skill_server.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    EXIT_OK,
    CommandArgs,
    emit_json,
    handles_errors,
    service_from,
)
from skill_server.fleet.models import VENDOR_RUNTIME
from skill_server.fleet.node import node_resources, ray_start_command
from skill_server.ledger.models import PlatformInfo, normalise_platform
from verifiers.provenance import detect_platform


class FleetNodeArgs(CommandArgs):
    """``fleet-node``: ``ray start`` advertising this box's platform."""

    head: bool = Field(False, description="start the cluster's head node here")
    address: str | None = Field(None, description="HOST:PORT of the head to join")
    port: int | None = Field(None, description="head: GCS port (default 6379)")
    generation: str | None = Field(None, description="advertise this generation instead of the detected one")
    vendor: Literal["amd", "nvidia", "cpu"] | None = Field(None, description="with generation")
    num_cpus: int | None = Field(None, description="CPUs Ray may schedule here (default: Ray's count)")
    node_ip_address: str | None = Field(None, description="the address other nodes reach this one at")
    print_only: bool = Field(False, description="print the ray start command instead of running it")
    ray_args: list[str] = Field(default_factory=list, description="extra `ray start` arguments (after --)")

    @model_validator(mode="after")
    def _vendor_with_generation(self) -> FleetNodeArgs:
        if self.generation and not self.vendor:
            raise ValueError("--generation needs --vendor (amd, nvidia or cpu)")
        return self


class ReverifyArgs(CommandArgs):
    """``reverify``: the cards' claims re-checked on this box, or on a Ray fleet with ``ray``
    (its parser and local run are in ``skill_server.cli.ledger``; the fleet run is here)."""

    card: str | None = Field(None, description="one card (default: all)")
    no_gates: bool = Field(False, description="skip the static gfx950 gates and the gfx950-emulated parity run")
    no_verifier: bool = Field(False, description="skip the verifier even where a GPU is present")
    no_record: bool = Field(False, description="do not write the statuses to the ledger")
    by: str | None = Field(None, description="who records (default: $SKILL_SERVER_USER or the login name)")
    quiet: bool = Field(False, description="no progress on stderr")
    ray: str | None = Field(None, description="HOST:PORT of a Ray head: one task per (card, platform) there")
    platform: list[str] | None = Field(None, description="with ray: only these generations / platform keys")
    cpu_smoke: bool = Field(False, description="with ray: the CPU problems' plumbing check")
    task_timeout: float | None = Field(None, description="with ray: seconds before a task is cancelled")
    as_json: bool = False

    @model_validator(mode="after")
    def _fleet_options_need_ray(self) -> ReverifyArgs:
        if not self.ray and (self.platform or self.cpu_smoke or self.task_timeout):
            raise ValueError("--platform, --cpu-smoke and --task-timeout apply to a fleet run: add --ray HOST:PORT")
        return self


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fleet-node", help="start Ray on this box advertising its GPU generation and vendor",
                       description="Detect this box's platform with the project's detector and run `ray start` "
                       "with the resources fleet re-verification asks for (gpu_gen:<generation>, "
                       "gpu_vendor:<vendor>, one unit each). Arguments after -- go to `ray start` unchanged.")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--head", action="store_true", help="start the cluster's head node here")
    where.add_argument("--address", help="HOST:PORT of the head to join")
    p.add_argument("--port", type=int, default=None, help="head: GCS port (default 6379)")
    p.add_argument("--generation", help="advertise this generation instead of the detected one (a box the "
                   "detector cannot see into)")
    p.add_argument("--vendor", choices=["amd", "nvidia", "cpu"], help="with --generation")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs Ray may schedule here (default: Ray's count)")
    p.add_argument("--node-ip-address", default=None, help="the address other nodes reach this one at")
    p.add_argument("--print", action="store_true", dest="print_only", help="print the ray start command instead of running it")
    p.add_argument("ray_args", nargs=argparse.REMAINDER, help="-- then extra `ray start` arguments")


@handles_errors
def cmd_fleet_node(args: FleetNodeArgs) -> int:
    if args.generation and args.vendor:
        platform = PlatformInfo(device="(given)", generation=args.generation, runtime=VENDOR_RUNTIME[args.vendor])
    else:
        platform = normalise_platform(detect_platform())
    resources = node_resources(platform)
    extra = [a for a in args.ray_args if a != "--"]
    argv = ray_start_command(resources, head=args.head, address=args.address, port=args.port, num_cpus=args.num_cpus,
                             node_ip=args.node_ip_address, extra=extra)
    print(f"fleet-node: {platform.key} ({platform.device}): {shlex.join(argv)}", file=sys.stderr)
    if args.print_only:
        print(shlex.join(argv))
        return EXIT_OK
    return subprocess.call(argv, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})


# ------------------------------------------------------------------ reverify --ray
class ProgressBar:
    """One redrawn line on a terminal; one line per event otherwise (logs, CI)."""

    def __init__(self, stream=sys.stderr, quiet: bool = False):
        self.stream, self.quiet = stream, quiet
        self.tty = hasattr(stream, "isatty") and stream.isatty()

    def __call__(self, ev) -> None:  # noqa: ANN001 - FleetProgress
        if self.quiet:
            return
        if self.tty:
            width = 30
            filled = width * ev.done // max(ev.total, 1)
            line = f"\r[{'#' * filled}{'.' * (width - filled)}] {ev.done}/{ev.total}  {ev.card_id} @ {ev.target}: {ev.event}"
            self.stream.write(line[:160].ljust(160) + ("\n" if ev.done == ev.total and ev.event != "submitted" else ""))
        else:
            self.stream.write(f"[{ev.done}/{ev.total}] {ev.card_id} @ {ev.target}: {ev.event}: {ev.message}\n")
        self.stream.flush()


def run_reverify_on_fleet(args: ReverifyArgs) -> int:
    """``reverify --ray ADDRESS`` (called by ``skill_server.cli.ledger.cmd_reverify``)."""

    svc = service_from(args)
    # Ray's driver threads print cluster events (a raylet that died, ...) to stdout: send them to
    # stderr while the run lasts, so stdout carries only the table or the JSON document
    with contextlib.redirect_stdout(sys.stderr):
        report = svc.reverify_on_fleet(args.ray, card_id=args.card, progress=ProgressBar(quiet=args.quiet),
                                       gates=not args.no_gates, verifier=not args.no_verifier,
                                       record=not args.no_record, recorded_by=args.by, cpu_smoke=args.cpu_smoke,
                                       platforms=args.platform, task_timeout_s=args.task_timeout)
    if args.as_json:
        emit_json(report)
    else:
        print(f"fleet {report.address}: {len(report.targets)} platform(s) ({', '.join(t.key for t in report.targets)}), "
              f"{len(report.outcomes)} task(s), {(report.finished_at - report.started_at).total_seconds():.0f} s")
        print(report.table())
        if report.ledger:
            print(f"recorded in {report.ledger}")
        for o in report.findings:
            if o.outcome != "done":
                print(f"  {o.card_id} @ {o.target.key}: {o.outcome}: {o.reason}", file=sys.stderr)
    return EXIT_FINDINGS if report.findings else EXIT_OK


__all__ = ["EXIT_BAD_INPUT", "FleetNodeArgs", "ProgressBar", "ReverifyArgs", "register", "run_reverify_on_fleet"]
