"""The ``verify`` command's arguments, options, progress display and exit codes.

The command itself is ``skill_server.cli.verify.cmd_verify`` (one verify command: the card's
binding decides the arms, the result is recorded unless ``--no-record``).

Exit codes: 0 the verification ran and the candidate is correct (verdict FASTER, SLOWER,
NO_DIFFERENCE, or INCONCLUSIVE when timing was switched off), 1 FAIL, 2 bad input,
3 ERROR (the harness or the problem could not decide).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, TextIO

from pydantic import Field, ValidationError, field_validator, model_validator

from skill_server.cli.common import CommandArgs
from skill_server.json_input import json_object
from verifiers.arms.candidate import parse_candidate
from verifiers.options import VerifyOptions
from verifiers.problem import EMULATED_PLATFORM

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3
DEVICE_FORM = re.compile(rf"(auto|cpu|cuda(:\d+)?|rocm|hip|{re.escape(EMULATED_PLATFORM)})")
# the flag that sets each VerifyOptions field (others come only through --options JSON)
OPTION_FLAGS = {"rounds": "--rounds", "seeds": "--seed", "secret_seed": "--no-secret-seed",
                "noise_floor": "--noise-floor", "time_limit_s": "--time-limit", "device": "--device",
                "rocprof_trace": "--rocprof-trace", "rocprof_baseline_trace": "--rocprof-baseline-trace",
                "timing": "--no-timing", "profile": "--no-profile", "require_sandbox": "--require-sandbox"}


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of the verify command except the card positional."""
    parser.add_argument("--candidate", required=True, metavar="FILE.py:FUNC",
                        help="the rewrite: FILE.py:FUNC, package.module:FUNC, or arm:NAME (a problem arm)")
    parser.add_argument("--baseline", metavar="ARM", default=None,
                        help="baseline arm of the problem (default: the one the card's verifier binding names "
                             "for this platform)")
    parser.add_argument("--shape", metavar="MxNxK", action="append", dest="shapes", default=None,
                        help="shape to verify (repeatable; default: the problem's shapes)")
    parser.add_argument("--json", action="store_true", dest="as_json", help="print the full report as JSON on stdout")
    parser.add_argument("--report", metavar="PATH", type=Path, default=None, help="also write the JSON report to PATH")
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


class VerifyArgs(CommandArgs):
    """``verify``: a candidate against a card's problem on this box. The flags that are
    ``VerifyOptions`` fields are checked as options when the arguments are built, so a bad
    value never starts the preflight or a process."""

    card: str = Field(description="card id; its verifier binding names the problem")
    candidate: str = Field(description="FILE.py:FUNC, package.module:FUNC, or arm:NAME (a problem arm)")
    baseline: str | None = Field(None, description="baseline arm (default: the card binding's for this platform)")
    shapes: list[str] | None = Field(None, description="shapes to verify, in the problem's shape text (default: its "
                                                       "shapes); the problem's dimensions decide the form")
    as_json: bool = Field(False, description="print the full report as JSON on stdout")
    report: Path | None = Field(None, description="also write the signed report envelope here")
    plot: str | None = Field(None, description="write the per-round timing plot (PNG) here")
    rounds: int | None = Field(None, description="interleaved A/B rounds")
    seeds: list[int] | None = Field(None, description="parity seeds (default: the problem's)")
    no_secret_seed: bool = Field(False, description="skip the secret parity seed")
    noise_floor: float | None = Field(None, description="the card's declared noise floor")
    time_limit: float | None = Field(None, description="per-shape worker time limit, seconds")
    device: str | None = Field(None, description="auto | cpu | cuda | cuda:N | gfx950-emulated")
    rocprof_trace: str | None = Field(None, description="rocprofv3 kernel trace CSV of the candidate")
    rocprof_baseline_trace: str | None = Field(None, description="rocprofv3 kernel trace CSV of the baseline")
    no_timing: bool = Field(False, description="parity and signature only")
    no_profile: bool = Field(False, description="skip the runtime-signature / segment profiling")
    options: str | None = Field(None, description="further VerifyOptions: a JSON object or a JSON file's path")
    require_sandbox: bool = Field(False, description="refuse to run arms that cannot be confined")
    quiet: bool = Field(False, description="no progress display on stderr")
    no_record: bool = Field(False, description="do not store the result in the ledger")
    by: str | None = Field(None, description="who records (default: $SKILL_SERVER_USER or the login name)")

    @field_validator("candidate")
    @classmethod
    def _candidate(cls, value: str) -> str:
        parse_candidate(value)  # the syntax only: the verifier loads it
        return value

    @model_validator(mode="after")
    def _options_hold(self) -> VerifyArgs:
        self.verify_options()
        return self

    def verify_options(self) -> VerifyOptions:
        """The ``VerifyOptions`` these arguments ask for (flags override ``--options``);
        ``ValueError`` naming the flag when they do not hold."""
        base = _options_json(self.options)
        flags = {"rounds": self.rounds, "seeds": self.seeds, "noise_floor": self.noise_floor,
                 "time_limit_s": self.time_limit, "device": self.device, "rocprof_trace": self.rocprof_trace,
                 "rocprof_baseline_trace": self.rocprof_baseline_trace}
        base.update({k: v for k, v in flags.items() if v is not None})
        switches = {"secret_seed": self.no_secret_seed, "timing": self.no_timing, "profile": self.no_profile}
        base.update({k: False for k, off in switches.items() if off})
        if self.require_sandbox:
            base["require_sandbox"] = True
        try:
            options = VerifyOptions.model_validate(base)
        except ValidationError as exc:
            raise ValueError("; ".join(_option_error(e) for e in exc.errors())) from None
        if not DEVICE_FORM.fullmatch(options.device.strip().lower()):
            raise ValueError(f"{OPTION_FLAGS['device']} {options.device!r}: expected auto, cpu, cuda, cuda:N "
                             f"or {EMULATED_PLATFORM}")
        return options


def _options_json(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    path = Path(text)
    if not text.lstrip().startswith("{") and path.is_file():
        text = path.read_text()
    return json_object("--options", text, "VerifyOptions fields")


def _option_error(err: Any) -> str:
    loc = [str(p) for p in err.get("loc", ())]
    flag = OPTION_FLAGS.get(loc[0], "--options " + loc[0]) if loc else "--options"
    return f"{flag}{''.join('.' + p for p in loc[1:])}: {err['msg']}"


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
