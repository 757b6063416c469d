"""The ``verify`` command's arguments, options, progress display and exit codes.

The command itself is ``skill_server.cli.verify.cmd_verify`` (one verify command: the card's
binding decides the arms, the result is recorded unless ``--no-record``).

Exit codes: 0 the verification ran and the candidate is correct (verdict FASTER, SLOWER,
NO_DIFFERENCE, or INCONCLUSIVE when timing was switched off), 1 FAIL, 2 bad input,
3 ERROR (the harness or the problem could not decide).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from verifiers.options import VerifyOptions

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of the verify command except the card positional."""
    parser.add_argument("--candidate", required=True, metavar="FILE.py:FUNC",
                        help="the rewrite: FILE.py:FUNC, package.module:FUNC, or arm:NAME (a problem arm)")
    parser.add_argument("--baseline", metavar="ARM", default=None,
                        help="baseline arm of the problem (default: the one the card's verifier binding names "
                             "for this platform)")
    parser.add_argument("--shape", metavar="MxNxK", action="append", dest="shapes", default=None,
                        help="shape to verify (repeatable; default: the problem's shapes)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON on stdout")
    parser.add_argument("--report", metavar="PATH", default=None, help="also write the JSON report to PATH")
    parser.add_argument("--plot", metavar="PNG", default=None, help="write the per-round timing plot")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved A/B rounds (>= 5)")
    parser.add_argument("--seed", type=int, action="append", dest="seeds", default=None,
                        help="parity seed (repeatable; default: the problem's seeds)")
    parser.add_argument("--no-secret-seed", action="store_true", help="skip the secret parity seed")
    parser.add_argument("--noise-floor", type=float, default=None, help="the card's declared noise floor (e.g. 0.01)")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS", help="per-shape worker time limit")
    parser.add_argument("--device", default=None, help="auto | cpu | cuda | cuda:N | gfx950-emulated (FlyDSL arms on "
                        "the gfx950 emulator: parity only)")
    parser.add_argument("--rocprof-trace", metavar="CSV", default=None, help="rocprofv3 kernel trace of the candidate")
    parser.add_argument("--rocprof-baseline-trace", metavar="CSV", default=None, help="rocprofv3 kernel trace of the baseline")
    parser.add_argument("--no-timing", action="store_true", help="parity and signature only")
    parser.add_argument("--no-profile", action="store_true", help="skip the runtime-signature / segment profiling")
    parser.add_argument("--options", metavar="JSON", default=None,
                        help="further VerifyOptions as a JSON object or a path to a JSON file")
    parser.add_argument("--require-sandbox", action="store_true",
                        help="refuse to run when the arms cannot be confined (no Landlock); "
                             "SKILL_SERVER_REQUIRE_SANDBOX=1 does the same")
    parser.add_argument("--quiet", action="store_true", help="no progress display on stderr")


def options_from_args(args: argparse.Namespace) -> Any:
    """Build VerifyOptions from the parsed arguments (flags override ``--options``)."""

    base: dict[str, Any] = {}
    if args.options:
        text = args.options
        path = Path(text)
        if not text.lstrip().startswith("{") and path.is_file():
            text = path.read_text()
        try:
            base = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--options: not JSON ({exc})") from None
        if not isinstance(base, dict):
            raise ValueError("--options: expected a JSON object of VerifyOptions fields")
    flags = {
        "rounds": args.rounds,
        "seeds": args.seeds,
        "noise_floor": args.noise_floor,
        "time_limit_s": args.time_limit,
        "device": args.device,
        "rocprof_trace": args.rocprof_trace,
        "rocprof_baseline_trace": args.rocprof_baseline_trace,
    }
    base.update({k: v for k, v in flags.items() if v is not None})
    if args.no_secret_seed:
        base["secret_seed"] = False
    if args.no_timing:
        base["timing"] = False
    if args.no_profile:
        base["profile"] = False
    if getattr(args, "require_sandbox", False):
        base["require_sandbox"] = True
    return VerifyOptions.model_validate(base)


class ProgressDisplay:
    """One updating line on a terminal; one line per new message otherwise."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last = ""

    def __call__(self, done: int, total: int, message: str) -> None:
        frac = done / total if total else 0.0
        if self.tty:
            bar = "#" * int(frac * 24)
            self.stream.write(f"\r[{bar:<24}] {frac:4.0%} {message[:70]:<70}")
            self.stream.flush()
        elif message != self.last:
            self.stream.write(f"[{frac:4.0%}] {message}\n")
            self.stream.flush()
        self.last = message

    def close(self) -> None:
        if self.tty and self.last:
            self.stream.write("\n")
            self.stream.flush()


def exit_code(verdict: str) -> int:
    if verdict == "FAIL":
        return EXIT_FAIL
    if verdict == "ERROR":
        return EXIT_ERROR
    return EXIT_OK
