"""How current a card's claims are, from its latest re-verification per platform.

Pure data and one pure function: the ledger supplies the latest status rows, the
service joins the result onto match / recipe / list answers. The matcher never reads
the ledger.

Statuses (one per card and platform, written by ``skill-server reverify``):

CONFIRMED
    Every check the card's claims need ran here and held: prerequisites met, no static
    gate failed (gates that could not run here are named in the reason), parity passed
    on every verifier shape (hidden shapes included) and
    each shape measured FASTER at or above ``expects.isolated_speedup_min`` and within
    tolerance of the card's recorded figures. Only possible on a platform the card makes
    performance claims for (its generation is in ``match.gens``).
DRIFTED
    Correctness held, but the performance claim did not: a shape measured below the
    speedup floor, not FASTER, or clearly below the card's recorded figure.
FAILED
    Something the card asserts is false here: parity failed, a static gate failed, or
    the verifier could not run the card's own binding (an error, not a missing GPU).
PREREQUISITE_MISSING
    Nothing failed, but a declared prerequisite (package version or capability) is not
    met on this box, so the recipe cannot be applied as written here. The report names
    the prerequisite and the project's fallback when the card gives one.
NOT_APPLICABLE_HERE
    Prerequisites met and nothing failed, but this box cannot test the claims (no GPU of
    the card's generation, or the verifier stage could not run here); the reason says which.

Precedence when several apply: FAILED > DRIFTED > PREREQUISITE_MISSING >
NOT_APPLICABLE_HERE > CONFIRMED.

``claims_current`` is False when any platform's latest status is DRIFTED or FAILED, True
when at least one platform CONFIRMED and none drifted or failed, and None (unknown)
otherwise: a claim is never presented as current on the strength of a box that could
not test it. Only ``verified`` statuses count (signed by this deployment's server).

Every figure an answer shows is a ``Figure`` with its evidence level (``verified``,
``reported``, ``transcribed``; see ``evidence.py``), platform and date.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

from skill_server.ledger.signing import EvidenceLevel

ReverifyStatus = Literal["CONFIRMED", "DRIFTED", "FAILED", "PREREQUISITE_MISSING", "NOT_APPLICABLE_HERE"]
STATUSES: tuple[str, ...] = ("CONFIRMED", "DRIFTED", "FAILED", "PREREQUISITE_MISSING", "NOT_APPLICABLE_HERE")
# worst first
PRECEDENCE: tuple[str, ...] = ("FAILED", "DRIFTED", "PREREQUISITE_MISSING", "NOT_APPLICABLE_HERE", "CONFIRMED")


def worst(statuses: Iterable[str]) -> str:
    present = set(statuses)
    for s in PRECEDENCE:
        if s in present:
            return s
    return "NOT_APPLICABLE_HERE"


class PlatformStatus(BaseModel):
    platform: str = Field(description="runtime/generation (or runtime/device) the status was measured on")
    status: ReverifyStatus
    date: str = Field(description="when it was recorded (ISO 8601, UTC)")
    reason: str


class Figure(BaseModel):
    """One measured figure behind a card, with where it comes from and how far to trust it."""

    level: EvidenceLevel
    speedup: float | None = None
    interval: tuple[float, float] | None = None
    text: str | None = Field(None, description="the figure as quoted, when it is a range or several figures")
    verdict: str | None = None
    shape: str | None = None
    scope: str | None = None
    platform: str | None = Field(None, description="rocm/gfx950, cuda/sm_90, ... or the artifact's GPU")
    date: str | None = Field(None, description="when it was measured or recorded (ISO 8601)")
    source: str = Field(description="'ledger #12' or the artifact file name")


LEVEL_ORDER = {"verified": 0, "transcribed": 1, "reported": 2}


class Reverification(BaseModel):
    """A card's latest re-verification per platform and the figures behind it, as the
    service shows it."""

    claims_current: bool | None = Field(
        None, description="False: the ledger says a claim drifted or failed; True: confirmed on a claimed platform; "
        "None: not re-verified where the claims could be tested")
    platforms: list[PlatformStatus] = Field(default_factory=list)
    summary: str = "never re-verified"
    caveats: list[str] = Field(default_factory=list)
    figures: list[Figure] = Field(default_factory=list, description="verified first, then transcribed, then reported")


NEVER_REVERIFIED = Reverification()


def select_figures(figures: Iterable[Figure], shape: str | None = None, limit: int = 6) -> list[Figure]:
    """The figures worth showing: at the given shape first, then by level (verified,
    transcribed, reported) and newest first."""
    ranked = sorted(figures, key=lambda f: (shape is not None and f.shape != shape, LEVEL_ORDER[f.level],
                                            _neg_date(f.date)))
    return ranked[:limit]


def _neg_date(date: str | None) -> tuple[int, str]:
    # newest first: sort on the inverted characters of the ISO date
    return (0, "".join(chr(0x10FFFF - ord(c)) for c in date)) if date else (1, "")


def summarise(card_id: str, latest: list[PlatformStatus], figures: list[Figure] | None = None) -> Reverification:
    """Build what an answer shows from the latest verified row per platform and the figures."""
    if not latest:
        return Reverification(figures=list(figures or [])) if figures else NEVER_REVERIFIED
    latest = sorted(latest, key=lambda p: p.platform)
    bad = [p for p in latest if p.status in ("DRIFTED", "FAILED")]
    confirmed = [p for p in latest if p.status == "CONFIRMED"]
    caveats = [
        f"re-verification {p.status} on {p.platform} ({p.date[:10]}): {p.reason}; "
        "do not rely on the card's figures until it is re-confirmed" for p in bad
    ]
    missing = [p for p in latest if p.status == "PREREQUISITE_MISSING"]
    caveats += [f"prerequisite missing on {p.platform} ({p.date[:10]}): {p.reason}" for p in missing]
    if bad:
        current: bool | None = False
    elif confirmed:
        current = True
    else:
        current = None
    summary = "; ".join(f"{p.platform}: {p.status} {p.date[:10]}" for p in latest)
    return Reverification(claims_current=current, platforms=latest, summary=summary, caveats=caveats,
                          figures=list(figures or []))
