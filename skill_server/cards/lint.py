"""Catalog-wide checks beyond the schema: each problem names file, line and field."""
from __future__ import annotations

from pathlib import Path

from skill_server.cards.artifacts import parse_artifact
from skill_server.cards.catalog import Catalog
from skill_server.cards.lint_binding import binding_problems, probe_problems
from skill_server.cards.schema import CardProblem, ParsedCard
from skill_server.cards.shapes import select_shape_class
from skill_server.cards.vocabulary import vocabulary
from skill_server.matching.overlap import catalog_overlap_problems

REQUIRED_SECTIONS = ("When to use", "Procedure", "Do-no-harm notes")
TODO_MESSAGE = "TODO placeholder(s)"


def lint_catalog(catalog: Catalog) -> list[CardProblem]:
    """Schema (the catalog's own problems), each card (``lint_card``), its verifier binding
    against its problem and its capability probes (``lint_binding``), and overlap."""

    problems = list(catalog.problems)
    repo_root = catalog.skills_dir.resolve().parent
    for parsed in catalog.cards.values():
        problems += lint_card(parsed, repo_root, catalog)
        problems += binding_problems(parsed, repo_root)
        problems += probe_problems(parsed, repo_root)
    # match spaces: duplicates are errors, overlaps warnings (skill_server/matching/overlap.py)
    problems += catalog_overlap_problems(catalog.cards)
    return problems


def lint_card(parsed: ParsedCard, repo_root: Path, catalog: Catalog | None = None,
              artifact_dir: Path | None = None, kernels_dir: Path | None = None) -> list[CardProblem]:
    """One card's own checks. ``artifact_dir`` / ``kernels_dir``: a draft's folders, where its
    artifact and problem lie until promotion moves them where the card names them."""
    card, file = parsed.card, str(parsed.path)
    out: list[CardProblem] = []

    def err(message: str, *loc, severity: str = "error") -> None:
        out.append(CardProblem(file=file, line=parsed.line_of(*loc) if loc else None,
                               field=".".join(str(p) for p in loc) or None, message=message, severity=severity))

    if parsed.folder.name != card.id:
        err(f"card id {card.id!r} differs from its folder name {parsed.folder.name!r}", "id")

    vocab = vocabulary()
    for i, g in enumerate(card.match.gens):
        if g != "*" and not vocab.is_known_generation(g):
            err(f"unknown generation {g!r}; known: {sorted(vocab.generations)}", "match", "gens", i)
    for i, d in enumerate(card.match.dtypes):
        if not vocab.is_known_dtype(d):
            err(f"unknown dtype {d!r}", "match", "dtypes", i)
    for i, s in enumerate(card.match.scale_formats or []):
        if not vocab.is_known_scale_format(s):
            err(f"unknown scale format {s!r}", "match", "scale_formats", i)

    # shape classes: unique ids, validated shapes inside their own class
    seen: set[str] = set()
    cus = next((vocab.generation_info(g).compute_units for g in card.match.gens if vocab.is_known_generation(g)), 256)
    for i, cls in enumerate(card.shape_classes):
        if cls.id in seen:
            err(f"duplicate shape class id {cls.id!r}", "shape_classes", i, "id")
        seen.add(cls.id)
        for j, v in enumerate(cls.validated_shapes):
            sel = select_shape_class(card.shape_classes, v.M, v.N, v.K, cus)
            if sel is None or sel.class_id != cls.id or sel.selection != "inside":
                got = f"{sel.class_id} ({sel.selection})" if sel else "no class"
                err(f"validated shape {v.M}x{v.N}x{v.K} selects {got}, not its own class {cls.id!r}: "
                    "fix the predicates or move the shape", "shape_classes", i, "validated_shapes", j)

    # validation artifacts
    art = card.validation.artifact
    if art:
        path = (artifact_dir / Path(art).name if artifact_dir is not None else repo_root / art).resolve()
        if artifact_dir is None and not path.is_relative_to(repo_root.resolve()):
            err(f"artifact path {art!r} leaves the project", "validation", "artifact")
        elif not path.is_file():
            err(f"artifact {art!r} does not exist (expected at {path})", "validation", "artifact")
    for yaml_file in sorted(parsed.folder.glob("*.y*ml")):
        artifact, probs = parse_artifact(yaml_file)
        out += probs
        if artifact is not None and artifact.card_id != card.id:
            out.append(CardProblem(file=str(yaml_file), field="card_id",
                                   message=f"artifact names card {artifact.card_id!r}, but sits beside card {card.id!r}"))

    # verifier binding points at a problem that exists
    if card.verifier is not None:
        problem_file = (kernels_dir or repo_root / "kernels" / card.verifier.problem) / "problem.py"
        if not problem_file.is_file():
            err(f"verifier problem {card.verifier.problem!r} not found (expected {problem_file})", "verifier", "problem")

    for name in REQUIRED_SECTIONS:
        if not any(s.lower().startswith(name.lower()) for s in parsed.sections):
            out.append(CardProblem(file=file, line=parsed.body_start_line, field="body",
                                   message=f"missing section '## {name}'", severity="warning"))
    todos = parsed.fm_text.count("TODO") + parsed.body.count("TODO")
    if todos:
        out.append(CardProblem(file=file, line=parsed.fm_line, field=None, severity="warning",
                               message=f"{todos} {TODO_MESSAGE}: a drafted card; a person replaces each before "
                                       "the status moves past experimental"))
    if catalog is not None:
        for i, sup in enumerate(card.supersedes):
            if sup not in catalog.cards:
                err(f"supersedes unknown card {sup!r}", "supersedes", i, severity="warning")
    return out
