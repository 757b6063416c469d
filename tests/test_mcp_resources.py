"""Resources: the index, cards and artifacts with their MIME types; no way out of the skills folder."""
from __future__ import annotations

import json
import os

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import ResourceTemplateReference
from mcp_support import BLOCKSCALE, SKILLS, build, copy_skills, with_client


@pytest.fixture(scope="module")
def server():
    return build()


def read(server, uri):
    """The first content of ``uri``; a protocol error is raised outside the client's task group."""

    async def run(c):
        try:
            return (await c.read_resource(uri)).contents[0]
        except MCPError as exc:
            return exc

    result = with_client(server, run)
    if isinstance(result, MCPError):
        raise result
    return result


def test_index_lists_every_card_with_its_uris(server):
    listed = with_client(server, lambda c: c.list_resources()).resources
    assert [(str(r.uri), r.mime_type) for r in listed] == [("skill://index", "application/json")]
    content = read(server, "skill://index")
    assert content.mime_type == "application/json"
    entries = json.loads(content.text)
    assert isinstance(entries, list) and len(entries) == 3
    blockscale = next(e for e in entries if e["id"] == BLOCKSCALE)
    assert blockscale["uri"] == f"skill://{BLOCKSCALE}/SKILL.md"
    assert blockscale["artifacts"] == [f"skill://{BLOCKSCALE}/validation_gfx950.yaml"]
    assert blockscale["validation_status"] == "validated"


def test_templates_and_mime_types(server):
    templates = with_client(server, lambda c: c.list_resource_templates()).resource_templates
    assert {(t.uri_template, t.mime_type) for t in templates} == {
        ("skill://{card_id}/SKILL.md", "text/markdown"), ("skill://{card_id}/{artifact}", "application/yaml"),
        ("report://{report_id}", "application/json")}
    card = read(server, f"skill://{BLOCKSCALE}/SKILL.md")
    assert card.mime_type == "text/markdown"
    assert card.text == (SKILLS / BLOCKSCALE / "SKILL.md").read_text(encoding="utf-8")
    artifact = read(server, f"skill://{BLOCKSCALE}/validation_gfx950.yaml")
    assert artifact.mime_type == "application/yaml"
    assert artifact.text == (SKILLS / BLOCKSCALE / "validation_gfx950.yaml").read_text(encoding="utf-8")


def test_every_index_uri_can_be_read(server):
    entries = json.loads(read(server, "skill://index").text)
    for entry in entries:
        for uri in [entry["uri"], *entry["artifacts"]]:
            assert read(server, uri).text


@pytest.fixture(scope="module")
def escape_server(tmp_path_factory):
    """A skills folder with a symlinked artifact and a symlinked card folder pointing out of it."""
    root = tmp_path_factory.mktemp("escape")
    skills = copy_skills(root / "skills")
    secret = root / "secret.yaml"
    secret.write_text("secret: do-not-serve\n")
    (skills / BLOCKSCALE / "leak.yaml").symlink_to(secret)
    outside = root / "outside_card"
    outside.mkdir()
    src = (SKILLS / "flydsl_mxfp8_8wave_gemm" / "SKILL.md").read_text(encoding="utf-8")
    (outside / "SKILL.md").write_text(src.replace("id: flydsl_mxfp8_8wave_gemm", "id: linked_out_card", 1))
    os.symlink(outside, skills / "linked_out_card")
    return build(skills)


@pytest.mark.parametrize("uri", [
    f"skill://{BLOCKSCALE}/..%2F..%2Fpyproject.toml",
    f"skill://{BLOCKSCALE}/%2E%2E%2F%2E%2E%2Fpyproject.yaml",
    f"skill://{BLOCKSCALE}/../../pyproject.yaml",
    f"skill://{BLOCKSCALE}/%2Fetc%2Fpasswd",
    f"skill://{BLOCKSCALE}/%2Fetc%2Fhosts.yaml",
    "skill://..%2F..%2Fetc/SKILL.md",
    "skill://%2E%2E/SKILL.md",
    "skill://%2Fetc/passwd.yaml",
    f"skill://{BLOCKSCALE}/%252E%252E%252Fx.yaml",
    f"skill://{BLOCKSCALE}/.hidden.yaml",
    f"skill://{BLOCKSCALE}/SKILL.md%00.yaml",
    f"skill://{BLOCKSCALE}/leak.yaml",
    "skill://linked_out_card/SKILL.md",
    "skill://no_such_card/SKILL.md",
])
def test_template_values_cannot_escape_the_skills_folder(escape_server, uri):
    with pytest.raises(MCPError) as err:
        read(escape_server, uri)
    assert "do-not-serve" not in str(err.value)


def test_symlink_out_is_refused_with_a_reason_and_not_listed(escape_server):
    with pytest.raises(MCPError, match="outside the skills folder"):
        read(escape_server, f"skill://{BLOCKSCALE}/leak.yaml")
    entries = json.loads(read(escape_server, "skill://index").text)
    blockscale = next(e for e in entries if e["id"] == BLOCKSCALE)
    assert all("leak" not in uri for uri in blockscale["artifacts"])


def test_a_card_folder_symlinked_from_outside_is_neither_listed_nor_matched_nor_served(escape_server):
    async def run(c):
        listed = await c.call_tool("list_skills", {"limit": 200})
        matched = await c.call_tool("match_skill", {"hotspot": {"op_name": "gemm_a8w8_mxfp8_kernel", "gen": "gfx950"}})
        recipe = await c.call_tool("get_recipe", {"card_id": "linked_out_card"})
        return listed, matched, recipe

    listed, matched, recipe = with_client(escape_server, run)
    assert "linked_out_card" not in {s["id"] for s in listed.structured_content["skills"]}
    considered = {e["card_id"] for key in ("matches", "abstained", "not_applicable")
                  for e in matched.structured_content.get(key, [])}
    assert "flydsl_mxfp8_8wave_gemm" in considered and "linked_out_card" not in considered
    assert recipe.is_error and "unknown card 'linked_out_card'" in recipe.content[0].text
    entries = json.loads(read(escape_server, "skill://index").text)
    assert "linked_out_card" not in {e["id"] for e in entries}


def test_unknown_artifact_error_lists_the_cards_files(server):
    with pytest.raises(MCPError, match="validation_gfx950.yaml"):
        read(server, f"skill://{BLOCKSCALE}/nope.yaml")


def test_completion_offers_card_ids_and_artifacts(server):
    ref = ResourceTemplateReference(type="ref/resource", uri="skill://{card_id}/{artifact}")

    async def run(c):
        ids = await c.complete(ref, {"name": "card_id", "value": "flydsl_fp8"})
        arts = await c.complete(ref, {"name": "artifact", "value": "val"}, context_arguments={"card_id": BLOCKSCALE})
        return ids, arts

    ids, arts = with_client(server, run)
    assert ids.completion.values == [BLOCKSCALE]
    assert arts.completion.values == ["validation_gfx950.yaml"]
