"""Fleet commands: ``fleet-node`` (join a Ray cluster advertising this box's platform) and
the terminal side of ``reverify --ray`` (progress bar, summary table, exit code)."""
from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys

from skill_server.cli.common import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_OK, emit_json, handles_errors, service_from
from skill_server.fleet.models import VENDOR_RUNTIME
from skill_server.fleet.node import node_resources, ray_start_command
from skill_server.ledger.models import PlatformInfo, normalise_platform
from verifiers.provenance import detect_platform


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
    p.add_argument("--print", action="store_true", help="print the ray start command instead of running it")
    p.add_argument("ray_args", nargs=argparse.REMAINDER, help="-- then extra `ray start` arguments")
    p.set_defaults(handler=cmd_fleet_node)


@handles_errors
def cmd_fleet_node(args) -> int:


    if args.generation:
        if not args.vendor:
            raise ValueError("--generation needs --vendor (amd, nvidia or cpu)")
        platform = PlatformInfo(device="(given)", generation=args.generation, runtime=VENDOR_RUNTIME[args.vendor])
    else:
        platform = normalise_platform(detect_platform())
    resources = node_resources(platform)
    extra = [a for a in args.ray_args if a != "--"]
    argv = ray_start_command(resources, head=args.head, address=args.address, port=args.port, num_cpus=args.num_cpus,
                             node_ip=args.node_ip_address, extra=extra)
    print(f"fleet-node: {platform.key} ({platform.device}): {shlex.join(argv)}", file=sys.stderr)
    if args.print:
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


def run_reverify_on_fleet(args) -> int:
    """``reverify --ray ADDRESS`` (called by cli_ledger.cmd_reverify)."""

    svc = service_from(args)
    # Ray's driver threads print cluster events (a raylet that died, ...) to stdout: send them to
    # stderr while the run lasts, so stdout carries only the table or the JSON document
    with contextlib.redirect_stdout(sys.stderr):
        report = svc.reverify_on_fleet(args.ray, card_id=args.card, progress=ProgressBar(quiet=args.quiet),
                                       gates=not args.no_gates, verifier=not args.no_verifier,
                                       record=not args.no_record, recorded_by=args.by, cpu_smoke=args.cpu_smoke,
                                       platforms=args.platform, task_timeout_s=args.task_timeout)
    if args.json:
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


__all__ = ["EXIT_BAD_INPUT", "ProgressBar", "register", "run_reverify_on_fleet"]
