"""Hotspot -> ranked card matches, each criterion with a reason.

Pure functions over loaded cards: no files, no server. Every criterion ends as
``matched``, ``failed`` or ``unknown``. A failed criterion makes the card not
applicable; an unknown one makes the matcher abstain when the card lists that
criterion in ``match.abstain_when_unknown`` (or an evidence requirement says so),
and otherwise only lowers the score. A model-side label carries zero weight.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import date
from typing import Literal

from pydantic import BaseModel, Field

from .cards import Card, EvidenceRequirement, RecipeRow
from .claims import Reverification
from .hotspot import Hotspot
from .regex_literals import required_literals
from .shapes import ShapeSelection, check_constraints, select_shape_class
from .vocabulary import Vocabulary, VocabularyError, vocabulary

Status = Literal["matched", "failed", "unknown"]

# How much each criterion counts towards the score when matched.
WEIGHTS = {
    "op_name": 3.0,
    "operator": 1.0,
    "gen": 2.0,
    "dtype": 1.0,
    "scale_format": 2.0,
    "regime": 1.0,
    "shape": 1.0,
    "pct_gpu": 0.5,
}
EVIDENCE_WEIGHT = 2.0

# What to pass to resolve an unknown criterion (CLI flag / hotspot field).
HOW_TO_SUPPLY = {
    "gen": "--gen / hotspot.gen (e.g. gfx950 or MI355X)",
    "dtype": "--dtype / hotspot.dtype",
    "scale_format": "--scale-format / hotspot.scale_format (fp32_block or ue8m0_1x32)",
    "regime": "--regime / hotspot.regime (prefill or decode)",
    "shape": "--shape MxNxK / hotspot.shape",
    "operator": "hotspot.operator, or a kernel name that reveals the operator",
    "pct_gpu": "--pct-gpu / hotspot.pct_gpu",
}


class MatchInputError(ValueError):
    """The hotspot names something the vocabulary does not know."""


class Reason(BaseModel):
    criterion: str
    status: Status
    detail: str


class Expectations(BaseModel):
    speedup_floor: float
    scope: str | None = None
    parity: str
    noise_floor: float | None = None


class ValidationInfo(BaseModel):
    status: str
    last_verified: str
    date: date | None
    gpu: str


class CardMatch(BaseModel):
    card_id: str
    title: str
    score: float
    reasons: list[Reason]
    shape_class: ShapeSelection | None = None
    recipe: RecipeRow | None = None
    expectations: Expectations
    validation: ValidationInfo
    caveats: list[str] = Field(default_factory=list)
    reverification: Reverification | None = Field(
        None, description="latest re-verification per platform (joined from the results ledger by the service)")


class Abstention(BaseModel):
    card_id: str
    title: str
    reasons: list[Reason]
    missing: list[str] = Field(description="what to supply so the matcher can decide")


class NotApplicable(BaseModel):
    card_id: str
    title: str
    reasons: list[Reason]


class MatchResult(BaseModel):
    hotspot: Hotspot = Field(description="the hotspot as normalised (aliases resolved)")
    matches: list[CardMatch] = Field(default_factory=list)
    abstained: list[Abstention] = Field(default_factory=list)
    not_applicable: list[NotApplicable] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    cards_in_catalog: int = 0
    cards_considered: int = 0


# ---------------------------------------------------------------------- normalise
def normalise(hotspot: Hotspot, vocab: Vocabulary | None = None) -> tuple[Hotspot, list[str]]:
    """Resolve aliases (MI355X -> gfx950, float8_e4m3fn -> fp8_e4m3, mxfp8 -> fp8 +
    ue8m0_1x32). Unknown values raise MatchInputError with the known ones."""
    vocab = vocab or vocabulary()
    notes: list[str] = []
    update: dict[str, object] = {}
    try:
        if hotspot.gen is not None:
            gen = vocab.generation(hotspot.gen)
            if gen != hotspot.gen:
                notes.append(f"generation {hotspot.gen!r} normalised to {gen}")
            update["gen"] = gen
        if hotspot.dtype is not None:
            implied = vocab.scale_format_implied_by_dtype(hotspot.dtype)
            dt = vocab.dtype(hotspot.dtype)
            if dt != hotspot.dtype:
                notes.append(f"dtype {hotspot.dtype!r} normalised to {dt}")
            update["dtype"] = dt
            if implied and hotspot.scale_format is None:
                update["scale_format"] = implied
                notes.append(f"dtype {hotspot.dtype!r} implies scale format {implied}")
        if hotspot.scale_format is not None:
            sf = vocab.scale_format(hotspot.scale_format)
            if sf != hotspot.scale_format:
                notes.append(f"scale format {hotspot.scale_format!r} normalised to {sf}")
            update["scale_format"] = sf
    except VocabularyError as exc:
        raise MatchInputError(str(exc)) from None
    if hotspot.operator is not None:
        update["operator"] = hotspot.operator.strip().lower()
    if hotspot.label:
        notes.append(f"label {hotspot.label!r} kept as provenance; it carries zero weight in selection")
    return hotspot.model_copy(update=update), notes


# -------------------------------------------------------------------------- index
class CardIndex:
    """Finds the cards worth evaluating for an op name without scanning them all.

    Each op-name regex is reduced (``regex_literals``) to the literal fragments every
    match needs, per top-level alternative. A query looks up each substring of the
    lower-cased name whose length is one of the indexed literal lengths in a dict,
    checks the alternative's other fragments with ``in``, and only then runs the regex
    (compiled lazily, once). Regexes without indexable literals are always run.
    Regex-less cards are found through the operator classes the hotspot may belong to.
    """

    def __init__(self, cards: Iterable[Card], known_literals: dict[str, list[list[str]] | None] | None = None):
        """``known_literals``: pattern -> required_literals(pattern), e.g. from the parse
        cache, so a warm start does not re-scan thousands of regexes."""
        self.cards: list[Card] = list(cards)
        known = known_literals or {}
        self._compiled: dict[str, re.Pattern[str]] = {}
        self._branches: dict[str, list[list[str]]] = {}
        self._by_literal: dict[str, list[str]] = defaultdict(list)  # index literal -> patterns
        self._lengths: list[int] = []
        self._always: list[str] = []
        self._cards_by_pattern: dict[str, list[int]] = defaultdict(list)
        self._regexless_by_operator: dict[str, list[int]] = defaultdict(list)
        for i, card in enumerate(self.cards):
            pattern = card.match.profile_signature.op_name_regex
            if not pattern:
                for op in card.match.operator:
                    self._regexless_by_operator[op.lower()].append(i)
                continue
            if pattern not in self._cards_by_pattern:
                branches = known[pattern] if pattern in known else required_literals(pattern)
                if branches is None:
                    self._always.append(pattern)
                else:
                    self._branches[pattern] = branches
            self._cards_by_pattern[pattern].append(i)
        # Key each alternative by its rarest literal (3+ characters) across the catalog, so
        # a fragment many cards share ("gemm", "bpreshuffle") does not put them all in one
        # bucket that every query with that fragment must scan.
        frequency: dict[str, int] = defaultdict(int)
        for branches in self._branches.values():
            for lits in branches:
                for lit in set(lits):
                    frequency[lit] += 1
        lengths: set[int] = set()
        for pattern, branches in self._branches.items():
            for lits in branches:
                key = min((x for x in lits if len(x) >= 3), key=lambda x: (frequency[x], -len(x)))
                self._by_literal[key].append(pattern)
                lengths.add(len(key))
        self._lengths = sorted(lengths)

    def literals(self) -> dict[str, list[list[str]] | None]:
        """pattern -> its index literals (None: always run), for the parse cache."""
        out: dict[str, list[list[str]] | None] = {p: None for p in self._always}
        out.update(self._branches)
        return out

    def regex(self, pattern: str) -> re.Pattern[str]:
        rx = self._compiled.get(pattern)
        if rx is None:
            rx = self._compiled[pattern] = re.compile(pattern, re.IGNORECASE)
        return rx

    def candidates(self, op_name: str, operators: Iterable[str]) -> list[int]:
        lname = op_name.lower()
        patterns: set[str] = set(self._always)
        by_literal, n = self._by_literal, len(lname)
        for length in self._lengths:
            if length > n:
                break
            for j in range(n - length + 1):
                hits = by_literal.get(lname[j : j + length])
                if hits:
                    for pattern in hits:
                        if pattern not in patterns and any(
                            all(lit in lname for lit in lits) for lits in self._branches[pattern]
                        ):
                            patterns.add(pattern)
        found: set[int] = set()
        for pattern in patterns:
            if self.regex(pattern).search(op_name):
                found.update(self._cards_by_pattern[pattern])
        for op in operators:
            found.update(self._regexless_by_operator.get(op, ()))
        return sorted(found)


# ----------------------------------------------------------------------- criteria
def _in(value: str, allowed: list[str], normalise_fn) -> bool:
    if "*" in allowed:
        return True
    norm = set()
    for a in allowed:
        try:
            norm.add(normalise_fn(a))
        except VocabularyError:
            norm.add(a)
    return value in norm


def _evidence(req: EvidenceRequirement, hotspot: Hotspot) -> tuple[Status, str]:
    if req.field is not None and getattr(hotspot, req.field) is not None:
        value = getattr(hotspot, req.field)
        source = f"hotspot.{req.field}={value!r}"
    else:
        # sources in priority order: the op name (the hotspot itself) speaks before its neighbours
        names: list[str] = []
        found: list[str] = []
        for src in req.infer_from:
            src_names = [hotspot.op_name] if src == "op_name" else list(hotspot.segment_kernels)
            names += src_names
            found = sorted({v for v, rx in req.values.items() for n in src_names if re.search(rx, n, re.IGNORECASE)})
            if found:
                break
        if len(found) > 1:
            return "unknown", f"{req.about}: ambiguous, names suggest {found} ({_names(names)})"
        if not found:
            # "absent" needs the segment to have been shown; an op name alone proves nothing
            segment_seen = bool(hotspot.segment_kernels) and "segment_kernels" in req.infer_from
            if segment_seen and req.absent_means == "fail":
                return "failed", f"{req.about}: not observed in {_names(names)}"
            return "unknown", f"{req.about}: no evidence in {_names(names)}"
        value = found[0]
        source = f"inferred {value!r} from {_names(names)}"
    if value == req.required:
        return "matched", f"{req.about}: {source}"
    return "failed", f"{req.about}: needs {req.required!r}, got {source}"


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:6])
    return shown + (f" and {len(names) - 6} more" if len(names) > 6 else "") if names else "no names"


def evaluate_card(card: Card, hotspot: Hotspot, index: CardIndex | None = None, vocab: Vocabulary | None = None):
    """Evaluate one card against a normalised hotspot.

    Returns (decision, reasons, missing, shape_selection, score) where decision is
    'match', 'abstain' or 'not_applicable'."""
    vocab = vocab or vocabulary()
    m = card.match
    reasons: list[Reason] = []
    weights: dict[int, float] = {}
    required_unknown: list[str] = []

    def add(criterion: str, status: Status, detail: str, weight: float, required_if_unknown: bool = False) -> None:
        weights[len(reasons)] = weight
        reasons.append(Reason(criterion=criterion, status=status, detail=detail))
        if status == "unknown" and required_if_unknown:
            required_unknown.append(criterion)

    # op name ---------------------------------------------------------------------
    pattern = m.profile_signature.op_name_regex
    rx = (index.regex(pattern) if index else re.compile(pattern, re.IGNORECASE)) if pattern else None
    if rx is not None:
        hit = rx.search(hotspot.op_name)
        add("op_name", "matched" if hit else "failed",
            f"op-name signature /{pattern}/ {'matches' if hit else 'does not match'} {hotspot.op_name!r}", WEIGHTS["op_name"])
    else:
        add("op_name", "matched", "card has no op-name regex; it matches on operator class and evidence", 0.0)

    # operator --------------------------------------------------------------------
    card_ops = [o.lower() for o in m.operator]
    if hotspot.operator:
        ok = hotspot.operator in card_ops
        add("operator", "matched" if ok else "failed",
            f"operator {hotspot.operator!r} {'is' if ok else 'is not'} one of {card_ops}", WEIGHTS["operator"])
    else:
        inferred = vocab.operators_in(hotspot.op_name)
        common = [o for o in inferred if o in card_ops]
        if common:
            add("operator", "matched", f"operator inferred from the op name: {common}", WEIGHTS["operator"])
        elif rx is not None and reasons[0].status == "matched":
            add("operator", "matched", "implied by the op-name signature", WEIGHTS["operator"])
        elif inferred:
            add("operator", "failed", f"op name suggests {inferred}, card covers {card_ops}", WEIGHTS["operator"])
        else:
            add("operator", "unknown", "operator class not stated and not inferable from the op name",
                WEIGHTS["operator"], required_if_unknown=not pattern)

    # generation ------------------------------------------------------------------
    req = set(m.abstain_when_unknown)
    if hotspot.gen is None:
        add("gen", "unknown", f"generation not given; card is for {m.gens}", WEIGHTS["gen"], "gen" in req)
    else:
        ok = _in(hotspot.gen, m.gens, vocab.generation)
        add("gen", "matched" if ok else "failed",
            f"{hotspot.gen} {'is' if ok else 'is not'} a generation this card covers ({', '.join(m.gens)})"
            + ("" if ok else "; the recipe is generation-specific, keep the existing path"), WEIGHTS["gen"])

    # dtype -------------------------------------------------------------------------
    dtype, how = hotspot.dtype, "given"
    if dtype is None:
        dtype, how = vocab.dtype_in(hotspot.op_name), "inferred from the op name"
    if dtype is None:
        add("dtype", "unknown", f"dtype not given; card covers {m.dtypes}", WEIGHTS["dtype"], "dtype" in req)
    else:
        ok = _in(dtype, m.dtypes, vocab.dtype)
        add("dtype", "matched" if ok else "failed",
            f"dtype {dtype} ({how}) {'is' if ok else 'is not'} one of {m.dtypes}", WEIGHTS["dtype"])

    # scale format ----------------------------------------------------------------
    if m.scale_formats is None:
        add("scale_format", "matched", "card does not constrain the operand scale format", 0.0)
    else:
        fmt, how = hotspot.scale_format, "given"
        if fmt is None:
            fmt, how = vocab.scale_format_in(hotspot.op_name), "inferred from the op name"
        if fmt is None:
            add("scale_format", "unknown",
                f"operand scale format not given and the name does not reveal it; this card needs {m.scale_formats}"
                " (the same kernel name can carry other formats that need a different recipe)",
                WEIGHTS["scale_format"], "scale_format" in req)
        else:
            ok = _in(fmt, m.scale_formats, vocab.scale_format)
            add("scale_format", "matched" if ok else "failed",
                f"scale format {fmt} ({how}) {'is' if ok else 'is not'} one of {m.scale_formats}", WEIGHTS["scale_format"])

    # regime ------------------------------------------------------------------------
    if hotspot.regime is None:
        add("regime", "unknown", f"regime not given; card covers {m.regimes}", WEIGHTS["regime"], "regime" in req)
    else:
        ok = hotspot.regime in m.regimes
        add("regime", "matched" if ok else "failed",
            f"regime {hotspot.regime} {'is' if ok else 'is not'} one of {m.regimes}", WEIGHTS["regime"])

    # shape -------------------------------------------------------------------------
    selection: ShapeSelection | None = None
    target_cus = target_compute_units(card, vocab)
    if hotspot.shape is None:
        need = "the recipe row cannot be chosen" if card.shape_classes else "no shape constraints to check"
        add("shape", "unknown", f"shape not given; {need}", WEIGHTS["shape"] if (card.shape_classes or m.shape_constraints) else 0.0,
            "shape" in req)
    else:
        s = hotspot.shape
        violations = check_constraints(m.shape_constraints, s.M, s.N, s.K, target_cus)
        if violations:
            add("shape", "failed", f"shape {s} violates: " + "; ".join(
                f"{v.predicate} (value {v.value:g})" + (f" - {v.why}" if v.why else "") for v in violations), WEIGHTS["shape"])
        else:
            selection = select_shape_class(card.shape_classes, s.M, s.N, s.K, target_cus)
            if selection is None:
                add("shape", "matched", f"shape {s} within the card's constraints", WEIGHTS["shape"])
            else:
                add("shape", "matched",
                    f"shape {s} -> class {selection.class_id} ({selection.selection}, "
                    f"{'tuned' if selection.tuned else 'untuned'})", WEIGHTS["shape"])

    # share of GPU time -------------------------------------------------------------
    floor = m.profile_signature.min_pct_gpu
    if floor <= 0:
        add("pct_gpu", "matched", "card sets no minimum share of GPU time", 0.0)
    elif hotspot.pct_gpu is None:
        add("pct_gpu", "unknown", f"share of GPU time not given; card needs >= {floor}%", WEIGHTS["pct_gpu"], "pct_gpu" in req)
    else:
        ok = hotspot.pct_gpu >= floor
        add("pct_gpu", "matched" if ok else "failed",
            f"{hotspot.pct_gpu}% of GPU time {'>=' if ok else '<'} the card's minimum {floor}%", WEIGHTS["pct_gpu"])

    # evidence requirements -------------------------------------------------------
    for ev in m.evidence:
        status, detail = _evidence(ev, hotspot)
        if status == "unknown" and ev.when_missing == "fail":
            status = "failed"
        add(f"evidence:{ev.id}", status, detail, EVIDENCE_WEIGHT, required_if_unknown=ev.when_missing == "abstain")

    if any(r.status == "failed" for r in reasons):
        decision = "not_applicable"
    elif required_unknown:
        decision = "abstain"
    else:
        decision = "match"
    total = sum(weights.values()) or 1.0
    got = sum(w for i, w in weights.items() if reasons[i].status == "matched")
    score = round(got / total, 4)
    missing = [HOW_TO_SUPPLY.get(c, _evidence_hint(card, c)) for c in required_unknown]
    return decision, reasons, missing, selection, score


def _evidence_hint(card: Card, criterion: str) -> str:
    ev_id = criterion.removeprefix("evidence:")
    ev = next((e for e in card.match.evidence if e.id == ev_id), None)
    if ev is None:
        return criterion
    parts = []
    if ev.field:
        parts.append(f"--{ev.field} {ev.required} / hotspot.{ev.field}")
    if "segment_kernels" in ev.infer_from:
        parts.append("--segment-kernel NAME for the other kernels of the segment")
    return f"{ev.about} ({'; '.join(parts) or 'kernel names that reveal it'})"


def target_compute_units(card: Card, vocab: Vocabulary) -> int:
    """Shape classes describe the card's target hardware: use its first known generation."""
    for g in card.match.gens:
        if vocab.is_known_generation(g):
            return vocab.generation_info(g).compute_units
    return 256


def build_match(card: Card, reasons: list[Reason], selection: ShapeSelection | None, score: float) -> CardMatch:
    v = card.validation
    caveats: list[str] = []
    if selection is not None:
        caveats += selection.caveats
        if not selection.tuned:
            caveats.append(selection.advice)
    if v.status != "validated":
        caveats.append(f"validation status is {v.status!r}: re-verify on the box before relying on the figures")
    return CardMatch(
        card_id=card.id,
        title=card.title,
        score=score,
        reasons=reasons,
        shape_class=selection,
        recipe=selection.recipe if selection else None,
        expectations=Expectations(
            speedup_floor=card.expects.isolated_speedup_min,
            scope=card.expects.isolated_scope,
            parity=card.expects.parity,
            noise_floor=card.expects.noise_floor,
        ),
        validation=ValidationInfo(status=v.status, last_verified=v.last_verified, date=v.latest_date, gpu=v.gpu),
        caveats=caveats,
    )


def match_hotspot(hotspot: Hotspot, index: CardIndex, vocab: Vocabulary | None = None) -> MatchResult:
    vocab = vocab or vocabulary()
    hs, notes = normalise(hotspot, vocab)
    operators = [hs.operator] if hs.operator else vocab.operators_in(hs.op_name)
    result = MatchResult(hotspot=hs, notes=notes, cards_in_catalog=len(index.cards))
    candidates = index.candidates(hs.op_name, operators)
    result.cards_considered = len(candidates)
    for i in candidates:
        card = index.cards[i]
        decision, reasons, missing, selection, score = evaluate_card(card, hs, index, vocab)
        if decision == "match":
            result.matches.append(build_match(card, reasons, selection, score))
        elif decision == "abstain":
            result.abstained.append(Abstention(card_id=card.id, title=card.title, reasons=reasons, missing=missing))
        else:
            failed_first = sorted(reasons, key=lambda r: r.status != "failed")
            result.not_applicable.append(NotApplicable(card_id=card.id, title=card.title, reasons=failed_first))
    status_rank = {"validated": 0, "experimental": 1, "draft": 2, "deprecated": 3}
    result.matches.sort(key=lambda c: (-c.score, status_rank.get(c.validation.status, 9), c.card_id))
    if not candidates:
        result.notes.append(
            f"no card's op-name signature or operator class fits {hs.op_name!r} "
            f"(operators inferred: {operators or 'none'}); {len(index.cards)} cards in the catalog"
        )
    return result
