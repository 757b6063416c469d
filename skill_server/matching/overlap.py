"""Overlap detection: which cards could answer the same hotspot, and what tells them apart.

Two cards overlap when the matcher could return both for one hotspot: every dimension of
their match spaces intersects. The dimensions and how each is intersected:

- operator, gens, arch_class, dtypes, regimes: sets after normalisation (aliases such as
  MI355X -> gfx950 resolved); ``*`` means any.
- scale_formats: sets; absent means "not constrained" (any format).
- op_name: a card's signature is its ``op_name_regex`` and its ``alternatives`` (any of
  them names the hotspot, as in the matcher). Regexes cannot be intersected exactly in
  general, so each regex is *probed*: sample names are generated from its structure (each
  alternative, repeats at their minimum and one more, one character per class) and tested
  against every regex of the other signature.
  A name both accept is a shared hotspot name (e.g. ``gemm_a8w8_blockscale``). No shared
  probe means the signatures are treated as disjoint (heuristic: stated in the report).
  A card without a regex takes any name of its operator classes.
- shape: the cards' hard ``shape_constraints``, probed on a grid of (M, N, K) values plus
  both cards' validated and verifier shapes; shape classes only pick recipe rows, so
  they never separate cards, but the report says which classes meet on shared shapes.
- evidence: requirements on the same evidence (same hotspot field or id) that demand
  different values (stage1 vs stage2) separate the cards.
- backends (from/to): reported, never separating (the matcher does not use them).

A **duplicate** is identical on every dimension (including backends); an **overlap**
intersects on every dimension; otherwise the cards are **distinct** and the report names
what separates them. Distinct cards that still share a hotspot name are reported too
(that is the case where the scale format, not the name, decides).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field

from skill_server.cards.schema import Card, CardProblem, MatchSpec, ParsedCard, Predicate, Review, ShapeClass
from skill_server.cards.shapes import metric_value, parse_shape_text, predicate_holds
from skill_server.cards.vocabulary import VocabularyError, vocabulary

Relation = Literal["identical", "overlap", "disjoint"]
SAMPLE_LIMIT = 64


# ============================================================================ models
class DimensionComparison(BaseModel):
    dimension: str
    relation: Relation
    shared: list[str] = Field(default_factory=list)
    only_subject: list[str] = Field(default_factory=list)
    only_other: list[str] = Field(default_factory=list)
    detail: str


class ReviewNote(BaseModel):
    card_id: str = Field(description="the card the review is recorded on")
    source: str
    verdict: str
    says: str
    overlaps_with: list[str] = Field(default_factory=list)


class OverlapFinding(BaseModel):
    card_id: str
    title: str
    kind: Literal["duplicate", "overlap", "distinct"]
    shared_hotspot_names: list[str] = Field(default_factory=list)
    overlaps: list[str] = Field(default_factory=list, description="what the two share")
    separated_by: list[str] = Field(default_factory=list, description="what keeps them apart")
    supersedes: str | None = Field(None, description="'subject' or 'other' when one card supersedes the other")
    dimensions: list[DimensionComparison]


class OverlapCheck(BaseModel):
    subject: str
    compared: int = Field(description="cards compared")
    duplicates: list[str] = Field(default_factory=list)
    overlaps: list[str] = Field(default_factory=list)
    findings: list[OverlapFinding] = Field(default_factory=list,
                                           description="duplicates, overlaps and distinct cards sharing a hotspot name")
    reviews: list[ReviewNote] = Field(default_factory=list, description="recorded duplicate_functionality reviews")
    notes: list[str] = Field(default_factory=list)


@dataclass
class Subject:
    """What is compared: a card, a draft card or a bare match spec."""

    id: str | None
    title: str
    match: MatchSpec
    shape_classes: list[ShapeClass] = field(default_factory=list)
    supersedes: list[str] = field(default_factory=list)
    reviews: list[Review] = field(default_factory=list)
    extra_shapes: list[tuple[int, int, int]] = field(default_factory=list)

    @classmethod
    def of(cls, card: Card) -> "Subject":
        shapes = [(v.M, v.N, v.K) for c in card.shape_classes for v in c.validated_shapes]
        for s in (card.verifier.shapes if card.verifier else []):
            try:
                dims = parse_shape_text(s)
            except ValueError:
                continue
            if list(dims) == ["M", "N", "K"]:
                shapes.append((dims["M"], dims["N"], dims["K"]))
        return cls(id=card.id, title=card.title, match=card.match, shape_classes=list(card.shape_classes),
                   supersedes=list(card.supersedes), reviews=list(card.reviews), extra_shapes=shapes)


# ======================================================================= regex probes
try:
    import re._parser as _sre  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_parse as _sre  # type: ignore[no-redef]

_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT} | ({getattr(_sre, "POSSESSIVE_REPEAT")} if hasattr(_sre, "POSSESSIVE_REPEAT") else set())
_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "0", "CATEGORY_NOT_DIGIT": "a", "CATEGORY_SPACE": " ", "CATEGORY_NOT_SPACE": "a",
    "CATEGORY_WORD": "a", "CATEGORY_NOT_WORD": "-", "CATEGORY_LINEBREAK": "\n", "CATEGORY_NOT_LINEBREAK": "a",
}


def _category_char(code: object) -> str:
    name = str(code).replace("UNI_", "").replace("LOC_", "")
    return _CATEGORY_CHARS.get(name, "a")


def _set_char(items: list) -> str:
    negate = any(op == _sre.NEGATE for op, _ in items)
    if not negate:
        for op, arg in items:
            if op == _sre.LITERAL:
                return chr(arg)
            if op == _sre.RANGE:
                return chr(arg[0])
            if op == _sre.CATEGORY:
                return _category_char(arg)
        return "a"
    for ch in "_x0aZ-.":
        if not _in_set(ch, items):
            return ch
    return "~"


def _in_set(ch: str, items: list) -> bool:
    code = ord(ch)
    for op, arg in items:
        if op == _sre.LITERAL and arg == code:
            return True
        if op == _sre.RANGE and arg[0] <= code <= arg[1]:
            return True
        if op == _sre.CATEGORY:
            name = str(arg).replace("UNI_", "").replace("LOC_", "")
            if name == "CATEGORY_WORD" and (ch.isalnum() or ch == "_"):
                return True
            if name == "CATEGORY_DIGIT" and ch.isdigit():
                return True
            if name == "CATEGORY_SPACE" and ch.isspace():
                return True
    return False


def _expand(items: Iterable, limit: int) -> list[str]:
    results = [""]
    for op, arg in items:
        options = _options(op, arg, limit) or [""]
        results = list(dict.fromkeys(r + o for r in results for o in options))[:limit]
    return results


def _options(op: object, arg: object, limit: int) -> list[str]:
    if op == _sre.LITERAL:
        return [chr(arg)]  # type: ignore[arg-type]
    if op == _sre.NOT_LITERAL:
        return ["_" if chr(arg) != "_" else "x"]  # type: ignore[arg-type]
    if op == _sre.ANY:
        return ["_"]
    if op == _sre.IN:
        return [_set_char(arg)]  # type: ignore[arg-type]
    if op == _sre.CATEGORY:
        return [_category_char(arg)]
    if op == _sre.BRANCH:
        out: list[str] = []
        for alt in arg[1]:  # type: ignore[index]
            out += _expand(alt, limit)
        return out[:limit]
    if op == _sre.SUBPATTERN:
        return _expand(arg[-1], limit)  # type: ignore[index]
    if getattr(_sre, "ATOMIC_GROUP", None) is not None and op == _sre.ATOMIC_GROUP:
        return _expand(arg, limit)  # type: ignore[arg-type]
    if op in _REPEATS:
        lo, hi, sub = arg  # type: ignore[misc]
        body = _expand(sub, limit)
        out = [b * lo for b in body]
        if hi > lo:
            out += [b * (lo + 1) for b in body]
        return list(dict.fromkeys(out))[:limit]
    return [""]  # anchors, look-arounds, back-references: contribute no characters


@lru_cache(maxsize=4096)
def regex_samples(pattern: str, limit: int = SAMPLE_LIMIT) -> tuple[str, ...]:
    """Names the regex accepts, one or two per alternative (verified against the regex)."""
    if not pattern:
        return ()
    try:
        parsed = _sre.parse(pattern)
        rx = re.compile(pattern, re.IGNORECASE)
    except re.error:
        return ()
    samples = _expand(list(parsed), limit)
    return tuple(s for s in samples if s and rx.search(s))


def shared_names(pattern_a: str | list[str], pattern_b: str | list[str]) -> tuple[list[str], bool]:
    """(names both signatures accept among either's probes, whether every probe of each is
    accepted by the other - i.e. they are equivalent as far as probing can tell). A
    signature is one regex or several (``op_name_regex`` plus its ``alternatives``): it
    accepts a name when any of them does, as the matcher does."""
    pa, pb = _as_patterns(pattern_a), _as_patterns(pattern_b)
    ra, rb = _accepts_any(pa), _accepts_any(pb)
    sa, sb = _samples(pa), _samples(pb)
    shared = [s for s in sa if rb(s)] + [s for s in sb if ra(s) and s not in sa]
    equivalent = bool(sa and sb) and all(map(rb, sa)) and all(map(ra, sb))
    return list(dict.fromkeys(shared)), equivalent


def _as_patterns(patterns: str | list[str]) -> list[str]:
    return [p for p in ([patterns] if isinstance(patterns, str) else patterns) if p]


def _samples(patterns: list[str]) -> list[str]:
    return list(dict.fromkeys(s for p in patterns for s in regex_samples(p)))


def _accepts_any(patterns: list[str]) -> Callable[[str], bool]:
    compiled = [re.compile(p, re.IGNORECASE) for p in patterns]
    return lambda name: any(rx.search(name) for rx in compiled)


def _shown(patterns: list[str]) -> str:
    return " | ".join(f"/{p}/" for p in patterns)


# ===================================================================== dimensions
def _norm_set(values: Iterable[str], fn: Callable[[str], str] | None) -> set[str]:
    out = set()
    for v in values:
        if v == "*":
            out.add("*")
            continue
        try:
            out.add(fn(v) if fn else v.lower())
        except VocabularyError:
            out.add(v)
    return out


def compare_sets(name: str, a: set[str], b: set[str], plural: str | None = None) -> DimensionComparison:
    label = plural or name
    if "*" in a and "*" in b:
        return DimensionComparison(dimension=name, relation="identical", shared=["*"], detail=f"both take any {label}")
    if "*" in a or "*" in b:
        narrow = sorted(b if "*" in a else a)
        who = "subject" if "*" in a else "other card"
        return DimensionComparison(dimension=name, relation="overlap", shared=narrow,
                                   detail=f"the {who} takes any {label}; shared: {', '.join(narrow)}")
    shared = sorted(a & b)
    rel: Relation = "identical" if a == b else ("overlap" if shared else "disjoint")
    detail = (f"same {label}: {', '.join(shared)}" if rel == "identical"
              else f"shared {label}: {', '.join(shared)}" if shared
              else f"no common {label}: {', '.join(sorted(a))} vs {', '.join(sorted(b))}")
    return DimensionComparison(dimension=name, relation=rel, shared=shared, only_subject=sorted(a - b),
                               only_other=sorted(b - a), detail=detail)


def compare_op_names(a: str | list[str], b: str | list[str]) -> DimensionComparison:
    """Compare two op-name signatures: each one regex, or the card's ``patterns()``
    (``op_name_regex`` and its ``alternatives``, any of which names the hotspot)."""
    a, b = _as_patterns(a), _as_patterns(b)
    if not a and not b:
        return DimensionComparison(dimension="op_name", relation="identical",
                                   detail="neither has an op-name signature: both match on operator class and evidence")
    if not a or not b:
        patterns = a or b
        who = "subject" if not a else "other card"
        return DimensionComparison(dimension="op_name", relation="overlap", shared=_samples(patterns)[:8],
                                   detail=f"the {who} has no op-name signature and takes any name of its operator "
                                          f"classes, including those {_shown(patterns)} accept")
    if sorted(p.strip() for p in a) == sorted(p.strip() for p in b):
        return DimensionComparison(dimension="op_name", relation="identical", shared=_samples(a)[:8],
                                   detail=f"same op-name signature {_shown(a)}")
    shared, equivalent = shared_names(a, b)
    if equivalent:
        return DimensionComparison(dimension="op_name", relation="identical", shared=shared[:8],
                                   detail=f"{_shown(a)} and {_shown(b)} accept each other's every probe name")
    if shared:
        return DimensionComparison(dimension="op_name", relation="overlap", shared=shared[:8],
                                   detail=f"both signatures accept the hotspot name(s) {', '.join(repr(s) for s in shared[:4])}")
    n = len(_samples(a)) + len(_samples(b))
    return DimensionComparison(dimension="op_name", relation="disjoint",
                               detail=f"no probe name ({n} generated from the two signatures) matches both "
                                      f"{_shown(a)} and {_shown(b)}")


def compare_evidence(a: MatchSpec, b: MatchSpec) -> DimensionComparison:
    ka = {(e.field or e.id): e.required for e in a.evidence}
    kb = {(e.field or e.id): e.required for e in b.evidence}
    clash = sorted(k for k in ka.keys() & kb.keys() if ka[k] != kb[k])
    if clash:
        return DimensionComparison(dimension="evidence", relation="disjoint", only_subject=[f"{k}={ka[k]}" for k in clash],
                                   only_other=[f"{k}={kb[k]}" for k in clash],
                                   detail="; ".join(f"evidence {k}: subject needs {ka[k]!r}, other needs {kb[k]!r}" for k in clash))
    if ka == kb:
        return DimensionComparison(dimension="evidence", relation="identical", shared=[f"{k}={v}" for k, v in sorted(ka.items())],
                                   detail="same evidence requirements" if ka else "neither requires evidence")
    return DimensionComparison(dimension="evidence", relation="overlap",
                               shared=[f"{k}={v}" for k, v in sorted(ka.items()) if kb.get(k) == v],
                               only_subject=[f"{k}={v}" for k, v in sorted(ka.items()) if k not in kb],
                               only_other=[f"{k}={v}" for k, v in sorted(kb.items()) if k not in ka],
                               detail="one card requires evidence the other does not (it is narrower, not separate)")


# -------------------------------------------------------------------------- shapes
_GRID = (32, 64, 128, 256, 512, 768, 1024, 1280, 1536, 2048, 2880, 3072, 4096, 5120, 7168, 8192, 14336,
         16384, 32768, 65536)


def _compute_units(match: MatchSpec) -> int:
    vocab = vocabulary()
    for g in match.gens:
        if vocab.is_known_generation(g):
            return vocab.generation_info(g).compute_units
    return 256


def _accepts(preds: list[Predicate], M: int, N: int, K: int, cu: int) -> bool:
    return all(predicate_holds(p, metric_value(p.metric, M, N, K, p.tile or (128, 128), cu)) for p in preds)


def _inside(cls: ShapeClass, M: int, N: int, K: int, cu: int) -> bool:
    return all(predicate_holds(p, metric_value(p.metric, M, N, K, p.tile or cls.tile, cu)) for p in cls.when)


_GRID_SHAPES = tuple((M, N, K) for M in _GRID for N in _GRID for K in _GRID)
_GRID_SET = frozenset(_GRID_SHAPES)


def _probe_shapes(a: Subject, b: Subject) -> list[tuple[int, int, int]]:
    """The fixed grid plus both cards' own shapes (validated and verifier shapes)."""
    return list(dict.fromkeys(a.extra_shapes + b.extra_shapes + list(_GRID_SHAPES)))


def _key(preds: list[Predicate], cu: int) -> tuple:
    return (cu, tuple(tuple(sorted(p.model_dump(exclude={"why"}).items(), key=lambda kv: kv[0])) for p in preds))


@lru_cache(maxsize=1024)
def _grid_accepts(key: tuple, preds_json: str) -> frozenset[tuple[int, int, int]]:
    """The grid shapes a constraint set accepts (cached: lint compares every pair)."""
    from pydantic import TypeAdapter

    preds = TypeAdapter(list[Predicate]).validate_json(preds_json)
    return frozenset(s for s in _GRID_SHAPES if _accepts(preds, *s, key[0]))


def _accepted(preds: list[Predicate], cu: int, shapes: list[tuple[int, int, int]]) -> set[tuple[int, int, int]]:
    if not preds:
        return set(shapes)
    from pydantic import TypeAdapter

    grid = _grid_accepts(_key(preds, cu), TypeAdapter(list[Predicate]).dump_json(preds).decode())
    return {s for s in shapes if s in grid or (s not in _GRID_SET and _accepts(preds, *s, cu))}


def compare_shapes(a: Subject, b: Subject) -> DimensionComparison:
    ca, cb = a.match.shape_constraints, b.match.shape_constraints
    da = sorted(p.describe() for p in ca)
    db = sorted(p.describe() for p in cb)
    probes: list[tuple[int, int, int]] | None = None
    if da == db:
        rel: Relation = "identical"
        detail = "same shape constraints" if da else "neither constrains shapes"
        shared_shapes: list[tuple[int, int, int]] = []
    else:
        probes = _probe_shapes(a, b)
        acc_a = _accepted(ca, _compute_units(a.match), probes)
        acc_b = _accepted(cb, _compute_units(b.match), probes)
        both = [s for s in probes if s in acc_a and s in acc_b]
        only_a = [s for s in probes if s in acc_a and s not in acc_b]
        only_b = [s for s in probes if s in acc_b and s not in acc_a]
        shared_shapes = both
        if not both:
            rel = "disjoint"
            detail = (f"no probed shape ({len(probes)}) satisfies both: subject needs {'; '.join(da) or 'nothing'}, "
                      f"other needs {'; '.join(db) or 'nothing'}")
        elif not only_a and not only_b:
            rel, detail = "identical", f"different constraints accept the same {len(both)} probed shapes"
        else:
            rel = "overlap"
            detail = (f"{len(both)} of {len(probes)} probed shapes satisfy both "
                      f"(e.g. {_fmt(both[0])}); subject-only {len(only_a)}, other-only {len(only_b)}")
    cmp = DimensionComparison(dimension="shape", relation=rel, detail=detail,
                              only_subject=[d for d in da if d not in db], only_other=[d for d in db if d not in da],
                              shared=[d for d in da if d in db])
    if rel != "disjoint" and a.shape_classes and b.shape_classes:
        if probes is None:
            probes = _probe_shapes(a, b)
            accepted = _accepted(ca, _compute_units(a.match), probes)
            shared_shapes = [s for s in probes if s in accepted]
        meets = _class_meetings(a, b, shared_shapes)
        if meets:
            cmp.detail += "; shape classes meeting on shared shapes: " + ", ".join(meets)
    return cmp


def _class_meetings(a: Subject, b: Subject, shapes: list[tuple[int, int, int]], limit: int = 6) -> list[str]:
    cua, cub = _compute_units(a.match), _compute_units(b.match)
    seen: dict[tuple[str, str], tuple[int, int, int]] = {}
    for s in shapes[:4000]:
        ka = next((c.id for c in a.shape_classes if _inside(c, *s, cua)), None)
        kb = next((c.id for c in b.shape_classes if _inside(c, *s, cub)), None)
        if ka and kb and (ka, kb) not in seen:
            seen[(ka, kb)] = s
            if len(seen) >= limit:
                break
    return [f"{x} ~ {y} (e.g. {_fmt(s)})" for (x, y), s in seen.items()]


def _fmt(s: tuple[int, int, int]) -> str:
    return f"{s[0]}x{s[1]}x{s[2]}"


# ======================================================================== compare
def compare(subject: Subject, other: Subject) -> OverlapFinding:
    vocab = vocabulary()
    sa, sb = subject.match, other.match
    dims = [
        compare_sets("operator", _norm_set(sa.operator, None), _norm_set(sb.operator, None), "operators"),
        compare_sets("gens", _norm_set(sa.gens, vocab.generation), _norm_set(sb.gens, vocab.generation), "generations"),
        compare_sets("arch_class", _norm_set(sa.arch_class, None), _norm_set(sb.arch_class, None), "arch classes"),
        compare_sets("dtypes", _norm_set(sa.dtypes, vocab.dtype), _norm_set(sb.dtypes, vocab.dtype), "dtypes"),
        compare_sets("scale_formats", _norm_set(sa.scale_formats or ["*"], vocab.scale_format),
                     _norm_set(sb.scale_formats or ["*"], vocab.scale_format), "scale formats"),
        compare_sets("regimes", set(sa.regimes), set(sb.regimes), "regimes"),
    ]
    dims.append(compare_op_names(sa.profile_signature.patterns(), sb.profile_signature.patterns()))
    dims.append(compare_evidence(sa, sb))
    # the shape grid is the costly probe: only when nothing else separates the cards
    if all(d.relation != "disjoint" for d in dims):
        dims.append(compare_shapes(subject, other))
    pair_a, pair_b = (sa.from_backend, sa.to_backend), (sb.from_backend, sb.to_backend)
    dims.append(DimensionComparison(
        dimension="backends", relation="identical" if pair_a == pair_b else "overlap",
        detail=f"{_route(pair_a)} vs {_route(pair_b)}" + ("" if pair_a == pair_b else " (alternative routes; the matcher does not separate on backends)")))

    if any(d.relation == "disjoint" for d in dims):
        kind: Literal["duplicate", "overlap", "distinct"] = "distinct"
    elif all(d.relation == "identical" for d in dims):
        kind = "duplicate"
    else:
        kind = "overlap"
    op = next(d for d in dims if d.dimension == "op_name")
    names = op.shared if op.relation != "disjoint" and sa.profile_signature.patterns() and sb.profile_signature.patterns() else []
    supersedes = ("subject" if other.id and other.id in subject.supersedes
                  else "other" if subject.id and subject.id in other.supersedes else None)
    return OverlapFinding(
        card_id=other.id or "?", title=other.title, kind=kind, shared_hotspot_names=names,
        overlaps=[f"{d.dimension}: {d.detail}" for d in dims if d.relation != "disjoint" and d.dimension != "backends"],
        separated_by=[f"{d.dimension}: {d.detail}" for d in dims if d.relation == "disjoint"],
        supersedes=supersedes, dimensions=dims)


def _route(pair: tuple[str | None, str | None]) -> str:
    return f"{pair[0] or '?'} -> {pair[1] or '?'}"


def _notable(f: OverlapFinding) -> bool:
    if f.kind != "distinct":
        return True
    return bool(f.shared_hotspot_names) and next(d for d in f.dimensions if d.dimension == "operator").relation != "disjoint"


def check(subject: Subject, others: Iterable[Subject], label: str | None = None) -> OverlapCheck:
    """Compare ``subject`` with every other card (a card never with itself)."""
    report = OverlapCheck(subject=label or subject.id or "match spec", compared=0)
    for other in others:
        if other.id is not None and other.id == subject.id:
            continue
        report.compared += 1
        finding = compare(subject, other)
        if finding.kind == "duplicate":
            report.duplicates.append(finding.card_id)
        elif finding.kind == "overlap":
            report.overlaps.append(finding.card_id)
        if _notable(finding):
            report.findings.append(finding)
        for rv in other.reviews:
            if rv.verdict == "duplicate_functionality" and subject.id and subject.id in rv.overlaps_with:
                report.reviews.append(_review(other.id or "?", rv))
    for rv in subject.reviews:
        if rv.verdict == "duplicate_functionality":
            report.reviews.insert(0, _review(subject.id or "subject", rv))
    order = {"duplicate": 0, "overlap": 1, "distinct": 2}
    report.findings.sort(key=lambda f: (order[f.kind], f.card_id))
    return report


def _review(card_id: str, rv: Review) -> ReviewNote:
    return ReviewNote(card_id=card_id, source=rv.source, verdict=rv.verdict, says=rv.says, overlaps_with=rv.overlaps_with)


# ============================================================================ lint
def catalog_overlap_problems(cards: dict[str, ParsedCard]) -> list[CardProblem]:
    """Duplicates are errors, overlaps warnings; each pair is reported once, on the less
    established card (experimental / draft before validated; else the id that sorts
    later), naming the other. A duplicate where one card supersedes the other is a
    warning (retire the superseded card)."""
    problems: list[CardProblem] = []
    ids = sorted(cards)
    subjects = {cid: Subject.of(cards[cid].card) for cid in ids}
    by_operator: dict[str, set[str]] = {}
    for cid in ids:
        for op in subjects[cid].match.operator:
            by_operator.setdefault(op.lower(), set()).add(cid)
    wildcard = {cid for cid in ids if "*" in subjects[cid].match.operator}
    for cid in ids:
        peers = set(wildcard)
        for op in subjects[cid].match.operator:
            peers |= by_operator.get(op.lower(), set())
        if "*" in subjects[cid].match.operator:
            peers = set(ids)
        for other in sorted(p for p in peers if p < cid):
            f = compare(subjects[cid], subjects[other])
            if f.kind == "distinct":
                continue
            parsed = cards[cid]
            if _standing(cards[other]) > _standing(parsed):  # report on the less established card
                parsed, other_id = cards[other], cid
            else:
                other_id = other
            line = parsed.line_of("match")
            if f.kind == "duplicate" and f.supersedes is None:
                problems.append(CardProblem(
                    file=str(parsed.path), line=line, field="match", severity="error",
                    message=f"match space duplicates card {other_id!r} (operators, generations, dtypes, scale formats, "
                            "regimes, op-name signature, shapes, evidence and backends all identical): merge the two, "
                            f"narrow one, or list {other_id!r} in supersedes"))
            elif f.kind == "duplicate":
                problems.append(CardProblem(
                    file=str(parsed.path), line=line, field="match", severity="warning",
                    message=f"match space identical to {other_id!r}, which one card supersedes: retire the superseded card "
                            "(validation.status: deprecated)"))
            else:
                shared = "; ".join(f.overlaps[:4])
                problems.append(CardProblem(
                    file=str(parsed.path), line=line, field="match", severity="warning",
                    message=f"match space overlaps card {other_id!r} and nothing separates them ({shared}): "
                            "add what decides between them (a scale format, shape constraint or evidence)"))
    return problems


_STANDING = {"validated": 0, "experimental": 1, "draft": 2, "deprecated": 3}


def _standing(parsed: ParsedCard) -> int:
    return _STANDING.get(parsed.card.validation.status, 2)
