"""Verification commands: check-kernel (static gfx950 gates, no GPU) and verify (on-box
parity and A/B through the verifier subprocess; the result is recorded in the ledger as
``verified`` unless ``--no-record``)."""
from __future__ import annotations

import argparse
import signal
import sys

from pydantic import Field

from skill_server.cli.common import CommandArgs, emit_json, handles_errors, service_from
from skill_server.cli.verify_support import ProgressDisplay, VerifyArgs, add_verify_arguments, exit_code
from skill_server.doctor.preflight import verify_refusal
from verifiers.gfx950.emulator.cli import EXIT_USAGE, check_kernel_and_emulate
from verifiers.gfx950.report import check_kernel_command


class CheckKernelArgs(CommandArgs):
    """``check-kernel``: a card's FlyDSL kernels compiled for gfx950 and gated."""

    card: str = Field(description="card id (its kernels live in the folder its verifier binding names)")
    target: str | None = Field(None, description="one compile target (default: all of the card's)")
    negative: bool = Field(False, description="also run the deliberately wrong NEGATIVE_TARGETS")
    no_cache: bool = Field(False, description="recompile even when a cached result is valid")
    emulate: bool = Field(False, description="also run the card's FlyDSL arms on the gfx950 emulator")
    full: bool = Field(False, description="with emulate: the FULL_EMULATED_ARMS, at the problem's real shapes")
    verbose: bool = False
    as_json: bool = False


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-kernel",
                       help="compile a card's FlyDSL kernels for gfx950 (no GPU needed) and run the static gates")
    p.add_argument("card", help="card id (its kernels live in kernels/<verifier.problem>/)")
    p.add_argument("--target", help="one compile target (default: all of the card's targets)")
    p.add_argument("--negative", action="store_true", help="also run the deliberately wrong NEGATIVE_TARGETS")
    p.add_argument("--no-cache", action="store_true", help="recompile even when a cached result is valid")
    p.add_argument("--emulate", action="store_true",
                   help="also run the card's FlyDSL arms on the gfx950 emulator (CPU) against the problem's oracle")
    p.add_argument("--full", action="store_true",
                   help="with --emulate: run the card's FULL_EMULATED_ARMS, its kernel at the problem's real shape(s) "
                        "with the whole K loop (block-scale card: 4096x2048x7168, about 23.5 M wave-instructions), "
                        "instead of the small shapes; expect minutes: about 2-4 min per shape on this 2-core box, "
                        "about 26 min for the MoE card's stage 2 (M=16384 N=2880 K=2880 E=128: 425 M)")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--json", action="store_true", dest="as_json")


    p = sub.add_parser("verify", help="verify a rewrite on this box: parity, runtime signature, interleaved A/B")
    p.add_argument("card", help="card id; its verifier binding names the problem")
    add_verify_arguments(p)
    p.add_argument("--no-record", action="store_true", help="do not store the result in the ledger")
    p.add_argument("--by", help="who records (default: $SKILL_SERVER_USER or the login name)")
    p.add_argument("--ledger", metavar="PATH", default=argparse.SUPPRESS,
                   help="ledger file (default: $SKILL_SERVER_LEDGER, else <project>/var/ledger.sqlite)")


def kernel_folder(args: CommandArgs, card_id: str) -> str:
    """The kernels folder a card binds to (its verifier problem), else the card id."""
    parsed = service_from(args).card(card_id)
    return parsed.card.verifier.problem if parsed.card.verifier else parsed.card.id


@handles_errors
def cmd_verify(args: VerifyArgs) -> int:
    # exit codes: 0 ran and correct, 1 FAIL, 2 bad input, 3 ERROR (the harness could not decide, or the
    # box cannot run it: the doctor's line says what is missing)
    svc = service_from(args)
    options = args.verify_options()  # held when the arguments were built
    refusal = verify_refusal(options.device, options.profile)  # a box that cannot run it: the doctor's line
    if refusal:
        print(f"skill-server verify: refused on this box (`skill-server doctor` for the full report):\n{refusal}",
              file=sys.stderr)
        return 3
    # SIGTERM (a scheduler's timeout, an agent stopping its tool) unwinds like Ctrl-C: the runner
    # stops the judge and its arms before this process exits (on SIGKILL they see their pipe close)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    display = None if args.quiet else ProgressDisplay()
    try:
        outcome = svc.verify(args.card, args.candidate, baseline=args.baseline, shapes=args.shapes, options=options,
                             progress=display, record=not args.no_record,
                             recorded_by=f"{args.by} (verify)" if args.by else None,
                             not_recorded="not recorded (--no-record)", plot_path=args.plot)
    finally:
        if display:
            display.close()
    report = outcome.report
    if args.report:  # the envelope record --from-report takes back (signed: this server's own run)
        signed = (svc.get_report(outcome.report_id).envelope_json if outcome.recorded is not None
                  else svc.signed_envelope(report).model_dump_json())
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(signed)
    if args.as_json:
        emit_json(report)
    else:
        print(report.summary())
        if report.plot_path:
            print(f"plot: {report.plot_path}")
        if outcome.recorded is not None:
            r = outcome.recorded
            print(f"recorded {len(r.ids)} result(s) as {r.level}" + (f" (ids {', '.join(map(str, r.ids))})" if r.ids else "")
                  + f"; report {outcome.report_id}" + (f"; no result for: {'; '.join(r.skipped)}" if r.skipped else ""))
        else:
            print(f"{outcome.not_recorded}; report {outcome.report_id}")
    return exit_code(report.verdict)


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@handles_errors
def cmd_check_kernel(args: CheckKernelArgs) -> int:
    # exit codes: 0 every gate as promised, 1 a gate failed, 2 unknown card/target, 3 skipped (no toolchain)
    folder = kernel_folder(args, args.card)
    kwargs = dict(as_json=args.as_json, include_negative=args.negative, use_cache=not args.no_cache, verbose=args.verbose)
    if args.emulate:  # gates, then the FlyDSL arms on the gfx950 emulator (emulated parity)
        return check_kernel_and_emulate(folder, args.target, full=args.full, **kwargs)
    if args.full:
        print("skill-server check-kernel: --full applies to --emulate (the emulated arms at the real shapes); "
              "add --emulate", file=sys.stderr)
        return EXIT_USAGE
    return check_kernel_command(folder, args.target, **kwargs)
