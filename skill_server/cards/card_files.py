"""The files of a card that may be served to a client: its SKILL.md and the validation
artifacts beside it, and nothing else.

A requested name is served only when every check holds: the card id is a loaded card,
the name is a plain file name (no separators, no leading dot) with a served suffix, and
the file, with every symlink resolved, lies inside the card's own folder, which lies
inside the skills folder. So ``..``, encoded separators, absolute paths and symlinks
that point out of the folder are all refused, whatever the transport did to the URI.
"""
from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from skill_server.cards.catalog import CARD_FILE, Catalog

MIME_TYPES = {".md": "text/markdown", ".yaml": "application/yaml", ".yml": "application/yaml"}
MAX_BYTES = 1 << 20
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class CardFileError(ValueError):
    """The file cannot be served; the message says why and what exists."""


class CardFile(BaseModel):
    card_id: str
    name: str
    mime_type: str
    text: str


def artifact_names(catalog: Catalog, card_id: str) -> list[str]:
    """Validation artifacts of a card (the YAML files beside its SKILL.md)."""
    folder = catalog.cards[card_id].folder
    real_folder = folder.resolve()
    return sorted(p.name for p in folder.iterdir()
                  if p.suffix in {".yaml", ".yml"} and p.is_file() and p.resolve().parent == real_folder)


def read_card_file(catalog: Catalog, card_id: str, name: str, suffixes: tuple[str, ...] = tuple(MIME_TYPES)) -> CardFile:
    parsed = catalog.cards.get(card_id)
    if parsed is None:
        known = ", ".join(sorted(catalog.cards)) or "none"
        raise CardFileError(f"unknown card {card_id!r}; known cards: {known}")
    served = ", ".join([CARD_FILE, *artifact_names(catalog, card_id)])
    if not _PLAIN_NAME.fullmatch(name) or Path(name).suffix not in suffixes:
        raise CardFileError(f"{name!r} is not a file of card {card_id!r}; its files: {served}")
    root = catalog.skills_dir.resolve()
    folder = parsed.folder.resolve()
    try:
        real = (parsed.folder / name).resolve(strict=True)
    except (OSError, RuntimeError):
        raise CardFileError(f"card {card_id!r} has no file {name!r}; its files: {served}") from None
    if not folder.is_relative_to(root) or real.parent != folder:
        raise CardFileError(f"{card_id}/{name} resolves outside the skills folder; refused")
    if not real.is_file():
        raise CardFileError(f"card {card_id!r} has no file {name!r}; its files: {served}")
    if real.stat().st_size > MAX_BYTES:
        raise CardFileError(f"{card_id}/{name} is larger than {MAX_BYTES} bytes; refused")
    try:
        text = real.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CardFileError(f"cannot read {card_id}/{name}: {exc}") from None
    return CardFile(card_id=card_id, name=name, mime_type=MIME_TYPES[Path(name).suffix], text=text)
