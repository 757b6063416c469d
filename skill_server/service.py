"""The service layer: every behaviour the adapters (MCP tools, CLI) expose lives here once.

Adapters only translate arguments and results; they hold no logic.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from . import DEFAULT_SKILLS_DIR, embedded_write_problem
from .cards import CardProblem, ParsedCard, RecipeRow
from .catalog import Catalog, CatalogHolder
from .claims import NEVER_REVERIFIED, Reverification, summarise
from .hotspot import GemmShape, Hotspot
from .matching import MatchResult, match_hotspot, target_compute_units
from .shapes import ShapeSelection, select_shape_class
from .ledger import ResultRecord, StoredResult, StoredReverification
from .vocabulary import VocabularyError, vocabulary

if TYPE_CHECKING:  # pragma: no cover
    from .doctor_model import DoctorReport
    from .drafting import DraftResult
    from .overlap import OverlapReport
    from .reverify import ReverifyReport

MAX_PAGE = 200


class ServiceError(ValueError):
    """A request the service cannot serve; the message says what to change."""


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
                                           description="latest re-verification per platform, from the results ledger")


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
                                           description="latest re-verification per platform, from the results ledger")


class ProfileHotspotMatch(BaseModel):
    rank: int = Field(description="1 = most GPU time in the profile")
    op_name: str
    full_name: str = Field(description="the kernel name exactly as the profiler wrote it")
    pct_gpu: float | None
    calls: int | None = None
    total_time_ns: float | None = None
    shape: str | None = Field(None, description="set when the kernel ran at several shapes: one entry per shape")
    segment_kernels: list[str] = Field(default_factory=list)
    result: MatchResult


class ProfileMatchResult(BaseModel):
    format: str
    total_gpu_time_ns: float | None
    hotspots: list[ProfileHotspotMatch]
    notes: list[str] = Field(default_factory=list)


class ReloadResult(BaseModel):
    cards: int
    problems: list[str]


class RecordReceipt(BaseModel):
    ledger: str = Field(description="the ledger file written")
    ids: list[int] = Field(description="ids of the stored records")
    card_ids: list[str]


class ValidationHistory(BaseModel):
    card_id: str
    ledger: str
    results: list["StoredResult"] = Field(description="newest first")
    reverifications: list["StoredReverification"] = Field(description="newest first")
    reverification: Reverification = Field(description="latest status per platform")


class ExportResult(BaseModel):
    card_id: str
    path: str
    measurements: int
    replaced: bool = Field(description="True when an earlier ledger export was replaced (force)")


# The summary shows these sections first (a heading matches when it starts with the key).
SUMMARY_SECTIONS = ("When to use", "Procedure", "Knobs & pitfalls", "Do-no-harm notes")
SECTION_ALIASES = {"pitfalls": "Knobs & pitfalls", "knobs": "Knobs & pitfalls", "do-no-harm": "Do-no-harm notes",
                   "recipes": "Per-shape recipes", "diagnosis": "Bottleneck diagnosis"}
SUMMARY_CHARS = 2400


class SkillService:
    def __init__(self, skills_dir: Path | str | None = None, check_interval: float = 1.0,
                 ledger_path: Path | str | None = None):
        from .ledger import Ledger, LatestStatusCache, default_ledger_path

        skills_dir = Path(skills_dir or os.environ.get("SKILL_SERVER_SKILLS_DIR") or DEFAULT_SKILLS_DIR)
        self.skills_dir = skills_dir
        self._holder = CatalogHolder(skills_dir, check_interval=check_interval)
        # the project is the folder holding skills/ (and kernels/, var/)
        self.project_root = skills_dir.resolve().parent
        # the ledger opens lazily: read-only commands never create the file
        self.ledger = Ledger(default_ledger_path(self.project_root, ledger_path))
        self._claims = LatestStatusCache(self.ledger, summarise, check_interval=min(check_interval, 1.0))

    # -- catalog -----------------------------------------------------------------
    @property
    def catalog(self) -> Catalog:
        return self._holder.current()

    def reload(self) -> ReloadResult:
        cat = self._holder.reload()
        return ReloadResult(cards=len(cat.cards), problems=[str(p) for p in cat.problems])

    def card(self, card_id: str) -> ParsedCard:
        try:
            return self.catalog.get(card_id)
        except KeyError as exc:
            raise ServiceError(exc.args[0]) from None

    # -- list ----------------------------------------------------------------------
    def list_skills(self, gen: str | None = None, operator: str | None = None, dtype: str | None = None,
                    cursor: str | None = None, limit: int = 50) -> SkillList:
        vocab = vocabulary()
        try:
            gen_n = vocab.generation(gen) if gen else None
            dtype_n = vocab.dtype(dtype) if dtype else None
        except VocabularyError as exc:
            raise ServiceError(str(exc)) from None
        if not 1 <= limit <= MAX_PAGE:
            raise ServiceError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        try:
            offset = int(cursor) if cursor else 0
            if offset < 0:
                raise ValueError
        except ValueError:
            raise ServiceError(f"invalid cursor {cursor!r}: pass the next_cursor of a previous page") from None
        cat = self.catalog
        claims = self._claims.get()
        rows = []
        for cid in sorted(cat.cards):
            c = cat.cards[cid].card
            if gen_n and not _norm_in(gen_n, c.match.gens, vocab.generation):
                continue
            if dtype_n and not _norm_in(dtype_n, c.match.dtypes, vocab.dtype):
                continue
            if operator and operator.lower() not in [o.lower() for o in c.match.operator]:
                continue
            rows.append(_summary(cat.cards[cid], claims))
        page = rows[offset : offset + limit]
        nxt = str(offset + limit) if offset + limit < len(rows) else None
        return SkillList(skills=page, total=len(rows), next_cursor=nxt, catalog_problems=len(cat.problems))

    # -- match ---------------------------------------------------------------------
    def match_skill(self, hotspot: Hotspot) -> MatchResult:
        from .matching import MatchInputError

        try:
            result = match_hotspot(hotspot, self.catalog.index)
        except MatchInputError as exc:
            raise ServiceError(str(exc)) from None
        return self._join_claims(result)

    def _join_claims(self, result: MatchResult) -> MatchResult:
        """Attach each match's latest re-verification (the matcher itself stays pure);
        a drifted or failed claim adds its caveat."""
        claims = self._claims.get()
        for m in result.matches:
            info = claims.get(m.card_id, NEVER_REVERIFIED)
            m.reverification = info
            if info.caveats:
                m.caveats = [*m.caveats, *info.caveats]
        return result

    def match_profile(self, path: str | None = None, content: str | None = None, format: str | None = None,
                      gen: str | None = None, dtype: str | None = None, scale_format: str | None = None,
                      regime: Literal["prefill", "decode"] | None = None, top: int = 20,
                      min_pct: float = 0.0, max_bytes: int | None = None) -> ProfileMatchResult:
        """Rank a profile's kernels by GPU time and match each. The defaults given here
        (gen, dtype, ...) fill only what the profile itself did not reveal. A kernel that
        ran at several GEMM shapes is matched once per shape."""
        from .profiles import ProfileError, load_profile

        if (path is None) == (content is None):
            raise ServiceError("give exactly one of path (a file on the server's machine) or content (the file's text)")
        try:
            summary = load_profile(path=path, content=content, format=format, top=top, min_pct=min_pct,
                                   max_bytes=max_bytes)
        except ProfileError as exc:
            raise ServiceError(str(exc)) from None
        defaults = (("gen", gen), ("dtype", dtype), ("scale_format", scale_format), ("regime", regime))
        out = []
        for ph in summary.hotspots:
            variants = ph.per_shape() if ph.hotspot.shape is None and ph.shape_variants else [ph.hotspot]
            for hs in variants:
                update = {k: v for k, v in defaults if v is not None and getattr(hs, k) is None}
                out.append(ProfileHotspotMatch(
                    rank=ph.rank, op_name=hs.op_name, full_name=ph.full_name, pct_gpu=hs.pct_gpu, calls=ph.calls,
                    total_time_ns=ph.total_ns, shape=str(hs.shape) if len(variants) > 1 and hs.shape else None,
                    segment_kernels=hs.segment_kernels, result=self.match_skill(hs.model_copy(update=update))))
        return ProfileMatchResult(format=summary.format, total_gpu_time_ns=summary.total_gpu_time_ns, hotspots=out)

    # -- recipe --------------------------------------------------------------------
    def get_recipe(self, card_id: str, shape: GemmShape | str | None = None, section: str | None = None,
                   full: bool = False) -> RecipeView:
        parsed = self.card(card_id)  # never substitutes another card
        card = parsed.card
        base = dict(card_id=card.id, title=card.title, available_sections=list(parsed.sections),
                    artifacts=sorted(p.name for p in parsed.folder.glob("*.yaml")),
                    validation_status=card.validation.status, last_verified=card.validation.last_verified,
                    reverification=self._claims.get().get(card.id, NEVER_REVERIFIED))
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
    def lint(self) -> list[CardProblem]:
        from .lint import lint_catalog

        return lint_catalog(Catalog.load(self.skills_dir))

    # -- results ledger --------------------------------------------------------------
    def verify(self, card_id: str, candidate: str, baseline: str | None = None, shapes: list[str] | None = None,
               options: "dict | None" = None, progress=None):
        """Run the card's verifier on this box: parity against the immutable oracle, runtime
        signatures, same-session A/A + interleaved A/B timing (one subprocess per shape).
        ``candidate`` is FILE.py:FUNC, package.module:FUNC or arm:NAME. Returns the
        verifier's report (``verifiers.report.VerificationReport``)."""
        from verifiers.api import verify
        from verifiers.options import VerifyOptions

        from .doctor_preflight import verify_refusal

        problem = self.problem_of(card_id)
        try:
            opts = VerifyOptions.model_validate(options or {})
            refusal = verify_refusal(opts.device, opts.profile)
            if refusal:
                raise ServiceError(f"verification refused on this box (the doctor tool has the full report):\n{refusal}")
            return verify(problem, candidate, baseline=baseline, shapes=shapes, options=opts, progress=progress)
        except (ValueError, KeyError) as exc:
            raise ServiceError(exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)) from None

    def doctor(self, checks: list[str] | None = None) -> "DoctorReport":
        """What a first run on this box needs (``skill_server.doctor``); read-only, never raises
        for what it finds. Concurrent callers share one run, and a report of the same checks
        younger than ``doctor.REUSE_S`` is returned as it is."""
        from .doctor import shared_run

        try:
            return shared_run(checks, skills_dir=self.skills_dir)
        except ValueError as exc:
            raise ServiceError(str(exc)) from None

    def problem_of(self, card_id: str) -> str:
        """The kernels folder (verifier problem) a card binds to."""
        card = self.card(card_id).card
        if card.verifier is None:
            raise ServiceError(f"card {card_id!r} has no verifier binding (front matter 'verifier:')")
        return card.verifier.problem

    def record_result(self, record: "dict | ResultRecord | list[dict | ResultRecord]") -> RecordReceipt:
        """Validate and store one record or a batch (all or none). Refuses unknown cards,
        impossible figures, oversized payloads and paths outside the project."""
        from .ledger import LedgerError, validate_record

        batch = record if isinstance(record, list) else [record]
        if not batch:
            raise ServiceError("no record given")
        known = set(self.catalog.cards)
        try:
            valid = [validate_record(r, known_cards=known, project_root=self.project_root,
                                     index=i if len(batch) > 1 else None) for i, r in enumerate(batch)]
            stored = self.ledger.record(valid)
        except LedgerError as exc:
            raise ServiceError(str(exc)) from None
        self._claims.invalidate()
        return RecordReceipt(ledger=str(self.ledger.path), ids=[r.id for r in stored],
                             card_ids=sorted({r.card_id for r in stored}))

    def get_validation_history(self, card_id: str, shape: str | None = None, platform: str | None = None,
                               source: str | None = None, limit: int = 50) -> "ValidationHistory":
        from .ledger import LedgerError

        self.card(card_id)  # unknown ids are an error that lists the known ones
        if not 1 <= limit <= 1000:
            raise ServiceError(f"limit must be between 1 and 1000, got {limit}")
        try:
            results = self.ledger.history(card_id=card_id, shape=shape, platform=platform, source=source, limit=limit)
            reverifications = self.ledger.reverifications(card_id=card_id, platform=platform, limit=limit)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None
        return ValidationHistory(card_id=card_id, ledger=str(self.ledger.path), results=results,
                                 reverifications=reverifications,
                                 reverification=self._claims.get().get(card_id, NEVER_REVERIFIED))

    def export_validation(self, card_id: str, path: str | Path | None = None, force: bool = False,
                          shape: str | None = None, platform: str | None = None) -> "ExportResult":
        """Write the card's ledger history as a ``ledger_export`` validation artifact:
        by default a new file beside the card; never over the transcribed artifact."""
        from .ledger import LedgerError
        from .ledger_export import DEFAULT_EXPORT_NAME, artifact_from_results, write_artifact

        parsed = self.card(card_id)
        target = Path(path) if path else parsed.folder / DEFAULT_EXPORT_NAME
        if not target.is_absolute():
            target = self.project_root / target
        if why := embedded_write_problem(target):
            raise ServiceError(why)
        try:
            results = self.ledger.history(card_id=card_id, shape=shape, platform=platform, limit=10_000)
            artifact = artifact_from_results(card_id, results, self.ledger.path)
            replaced = write_artifact(artifact, target, self.project_root, force=force)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None
        return ExportResult(card_id=card_id, path=str(target.resolve()), measurements=len(artifact.measurements),
                            replaced=replaced)

    def reverify(self, card_id: str | None = None, progress=None, *, gates: bool = True, verifier: bool = True,
                 record: bool = True, recorded_by: str | None = None, platform=None, probes=None,
                 gate_runner=None, verifier_runner=None, **smoke) -> "ReverifyReport":
        """Re-check each card (or one) on this box; record a status per card and platform.

        ``progress`` receives ``reverify.ReverifyProgress`` events. ``platform``,
        ``probes``, ``gate_runner`` and ``verifier_runner`` replace the box's own (tests,
        or a caller that already knows the platform); ``smoke`` passes
        ``shapes_override`` / ``verifier_on_cpu`` / ``verifier_options`` to the
        ``Reverifier`` (the bench's --smoke path)."""
        from .ledger import LedgerError, ReverificationRow
        from .reverify import (PROBES, Reverifier, ReverifyReport, default_gate_runner, default_recorded_by,
                               default_verifier_runner, detect_platform, git_revision, now)

        cards = [self.card(card_id)] if card_id else [self.catalog.cards[c] for c in sorted(self.catalog.cards)]
        plat = platform or detect_platform()
        rev = git_revision(self.project_root)
        who = recorded_by or default_recorded_by()
        rv = Reverifier(project_root=self.project_root, platform=plat, recorded_by=who, git_rev=rev,
                        probes=dict(PROBES if probes is None else probes),
                        gate_runner=(gate_runner or default_gate_runner) if gates else None,
                        verifier_runner=(verifier_runner or default_verifier_runner) if verifier else None,
                        **smoke)
        started = now()
        outcomes = []
        for result, records in rv.run(cards, progress):
            outcomes.append(result)
            if record:
                row = ReverificationRow(card_id=result.card_id, platform=plat, status=result.status,
                                        reason=result.reason[:4000], recorded_by=who, git_rev=rev,
                                        detail=result.model_dump(mode="json"))
                try:
                    self.ledger.record_reverification([row], records)
                except LedgerError as exc:
                    raise ServiceError(str(exc)) from None
                self._claims.invalidate()
        return ReverifyReport(platform=plat, git_rev=rev, started_at=started, finished_at=now(), cards=outcomes,
                              ledger=str(self.ledger.path) if record else None)

    def check_overlap(self, draft_text: str | None = None, card_id: str | None = None,
                      match_spec: dict | None = None) -> "OverlapReport":
        """Existing cards whose match space intersects the draft's, the card's or the
        spec's: duplicates, overlaps, and distinct cards sharing a hotspot name."""
        from pydantic import ValidationError

        from .cards import CardParseError, MatchSpec, parse_card_text
        from .overlap import Subject, check

        if sum(x is not None for x in (draft_text, card_id, match_spec)) != 1:
            raise ServiceError("give exactly one of draft_text (a SKILL.md text), card_id or match_spec")
        cat = self.catalog
        others = [Subject.of(p.card) for p in cat.cards.values()]
        notes: list[str] = []
        if card_id is not None:
            subject, label = Subject.of(self.card(card_id).card), card_id
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

    def draft_card(self, new_id: str, from_card: str | None = None, record_ids: list[int] | None = None,
                   shape: str | None = None, platform: str | None = None, gens: list[str] | None = None,
                   out_dir: str | Path | None = None, title: str | None = None) -> "DraftResult":
        """Turn ledger records into a card skeleton (status experimental, TODO prose) in a
        new folder, with the records exported beside it."""
        import re as _re

        from .cards import parse_card_text
        from .drafting import DraftResult, build_draft, count_todos, write_draft
        from .ledger import LedgerError
        from .lint import TODO_MESSAGE, lint_card
        from .overlap import Subject, check

        if not _re.fullmatch(r"[a-z0-9][a-z0-9_]*", new_id or ""):
            raise ServiceError(f"card id {new_id!r}: lower-case letters, digits and '_' (as folder names)")
        cat = self.catalog
        if new_id in cat.cards:
            raise ServiceError(f"card id {new_id!r} is taken by {cat.cards[new_id].path}")
        if from_card is None and not record_ids:
            raise ServiceError("select the records: from_card (with optional shape / platform) and/or record_ids")
        if from_card is not None:
            self.card(from_card)
        card_dir = Path(out_dir) if out_dir else self.skills_dir / new_id
        card_dir = (card_dir if card_dir.is_absolute() else self.project_root / card_dir).resolve()
        if not card_dir.is_relative_to(self.project_root):
            raise ServiceError(f"draft folder {card_dir} lies outside the project {self.project_root}")
        if card_dir.name != new_id:
            raise ServiceError(f"draft folder {card_dir} must be named after the card id {new_id!r}")
        if why := embedded_write_problem(card_dir):
            raise ServiceError(why)
        try:
            results = self.ledger.history(card_id=from_card, shape=shape, platform=platform, ids=record_ids, limit=500)
            if record_ids:
                missing = sorted(set(record_ids) - {r.id for r in results})
                if missing:
                    raise LedgerError(f"no ledger record(s) {missing}" + (f" for card {from_card!r}" if from_card else ""))
            sources = sorted({r.card_id for r in results})
            if len(sources) > 1:
                raise LedgerError(f"the selected records belong to several cards ({sources}): draft from one at a time")
            if not sources:
                raise LedgerError("no ledger records match the selection")
            source = self.card(sources[0])
            text, artifact_text = build_draft(new_id, source, results, self.project_root, card_dir, self.ledger.path,
                                              gens=gens, title=title)
            skill_path, artifact_path = write_draft(card_dir, text, artifact_text)
        except (LedgerError, ValueError) as exc:
            raise ServiceError(str(exc)) from None
        parsed = parse_card_text(text, str(skill_path))
        problems = [str(p) for p in lint_card(parsed, self.project_root, cat) if TODO_MESSAGE not in p.message]
        overlap = check(Subject.of(parsed.card), [Subject.of(p.card) for p in cat.cards.values()], f"draft {new_id}")
        floor = parsed.card.expects.isolated_speedup_min
        return DraftResult(card_id=new_id, path=str(skill_path), artifact=str(artifact_path),
                           records=sorted(r.id for r in results), source_card=source.card.id,
                           gens=list(parsed.card.match.gens), speedup_floor=floor, todo_count=count_todos(text),
                           problems=problems, overlap=overlap.model_dump(mode="json"))


def _norm_in(value: str, allowed: list[str], fn) -> bool:
    for a in allowed:
        try:
            if a == "*" or fn(a) == value:
                return True
        except VocabularyError:
            continue
    return False


def _summary(parsed: ParsedCard, claims=None) -> SkillSummary:
    c = parsed.card
    d = c.validation.latest_date
    return SkillSummary(id=c.id, title=c.title, operators=c.match.operator, gens=c.match.gens, dtypes=c.match.dtypes,
                        regimes=list(c.match.regimes), scale_formats=c.match.scale_formats,
                        validation_status=c.validation.status, last_verified=c.validation.last_verified,
                        validation_date=d.isoformat() if d else None,
                        shape_classes=[s.id for s in c.shape_classes],
                        reverification=claims.get(c.id, NEVER_REVERIFIED) if claims is not None else NEVER_REVERIFIED)



def _find_section(parsed: ParsedCard, wanted: str) -> str:
    key = SECTION_ALIASES.get(wanted.strip().lower(), wanted).strip().lower()
    for name in parsed.sections:
        if name.lower() == key or name.lower().startswith(key):
            return name
    raise ServiceError(f"card {parsed.card.id!r} has no section {wanted!r}; sections: {list(parsed.sections)}")


def _parse_gemm_shape(shape: GemmShape | str) -> GemmShape:
    if isinstance(shape, GemmShape):
        return shape
    import re

    parts = re.split(r"[xX×,\s]+", shape.strip())
    try:
        M, N, K = (int(p) for p in parts)
        return GemmShape(M=M, N=N, K=K)
    except ValueError:
        raise ServiceError(f"shape {shape!r}: expected MxNxK with three positive integers, e.g. 4096x2048x7168") from None


def _draft_match_only(text: str, exc: Exception):
    """A draft that is not a valid card yet: compare on its ``match`` block alone."""
    from pydantic import ValidationError

    from .cards import CardParseError, MatchSpec, load_yaml, split_front_matter
    from .overlap import Subject

    try:
        fm, _, _, _ = split_front_matter(text, "draft")
        data = load_yaml(fm)
        spec = MatchSpec.model_validate((data or {}).get("match"))
    except (CardParseError, ValidationError, AttributeError, ValueError):
        raise ServiceError(f"the draft is not a card and has no valid match block: {exc}") from None
    cid = data.get("id") if isinstance(data.get("id"), str) else None
    return Subject(id=cid, title=str(data.get("title") or "draft"), match=spec)
