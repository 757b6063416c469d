"""Resources: the card index and each card's files, for clients that read rather than call.

``skill://index``                  JSON list of every card (metadata and the URIs below)
``skill://{card_id}/SKILL.md``     the card (text/markdown)
``skill://{card_id}/{artifact}``   a validation artifact beside it (application/yaml)

Template values are checked twice: the SDK rejects ``..``, absolute paths and NUL bytes
after decoding, and ``card_files`` serves only plain names of files that resolve inside
the card's own folder (see there).
"""
from __future__ import annotations

import json

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.types import Completion, ResourceTemplateReference

from skill_server.cards.card_files import CardFileError, artifact_names, read_card_file
from skill_server.cards.catalog import CARD_FILE
from skill_server.mcp.settings import ServerSettings
from skill_server.service.facade import MAX_PAGE, SkillService

SCHEME = "skill://"


def card_uri(card_id: str, name: str = CARD_FILE) -> str:
    return f"{SCHEME}{card_id}/{name}"


def register(server: MCPServer, service: SkillService, settings: ServerSettings) -> None:
    @server.resource(f"{SCHEME}index", name="skill_index", title="Skill card index", mime_type="application/json",
                     description="Every card: id, title, gens, operators, dtypes, scale formats, validation status "
                     "and date, and the URIs of its SKILL.md and validation artifacts.")
    def skill_index() -> str:
        catalog = service.catalog
        entries, cursor = [], None
        while True:
            page = service.list_skills(cursor=cursor, limit=MAX_PAGE)
            for s in page.skills:
                if s.id in catalog.cards:
                    entry = s.model_dump(mode="json")
                    entry["uri"] = card_uri(s.id)
                    entry["artifacts"] = [card_uri(s.id, n) for n in artifact_names(catalog, s.id)]
                    entries.append(entry)
            cursor = page.next_cursor
            if cursor is None:
                return json.dumps(entries, indent=1)

    @server.resource(f"{SCHEME}{{card_id}}/{CARD_FILE}", name="skill_card", title="Skill card (SKILL.md)",
                     mime_type="text/markdown", description="A card's full SKILL.md: front matter and body.")
    def skill_card(card_id: str) -> str:
        return _read(service, card_id, CARD_FILE, (".md",))

    @server.resource(f"{SCHEME}{{card_id}}/{{artifact}}", name="skill_artifact", title="Validation artifact",
                     mime_type="application/yaml",
                     description="A card's validation artifact (YAML): the measured figures behind it.")
    def skill_artifact(card_id: str, artifact: str) -> str:
        return _read(service, card_id, artifact, (".yaml", ".yml"))

    @server.completion()
    async def complete(ref, argument, context) -> Completion | None:  # noqa: ANN001 - SDK callback shape
        if not isinstance(ref, ResourceTemplateReference) or not ref.uri.startswith(SCHEME):
            return None
        catalog = service.catalog
        if argument.name == "card_id":
            values = [c for c in sorted(catalog.cards) if c.startswith(argument.value)]
        elif argument.name == "artifact":
            card_id = (context.arguments or {}).get("card_id") if context else None
            values = [n for n in artifact_names(catalog, card_id) if n.startswith(argument.value)] \
                if card_id in catalog.cards else []
        else:
            return None
        return Completion(values=values[:100], total=len(values), has_more=len(values) > 100)


def _read(service: SkillService, card_id: str, name: str, suffixes: tuple[str, ...]) -> str:
    try:
        return read_card_file(service.catalog, card_id, name, suffixes).text
    except CardFileError as exc:
        raise ResourceNotFoundError(str(exc)) from None
