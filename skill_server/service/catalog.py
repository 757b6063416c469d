"""The catalog side of the service: list, match (one hotspot or a whole profile), recipes,
lint, overlap and the doctor. Each answer carries the card's evidence from the ledger."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from skill_server.cards.card_files import artifact_names
from skill_server.cards.catalog import Catalog
from skill_server.cards.lint import lint_catalog
from skill_server.cards.schema import (CardParseError, CardProblem, MatchSpec, ParsedCard, RecipeRow, load_yaml,
                                       parse_card_text, split_front_matter)
from skill_server.cards.shapes import ShapeSelection, parse_gemm_shape, select_shape_class
from skill_server.cards.vocabulary import VocabularyError, vocabulary
from skill_server.doctor.model import DoctorFindings
from skill_server.doctor.runner import shared_run
from skill_server.matching.hotspot import GemmShape, Hotspot
from skill_server.matching.matcher import MatchInputError, MatchResult, match_hotspot, target_compute_units
from skill_server.matching.overlap import OverlapCheck, Subject, check
from skill_server.policy.client_policy import ClientPolicy
from skill_server.policy.confinement import PROFILE_FILE, ConfinementError, open_confined, withhold_file_text
from skill_server.profiles import ProfileError, load_profile
from skill_server.reverify.claims import Reverification
from skill_server.service.errors import ServiceError
from skill_server.service.evidence import EvidenceService
from skill_server.service.workspace import Workspace

MAX_PAGE = 200


# ------------------------------------------------------------------------- models
class SkillSummary(BaseModel):
    id: str
    title: str
    operators: list[str]
    gens: list[str]
    dtypes: list[str]
    regimes: list[str]
    scale_formats: list[str] | None
    validation_status: str
    last_verified: str
    validation_date: str | None
    shape_classes: list[str] = Field(default_factory=list)
    reverification: Reverification = Field(default_factory=Reverification,
                                           description="latest verified re-verification per platform and the figures "
                                           "behind the card, each with its evidence level, platform and date")


class SkillList(BaseModel):
    skills: list[SkillSummary]
    total: int = Field(description="cards matching the filters")
    next_cursor: str | None = Field(None, description="pass as cursor for the next page; null on the last page")
    catalog_problems: int = Field(0, description="cards left out of the catalog for errors (see `skill-server lint`)")


class RecipeView(BaseModel):
    card_id: str
    title: str
    mode: Literal["summary", "section", "full"]
    shape: str | None = None
    shape_class: ShapeSelection | None = None
    recipe: RecipeRow | None = None
    summary: dict[str, str] = Field(default_factory=dict, description="section title -> text, most actionable first")
    section: str | None = None
    text: str | None = None
    available_sections: list[str] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    validation_status: str
    last_verified: str
    reverification: Reverification = Field(default_factory=Reverification,
                                           description="latest verified re-verification per platform and the figures "
                                           "behind the card, each with its evidence level, platform and date")


class ProfileHotspotMatch(BaseModel):
    rank: int = Field(description="1 = most GPU time in the profile")
    op_name: str
    full_name: str = Field(description="the kernel name exactly as the profiler wrote it")
    pct_gpu: float | None
    calls: int | None = None
    total_time_ns: float | None = None
    shape: str | None = Field(None, description="set when the kernel ran at several shapes or MoE stages: one entry each")
    segment_kernels: list[str] = Field(default_factory=list)
    result: MatchResult


class ProfileMatchResult(BaseModel):
    format: str
    total_gpu_time_ns: float | None
    hotspots: list[ProfileHotspotMatch]
    device_names: list[str] = Field(default_factory=list)
    device_gen: str | None = Field(None, description="the generation the trace's device resolves to")
    notes: list[str] = Field(default_factory=list)


class ReloadResult(BaseModel):
    cards: int
    problems: list[str]


# The summary shows these sections first (a heading matches when it starts with the key).
SUMMARY_SECTIONS = ("When to use", "Procedure", "Knobs & pitfalls", "Do-no-harm notes")
SECTION_ALIASES = {"pitfalls": "Knobs & pitfalls", "knobs": "Knobs & pitfalls", "do-no-harm": "Do-no-harm notes",
                   "recipes": "Per-shape recipes", "diagnosis": "Bottleneck diagnosis"}
SUMMARY_CHARS = 2400


class CatalogService:
    def __init__(self, ws: Workspace, evidence: EvidenceService):
        self.ws = ws
        self.evidence = evidence

    def reload(self) -> ReloadResult:
        cat = self.ws.holder.reload()
        return ReloadResult(cards=len(cat.cards), problems=[str(p) for p in cat.problems])

    # -- list ----------------------------------------------------------------------
    def list_skills(self, gen: str | None = None, operator: str | None = None, dtype: str | None = None,
                    cursor: str | None = None, limit: int = 50) -> SkillList:
        vocab = vocabulary()
        try:
            gen_n = vocab.generation(gen) if gen is not None else None
            dtype_n = vocab.dtype(dtype) if dtype is not None else None
        except VocabularyError as exc:
            raise ServiceError(str(exc)) from None
        if operator is not None:
            known_ops = set(vocab.known_operators()) | {o.lower() for p in self.ws.catalog.cards.values()
                                                       for o in p.card.match.operator}
            if operator.strip().lower() not in known_ops:
                raise ServiceError(f"unknown operator class {operator[:80]!r}; known: {', '.join(sorted(known_ops))}")
            operator = operator.strip()
        if not 1 <= limit <= MAX_PAGE:
            raise ServiceError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        try:
            offset = int(cursor) if cursor else 0
            if offset < 0:
                raise ValueError
        except ValueError:
            raise ServiceError(f"invalid cursor {cursor!r}: pass the next_cursor of a previous page") from None
        cat = self.ws.catalog
        rows = []
        for cid in sorted(cat.cards):
            c = cat.cards[cid].card
            if gen_n and not _norm_in(gen_n, c.match.gens, vocab.generation):
                continue
            if dtype_n and not _norm_in(dtype_n, c.match.dtypes, vocab.dtype):
                continue
            if operator and operator.lower() not in [o.lower() for o in c.match.operator]:
                continue
            rows.append(_summary(cat.cards[cid], self.evidence.evidence_for(cid, limit=3)))
        page = rows[offset : offset + limit]
        nxt = str(offset + limit) if offset + limit < len(rows) else None
        return SkillList(skills=page, total=len(rows), next_cursor=nxt, catalog_problems=len(cat.problems))

    # -- match ---------------------------------------------------------------------
    def match_skill(self, hotspot: Hotspot, target_gen: str | None = None) -> MatchResult:
        """Match one hotspot; ``target_gen`` matches it as if it ran on that generation."""
        try:
            result = match_hotspot(hotspot, self.ws.catalog.index, target_gen=target_gen)
        except MatchInputError as exc:
            raise ServiceError(str(exc)) from None
        return self._join_claims(result)

    def _join_claims(self, result: MatchResult) -> MatchResult:
        """Attach each match's latest verified re-verification and its figures (the matcher
        itself stays pure); a drifted or failed claim adds its caveat."""
        shape = str(result.hotspot.shape) if result.hotspot.shape else None
        for m in result.matches:
            info = self.evidence.evidence_for(m.card_id, shape, limit=4)
            m.reverification = info
            if info.caveats:
                m.caveats = [*m.caveats, *info.caveats]
        return result

    def match_profile(self, path: str | None = None, content: str | bytes | None = None, format: str | None = None,
                      gen: str | None = None, dtype: str | None = None, scale_format: str | None = None,
                      regime: Literal["prefill", "decode"] | None = None, top: int = 20,
                      min_pct: float = 0.0, max_bytes: int | None = None,
                      target_gen: str | None = None, client: ClientPolicy | None = None) -> ProfileMatchResult:
        """Rank a profile's kernels by GPU time and match each. The defaults given here
        (gen, dtype, ...) fill only what the profile itself did not reveal; ``target_gen``
        matches every hotspot as if for that generation. A kernel that ran at several GEMM
        shapes or in both MoE stages is matched once per variant.

        With ``client`` (a request from an MCP client, not the operator) ``path`` is
        opened only under the policy's roots (``confinement``), the profile is capped at
        the policy's size, and an error about a file never quotes the file."""
        if (path is None) == (content is None):
            raise ServiceError("give exactly one of path (a file on the server's machine) or content (the file's text)")
        options = dict(format=format, top=top, min_pct=min_pct)
        if client is not None and path is not None:
            summary = _load_client_profile(path, client, options)
        else:
            try:
                summary = load_profile(path=path, content=content, **options,
                                       max_bytes=client.max_profile_bytes if client is not None else max_bytes)
            except ProfileError as exc:
                raise ServiceError(str(exc)) from None
        notes = list(summary.notes)
        if gen is not None and summary.device_gen is not None:
            try:
                given = vocabulary().generation(gen)
            except VocabularyError as exc:
                raise ServiceError(str(exc)) from None
            if given != summary.device_gen:
                notes.append(
                    f"the trace's device ({', '.join(summary.device_names)} -> {summary.device_gen}) overrides "
                    f"gen={gen!r}; pass target_gen={gen!r} (CLI --target-gen) to match as if for {given}")
        if target_gen is not None:
            notes.append(f"every hotspot is matched as if for target generation {target_gen!r}"
                         + (f"; the trace's device is {', '.join(summary.device_names)}" if summary.device_names else ""))
        defaults = (("gen", gen), ("dtype", dtype), ("scale_format", scale_format), ("regime", regime))
        out = []
        for ph in summary.hotspots:
            variants = ph.per_variant(summary.total_gpu_time_ns)
            for hs in variants:
                update = {k: v for k, v in defaults if v is not None and getattr(hs, k) is None}
                label = None
                if len(variants) > 1:
                    parts = [str(hs.shape) if hs.shape else None, hs.stage]
                    label = ", ".join(p for p in parts if p) or "shape and stage unknown"
                out.append(ProfileHotspotMatch(
                    rank=ph.rank, op_name=hs.op_name, full_name=ph.full_name, pct_gpu=hs.pct_gpu, calls=ph.calls,
                    total_time_ns=ph.total_ns, shape=label, segment_kernels=hs.segment_kernels,
                    result=self.match_skill(hs.model_copy(update=update), target_gen=target_gen)))
        return ProfileMatchResult(format=summary.format, total_gpu_time_ns=summary.total_gpu_time_ns, hotspots=out,
                                  device_names=summary.device_names, device_gen=summary.device_gen, notes=notes)

    # -- recipe --------------------------------------------------------------------
    def get_recipe(self, card_id: str, shape: GemmShape | str | None = None, section: str | None = None,
                   full: bool = False) -> RecipeView:
        parsed = self.ws.card(card_id)  # never substitutes another card
        card = parsed.card
        base = dict(card_id=card.id, title=card.title, available_sections=list(parsed.sections),
                    artifacts=artifact_names(self.ws.catalog, card.id),
                    validation_status=card.validation.status, last_verified=card.validation.last_verified,
                    reverification=self.evidence.evidence_for(card.id, str(_parse_gemm_shape(shape)) if shape else None))
        if full:
            return RecipeView(mode="full", text=parsed.path.read_text(encoding="utf-8"), **base)
        if section:
            name = _find_section(parsed, section)
            return RecipeView(mode="section", section=name, text=parsed.sections[name], **base)
        selection = None
        shape_text = None
        if shape is not None:
            gs = _parse_gemm_shape(shape)
            shape_text = str(gs)
            selection = select_shape_class(card.shape_classes, gs.M, gs.N, gs.K, target_compute_units(card, vocabulary()))
        summary: dict[str, str] = {}
        for key in SUMMARY_SECTIONS:
            name = next((s for s in parsed.sections if s.lower().startswith(key.lower())), None)
            if name:
                text = parsed.sections[name]
                summary[name] = text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS].rsplit("\n", 1)[0] + \
                    f"\n[... {len(text) - SUMMARY_CHARS} more characters: ask for section={name!r}]"
        return RecipeView(mode="summary", shape=shape_text, shape_class=selection,
                          recipe=selection.recipe if selection else None, summary=summary, **base)

    # -- lint ----------------------------------------------------------------------
    def doctor(self, checks: list[str] | None = None) -> DoctorFindings:
        """What a first run on this box needs (``skill_server.doctor.runner``); read-only, never raises
        for what it finds. Concurrent callers share one run, and a report of the same checks
        younger than ``doctor.REUSE_S`` is returned as it is."""
        try:
            return shared_run(checks, skills_dir=self.ws.skills_dir)
        except ValueError as exc:
            raise ServiceError(str(exc)) from None

    def lint(self) -> list[CardProblem]:
        return lint_catalog(Catalog.load(self.ws.skills_dir))

    def check_overlap(self, draft_text: str | None = None, card_id: str | None = None,
                      match_spec: dict | None = None) -> OverlapCheck:
        """Existing cards whose match space intersects the draft's, the card's or the
        spec's: duplicates, overlaps, and distinct cards sharing a hotspot name."""
        if sum(x is not None for x in (draft_text, card_id, match_spec)) != 1:
            raise ServiceError("give exactly one of draft_text (a SKILL.md text), card_id or match_spec")
        cat = self.ws.catalog
        others = [Subject.of(p.card) for p in cat.cards.values()]
        notes: list[str] = []
        if card_id is not None:
            subject, label = Subject.of(self.ws.card(card_id).card), card_id
        elif match_spec is not None:
            try:
                spec = MatchSpec.model_validate(match_spec)
            except ValidationError as exc:
                raise ServiceError("match_spec: " + "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None
            subject, label = Subject(id=None, title="match spec", match=spec), "match spec"
        else:
            try:
                parsed = parse_card_text(draft_text or "", "draft")
                subject = Subject.of(parsed.card)
            except CardParseError as exc:
                subject = _draft_match_only(draft_text or "", exc)
                notes.append("the draft is not a valid card yet (see `skill-server lint`); compared on its match block")
            label = f"draft {subject.id}" if subject.id else "draft"
            if subject.id in cat.cards:
                notes.append(f"the draft uses the id of the existing card {subject.id!r}: compared as its replacement")
        report = check(subject, others, label)
        report.notes = notes + report.notes
        return report


def _norm_in(value: str, allowed: list[str], fn) -> bool:
    for a in allowed:
        try:
            if a == "*" or fn(a) == value:
                return True
        except VocabularyError:
            continue
    return False


def _summary(parsed: ParsedCard, evidence: Reverification | None = None) -> SkillSummary:
    c = parsed.card
    d = c.validation.latest_date
    return SkillSummary(id=c.id, title=c.title, operators=c.match.operator, gens=c.match.gens, dtypes=c.match.dtypes,
                        regimes=list(c.match.regimes), scale_formats=c.match.scale_formats,
                        validation_status=c.validation.status, last_verified=c.validation.last_verified,
                        validation_date=d.isoformat() if d else None,
                        shape_classes=[s.id for s in c.shape_classes],
                        reverification=evidence or Reverification())



def _find_section(parsed: ParsedCard, wanted: str) -> str:
    key = SECTION_ALIASES.get(wanted.strip().lower(), wanted).strip().lower()
    for name in parsed.sections:
        if name.lower() == key or name.lower().startswith(key):
            return name
    raise ServiceError(f"card {parsed.card.id!r} has no section {wanted!r}; sections: {list(parsed.sections)}")


def _parse_gemm_shape(shape: GemmShape | str) -> GemmShape:
    try:
        return parse_gemm_shape(shape)
    except ValueError as exc:  # ShapeTextError, or the GemmShape bounds
        raise ServiceError(str(exc)) from None


def _load_client_profile(path: str, client: ClientPolicy, options: dict):
    """A client-named profile: opened under the roots, parsed from the opened file, and
    any parser error rebuilt to name the client's path and withhold the file's text."""
    try:
        with open_confined(path, client.file_roots, PROFILE_FILE) as opened:
            try:
                return load_profile(path=opened.read_path, max_bytes=client.max_profile_bytes, **options)
            except ProfileError as exc:
                # ``expected`` and ``where`` (a column, a JSON path) are the parser's own text
                exempt = " ".join(x for x in (exc.expected, exc.where, opened.read_path, str(opened.real)) if x)
                reason = withhold_file_text(exc.reason, opened, exempt=exempt, scan_bytes=client.max_profile_bytes)
                raise ServiceError(str(ProfileError(reason, file=opened.label, line=exc.line,
                                                    where=exc.where, expected=exc.expected))) from None
    except ConfinementError as exc:
        raise ServiceError(str(exc)) from None


def _draft_match_only(text: str, exc: Exception):
    """A draft that is not a valid card yet: compare on its ``match`` block alone."""
    try:
        fm, _, _, _ = split_front_matter(text, "draft")
        data = load_yaml(fm)
        spec = MatchSpec.model_validate((data or {}).get("match"))
    except (CardParseError, ValidationError, AttributeError, ValueError):
        raise ServiceError(f"the draft is not a card and has no valid match block: {exc}") from None
    cid = data.get("id") if isinstance(data.get("id"), str) else None
    return Subject(id=cid, title=str(data.get("title") or "draft"), match=spec)
