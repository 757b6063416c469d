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
from itertools import compress, count
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from pydantic import BaseModel, Field

from skill_server.cards.schema import Card, EvidenceRequirement, RecipeRow
from skill_server.reverify.claims import Reverification
from skill_server.matching.hotspot import Hotspot
from skill_server.matching.regex_literals import required_literals
from skill_server.cards.name_dtypes import NameDtypes
from skill_server.cards.shapes import ShapeSelection, check_constraints, select_shape_class
from skill_server.cards.vocabulary import Vocabulary, VocabularyError, vocabulary

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
    target_gen: str | None = Field(None, description="the generation matched as if for (--target-gen), when given")
    source_gen: str | None = Field(None, description="with target_gen: the hotspot's own generation")
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
                notes.append(f"generation {_short(hotspot.gen)!r} normalised to {gen}")
            update["gen"] = gen
        if hotspot.dtype is not None:
            implied = vocab.scale_format_implied_by_dtype(hotspot.dtype)
            dt = vocab.dtype(hotspot.dtype)
            if dt != hotspot.dtype:
                notes.append(f"dtype {_short(hotspot.dtype)!r} normalised to {dt}")
            update["dtype"] = dt
            if implied and hotspot.scale_format is None:
                update["scale_format"] = implied
                notes.append(f"dtype {_short(hotspot.dtype)!r} implies scale format {implied}")
        if hotspot.scale_format is not None:
            sf = vocab.scale_format(hotspot.scale_format)
            if sf != hotspot.scale_format:
                notes.append(f"scale format {_short(hotspot.scale_format)!r} normalised to {sf}")
            update["scale_format"] = sf
    except VocabularyError as exc:
        raise MatchInputError(str(exc)) from None
    if hotspot.operator is not None:
        update["operator"] = hotspot.operator.strip().lower()
    if hotspot.label:
        notes.append(f"label {_short(hotspot.label)!r} kept as provenance; it carries zero weight in selection")
    return hotspot.model_copy(update=update), notes


# -------------------------------------------------------------------------- index
class CardIndex:
    """Finds the cards worth evaluating for an op name without scanning them all.

    Each op-name regex is reduced (``regex_literals``) to the literal fragments every
    match needs, per top-level alternative. A query looks up each substring of the
    lower-cased name whose length is one of the indexed literal lengths in a dict, checks
    the alternative's other fragments with ``in``, and only then runs the regex (compiled
    lazily, once). Regexes without indexable literals are always run. Regex-less cards
    are found through the operator classes the hotspot may belong to.

    Cost per query is bounded: every pattern is literal-checked at most once and run at
    most once per name, however often its key literal occurs (names are capped at
    ``hotspot.MAX_NAME_CHARS``), and ``evaluate_card`` reuses the verdicts.
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
            patterns = card.match.profile_signature.patterns()
            if not patterns:
                for op in card.match.operator:
                    self._regexless_by_operator[op.lower()].append(i)
                continue
            for pattern in patterns:
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
        # every index literal starts with one of these 3-grams: only positions that start one
        # are looked up, and finding them runs in C (zip/map/compress), not per character in Python
        self._grams = {tuple(key[:3]) for key in self._by_literal}

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

    def _patterns_in(self, name: str, found: set[str]) -> None:
        """Add to ``found`` the indexed patterns whose literals ``name`` contains (each
        pattern's literal check runs at most once, however often its key occurs)."""
        lname = name.lower()
        by_literal, n, lengths = self._by_literal, len(lname), self._lengths
        tried: set[str] = set()
        starts = compress(count(), map(self._grams.__contains__, zip(lname, lname[1:], lname[2:])))
        for j in starts:
            for length in lengths:
                if j + length > n:
                    break
                hits = by_literal.get(lname[j : j + length])
                if hits:
                    for pattern in hits:
                        if pattern in tried:
                            continue
                        tried.add(pattern)
                        if any(all(lit in lname for lit in lits) for lits in self._branches[pattern]):
                            found.add(pattern)

    def search(self, names: Iterable[str | None]) -> dict[str, str]:
        """pattern -> the first of ``names`` its regex matches, for every pattern that
        matches one (each regex runs at most once per name)."""
        names = [n for n in names if n]
        out: dict[str, str] = {}
        for name in names:
            found: set[str] = set(self._always)
            self._patterns_in(name, found)
            for pattern in found:
                if pattern not in out and self.regex(pattern).search(name):
                    out[pattern] = name
        return out

    def candidates(self, op_name: str, operators: Iterable[str], launch_op: str | None = None) -> list[int]:
        return self._candidates(self.search([op_name, launch_op]), operators)

    def _candidates(self, hits: dict[str, str], operators: Iterable[str]) -> list[int]:
        found: set[int] = set()
        for pattern in hits:
            found.update(self._cards_by_pattern[pattern])
        for op in operators:
            found.update(self._regexless_by_operator.get(op, ()))
        return sorted(found)


@dataclass
class Query:
    """What one hotspot's names say, worked out once per query and shared by every card."""

    hotspot: Hotspot
    names: list[str]  # op name, then the launching op
    operators: list[str]
    dtype_in_name: NameDtypes | None  # operand (and output) dtypes the names state, by naming convention
    scale_in_name: str | None
    hits: dict[str, str] | None  # pattern -> the name it matched (None: no index, search per card)
    roles: dict[str, str | None] = field(default_factory=dict)  # name -> vocabulary kernel role

    @classmethod
    def of(cls, hotspot: Hotspot, vocab: Vocabulary, index: "CardIndex | None" = None) -> "Query":
        names = [n for n in (hotspot.op_name, hotspot.launch_op) if n]
        operators = [hotspot.operator] if hotspot.operator else list(dict.fromkeys(
            op for n in names for op in vocab.operators_in(n)))
        return cls(
            hotspot=hotspot, names=names, operators=operators,
            dtype_in_name=next((d for n in names if (d := vocab.dtypes_in(n))), None),
            scale_in_name=next((f for n in names if (f := vocab.scale_format_in(n))), None),
            hits=index.search(names) if index is not None else None,
        )

    def hit(self, pattern: str, index: "CardIndex | None") -> str | None:
        """The first name the pattern matches (from the index's one search when there was one)."""
        if self.hits is not None:
            return self.hits.get(pattern)
        rx = index.regex(pattern) if index is not None else re.compile(pattern, re.IGNORECASE)
        return next((n for n in self.names if rx.search(n)), None)

    def role(self, name: str, vocab: Vocabulary) -> str | None:
        if name not in self.roles:
            self.roles[name] = vocab.kernel_role(name)
        return self.roles[name]


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


def _evidence(req: EvidenceRequirement, query: Query, vocab: Vocabulary) -> tuple[Status, str]:
    hotspot = query.hotspot
    if req.field is not None and getattr(hotspot, req.field) is not None:
        value = getattr(hotspot, req.field)
        source = f"hotspot.{req.field}={value!r}"
        if req.field == "stage" and hotspot.stage_basis:
            source += f" ({hotspot.stage_basis})"
    elif req.field == "stage" and (shared := _shared_stage_gemm(query, vocab)) is not None:
        # a MoE GEMM name that both stages launch (vLLM's and SGLang's Triton fused_moe_kernel,
        # CK's kernel_moe_gemm): no word of its names, nor of a neighbour, can place it
        basis = f"; {hotspot.stage_basis}" if hotspot.stage_basis else ""
        return "unknown", (f"{req.about}: {shared!r} is a MoE GEMM name that states no stage: one kernel runs "
                           "both (stage 1 gate/up, then stage 2 down per layer), so the name alone cannot place "
                           f"it{basis}")
    else:
        # sources in priority order: the op name (the hotspot itself) speaks before its neighbours
        names: list[str] = []
        found: list[str] = []
        excluded: list[str] = []
        other_role: list[str] = []
        for src in req.infer_from:
            if src == "op_name":
                src_names = [hotspot.op_name]
            elif src == "launch_op":
                src_names = [hotspot.launch_op] if hotspot.launch_op else []
            else:
                src_names = list(hotspot.segment_kernels)
            counted = []
            for n in src_names:
                role = query.role(n, vocab) if (req.exclude_roles or req.role) else None
                if role is not None and role in req.exclude_roles:
                    excluded.append(n)
                    continue
                counted.append(n)
                if req.role is not None and role == req.role and not any(
                        re.search(rx, n, re.IGNORECASE) for rx in req.values.values()):
                    other_role.append(n)
            names += counted
            found = sorted({v for v, rx in req.values.items() for n in counted if re.search(rx, n, re.IGNORECASE)})
            if found:
                break
        skipped = f"; {_names(excluded)} ignored: {', '.join(req.exclude_roles)} kernels never count" if excluded else ""
        if len(found) > 1:
            return "unknown", f"{req.about}: ambiguous, names suggest {found} ({_names(names)}){skipped}"
        if not found:
            if other_role:
                return "unknown", (
                    f"{req.about}: {_names(other_role)} is a {req.role!r} kernel by the vocabulary, "
                    f"but not one this card's evidence names; confirm it is the kernel the card means{skipped}")
            # "absent" needs the segment to have been shown; an op name alone proves nothing
            segment_seen = bool(hotspot.segment_kernels) and "segment_kernels" in req.infer_from
            if segment_seen and req.absent_means == "fail":
                return "failed", f"{req.about}: not observed in {_names(names)}{skipped}"
            basis = f"; {hotspot.stage_basis}" if req.field == "stage" and hotspot.stage_basis else ""
            return "unknown", f"{req.about}: no evidence in {_names(names)}{skipped}{basis}"
        value = found[0]
        source = f"inferred {value!r} from {_names(names)}{skipped}"
    if value == req.required:
        return "matched", f"{req.about}: {source}"
    return "failed", f"{req.about}: needs {req.required!r}, got {source}"


def _shared_stage_gemm(query: Query, vocab: Vocabulary) -> str | None:
    """The op name, when the vocabulary calls it a MoE GEMM (``kernel_roles.moe_gemm``) and
    neither it nor its launching op states a stage (``moe_stage_names``)."""
    hotspot = query.hotspot
    if query.role(hotspot.op_name, vocab) != "moe_gemm":
        return None
    if vocab.moe_stages_named(hotspot.op_name, hotspot.launch_op):
        return None
    return hotspot.op_name


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(_short(n)) for n in names[:6])
    return shown + (f" and {len(names) - 6} more" if len(names) > 6 else "") if names else "no names"


def evaluate_card(card: Card, hotspot: Hotspot, index: CardIndex | None = None, vocab: Vocabulary | None = None,
                  query: Query | None = None):
    """Evaluate one card against a normalised hotspot.

    Returns (decision, reasons, missing, shape_selection, score) where decision is
    'match', 'abstain' or 'not_applicable'."""
    vocab = vocab or vocabulary()
    query = query or Query.of(hotspot, vocab, index)
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
    patterns = m.profile_signature.patterns()
    pattern = patterns[0] if patterns else ""
    name_hit: str | None = None
    if patterns:
        hit_pattern = next((p for p in patterns if query.hit(p, index) is not None), None)
        if hit_pattern is None:
            shown = " or ".join(f"/{_short(p)}/" for p in patterns)
            add("op_name", "failed", f"op-name signature {shown} does not match "
                f"{' or '.join(repr(_short(n)) for n in query.names)}", WEIGHTS["op_name"])
        else:
            name_hit = query.hit(hit_pattern, index)
            via = "" if name_hit == hotspot.op_name else " (the launching op)"
            add("op_name", "matched", f"op-name signature /{_short(hit_pattern)}/ matches {_short(name_hit)!r}{via}",
                WEIGHTS["op_name"])
    else:
        add("op_name", "matched", "card has no op-name regex; it matches on operator class and evidence", 0.0)

    # operator --------------------------------------------------------------------
    card_ops = [o.lower() for o in m.operator]
    if hotspot.operator:
        ok = hotspot.operator in card_ops
        add("operator", "matched" if ok else "failed",
            f"operator {hotspot.operator!r} {'is' if ok else 'is not'} one of {card_ops}", WEIGHTS["operator"])
    else:
        inferred = query.operators
        common = [o for o in inferred if o in card_ops]
        if common:
            add("operator", "matched", f"operator inferred from the names: {common}", WEIGHTS["operator"])
        elif name_hit is not None:
            add("operator", "matched", "implied by the op-name signature", WEIGHTS["operator"])
        elif inferred:
            add("operator", "failed", f"names suggest {inferred}, card covers {card_ops}", WEIGHTS["operator"])
        else:
            add("operator", "unknown", "operator class not stated and not inferable from the names",
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
    named = query.dtype_in_name
    if hotspot.dtype is not None:
        ok = _in(hotspot.dtype, m.dtypes, vocab.dtype)
        add("dtype", "matched" if ok else "failed",
            f"dtype {hotspot.dtype} (given) {'is' if ok else 'is not'} one of {m.dtypes}", WEIGHTS["dtype"])
    elif named is None:
        add("dtype", "unknown", f"dtype not given; card covers {m.dtypes}", WEIGHTS["dtype"], "dtype" in req)
    else:
        # the operands decide (A and B both), never the output a name also spells
        outside = [d for d in named.operands if not _in(d, m.dtypes, vocab.dtype)]
        verdict = f"{'is' if len(named.operands) == 1 else 'are'} one of {m.dtypes}" if not outside else \
            f"{' and '.join(outside)} {'is' if len(outside) == 1 else 'are'} not one of {m.dtypes}"
        add("dtype", "failed" if outside else "matched", named.describe(verdict), WEIGHTS["dtype"])

    # scale format ----------------------------------------------------------------
    if m.scale_formats is None:
        add("scale_format", "matched", "card does not constrain the operand scale format", 0.0)
    else:
        fmt, how = hotspot.scale_format, "given"
        if fmt is None:
            fmt, how = query.scale_in_name, "stated in the name"
        if fmt is None:
            add("scale_format", "unknown",
                f"operand scale format not given and the name does not state it; this card needs {m.scale_formats}"
                " (the same kernel name can carry other formats that need a different recipe)",
                WEIGHTS["scale_format"], "scale_format" in req)
        else:
            ok = _in(fmt, m.scale_formats, vocab.scale_format)
            add("scale_format", "matched" if ok else "failed",
                f"scale format {fmt} ({how}) {'is' if ok else 'is not'} one of {m.scale_formats}", WEIGHTS["scale_format"])

    # regime ------------------------------------------------------------------------
    regime, how = hotspot.regime, "given"
    if regime is None and hotspot.shape is not None and vocab.regimes is not None:
        regime = vocab.regimes.regime_of(hotspot.shape.M)
        how = (f"inferred from M={hotspot.shape.M} (decode <= {vocab.regimes.decode_max}, "
               f"prefill >= {vocab.regimes.prefill_min})")
    if regime is None:
        why = "" if hotspot.shape is None or vocab.regimes is None else (
            f" and M={hotspot.shape.M} lies between decode (<= {vocab.regimes.decode_max}) and prefill "
            f"(>= {vocab.regimes.prefill_min})")
        add("regime", "unknown", f"regime not given{why}; card covers {m.regimes}", WEIGHTS["regime"], "regime" in req)
    else:
        ok = regime in m.regimes
        add("regime", "matched" if ok else "failed",
            f"regime {regime} ({how}) {'is' if ok else 'is not'} one of {m.regimes}", WEIGHTS["regime"])

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
        status, detail = _evidence(ev, query, vocab)
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
    if ev.field == "stage":
        parts.append("or match the profile it came from (match-profile FILE / match_profile): its launch order "
                     "places each launch (sort -> stage-1 GEMM -> activation -> stage-2 GEMM -> top-k reduce "
                     "such as moe_sum_reduce)")
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


def match_hotspot(hotspot: Hotspot, index: CardIndex, vocab: Vocabulary | None = None,
                  target_gen: str | None = None) -> MatchResult:
    """Match one hotspot against the catalog. ``target_gen`` matches it as if it ran on
    that generation (a trace from one GPU, a port planned to another); the result says so."""
    vocab = vocab or vocabulary()
    hs, notes = normalise(hotspot, vocab)
    source_gen = hs.gen
    if target_gen is not None:
        try:
            target = vocab.generation(target_gen)
        except VocabularyError as exc:
            raise MatchInputError(f"target generation: {exc}") from None
        notes.append(f"matched as if for {target} (target generation); the hotspot's own generation is "
                     f"{source_gen or 'not stated'}")
        hs = hs.model_copy(update={"gen": target})
    query = Query.of(hs, vocab, index)
    result = MatchResult(hotspot=hs, notes=notes, cards_in_catalog=len(index.cards),
                         target_gen=hs.gen if target_gen is not None else None,
                         source_gen=source_gen if target_gen is not None else None)
    candidates = index._candidates(query.hits or {}, query.operators)
    result.cards_considered = len(candidates)
    for i in candidates:
        card = index.cards[i]
        decision, reasons, missing, selection, score = evaluate_card(card, hs, index, vocab, query)
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
            f"no card's op-name signature or operator class fits {_short(hs.op_name)!r}"
            + (f" or {_short(hs.launch_op)!r}" if hs.launch_op else "")
            + f" (operators inferred: {query.operators or 'none'}); {len(index.cards)} cards in the catalog"
        )
    return result
