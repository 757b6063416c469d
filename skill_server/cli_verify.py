"""Verification commands: check-kernel (static gfx950 gates, no GPU) and verify (on-box
parity and A/B through the verifier subprocess)."""
from __future__ import annotations

import argparse

from .cli_common import handles_errors, service_from


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-kernel",
                       help="compile a card's FlyDSL kernels for gfx950 (no GPU needed) and run the static gates")
    p.add_argument("card", help="card id (its kernels live in kernels/<verifier.problem>/)")
    p.add_argument("--target", help="one compile target (default: all of the card's targets)")
    p.add_argument("--negative", action="store_true", help="also run the deliberately wrong NEGATIVE_TARGETS")
    p.add_argument("--no-cache", action="store_true", help="recompile even when a cached result is valid")
    p.add_argument("--emulate", action="store_true",
                   help="also run the card's FlyDSL arms on the gfx950 emulator (CPU) against the problem's oracle")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_check_kernel)

    from verifiers.cli_support import add_verify_arguments

    p = sub.add_parser("verify", help="verify a rewrite on this box: parity, runtime signature, interleaved A/B")
    p.add_argument("card", help="card id; its verifier binding names the problem")
    add_verify_arguments(p)
    p.set_defaults(handler=cmd_verify)


def kernel_folder(args, card_id: str) -> str:
    """The kernels folder a card binds to (its verifier problem), else the card id."""
    parsed = service_from(args).card(card_id)
    return parsed.card.verifier.problem if parsed.card.verifier else parsed.card.id


@handles_errors
def cmd_verify(args) -> int:
    # exit codes: 0 ran and correct, 1 FAIL, 2 bad input, 3 ERROR (the harness could not decide)
    from verifiers.cli_support import run_verify_command

    return run_verify_command(args, service_from(args).problem_of(args.card))


@handles_errors
def cmd_check_kernel(args) -> int:
    # exit codes: 0 every gate as promised, 1 a gate failed, 2 unknown card/target, 3 skipped (no toolchain)
    from verifiers.gfx950.report import check_kernel_command

    folder = kernel_folder(args, args.card)
    kwargs = dict(as_json=args.json, include_negative=args.negative, use_cache=not args.no_cache, verbose=args.verbose)
    if args.emulate:  # gates, then the FlyDSL arms on the gfx950 emulator (emulated parity)
        from verifiers.gfx950.emulator.cli import check_kernel_and_emulate

        return check_kernel_and_emulate(folder, args.target, **kwargs)
    return check_kernel_command(folder, args.target, **kwargs)
