"""The server's one way to run its verifier on a card: the card's binding decides the arms.

CLI ``verify`` and the MCP tool ``run_verifier`` (both through the verification service) and
re-verification (``reverify.stages.default_verifier_runner``, local and on a fleet node) all
call ``run_card_verifier``; nothing else in the server calls ``verifiers.api.verify``. The
card's ``verifier`` block binds a baseline (and a reference) arm per platform; the platform is
the device the judge opens, so the whole map travels with the job and the judge picks the
entry for its platform (``verifiers.judge.process.pick_baseline``). An explicit ``baseline``
overrides it.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

from skill_server.cards.schema import VerifierBinding
from skill_server.locations import secret_folders
from skill_server.service.errors import VerificationCancelled
from verifiers.api import VerifyCancelled, verify
from verifiers.arms import sandbox
from verifiers.options import VerifyOptions
from verifiers.report import VerificationReport

Progress = Callable[[int, int, str], None]


def run_card_verifier(binding: VerifierBinding, candidate: str, *, baseline: str | None = None,
                      shapes: list[str] | None = None, options: VerifyOptions | None = None,
                      progress: Progress | None = None, cancel: threading.Event | None = None,
                      plot_path: str | None = None) -> VerificationReport:
    """Verify ``candidate`` on the card's problem with the card's arms. Raises ValueError /
    KeyError for bad input before any process starts, ``VerificationCancelled`` when ``cancel``
    was set during the run (every process of the run stopped)."""
    for folder in secret_folders():
        sandbox.protect(folder)
    # lazy: the verifier's launch and timing modules (about a second of imports) stay off the
    # server's start-up path; they load with the first verification

    try:
        return verify(binding.problem, candidate, baseline=baseline, shapes=shapes, options=options,
                      progress=progress, plot_path=plot_path, baselines=dict(binding.baseline), cancel=cancel)
    except VerifyCancelled as exc:
        raise VerificationCancelled(str(exc)) from None


__all__ = ["run_card_verifier"]
