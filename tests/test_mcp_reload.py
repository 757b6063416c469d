"""Cards load once, reload when their files change or on reload_skills, and no request
is dropped while they change."""
from __future__ import annotations

import os
import threading

import anyio
from mcp_support import BLOCKSCALE, BLOCKSCALE_OP, build, copy_skills, text, with_client

MXFP8 = "flydsl_mxfp8_8wave_gemm"


def retitle(skills, card_id: str, title: str) -> None:
    """Rewrite a card's title atomically (write a temporary file, then rename), as editors and git do."""
    path = skills / card_id / "SKILL.md"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("title:"))
    end = start + 1
    while end < len(lines) and lines[end].startswith("  "):  # folded continuation lines
        end += 1
    lines[start:end] = [f"title: {title}\n"]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    os.replace(tmp, path)


def titles(server) -> dict[str, str]:
    result = with_client(server, lambda c: c.call_tool("list_skills", {}))
    return {s["id"]: s["title"] for s in result.structured_content["skills"]}


def test_changed_files_are_picked_up_without_a_reload_call(tmp_path):
    skills = copy_skills(tmp_path / "skills")
    server = build(skills, check_interval=0.0)
    assert titles(server)[BLOCKSCALE].startswith("Rewrite CK fp8")
    retitle(skills, BLOCKSCALE, "Edited title one")
    assert titles(server)[BLOCKSCALE] == "Edited title one"


def test_reload_skills_applies_changes_at_once(tmp_path):
    skills = copy_skills(tmp_path / "skills")
    server = build(skills, check_interval=3600.0)  # the mtime check will not run during this test
    retitle(skills, BLOCKSCALE, "Edited title two")
    assert titles(server)[BLOCKSCALE].startswith("Rewrite CK fp8")  # loaded once, not per request
    result = with_client(server, lambda c: c.call_tool("reload_skills", {}))
    assert result.structured_content == {"cards": 3}
    assert titles(server)[BLOCKSCALE] == "Edited title two"


def test_a_broken_card_is_left_out_and_reported_while_the_rest_keep_serving(tmp_path):
    skills = copy_skills(tmp_path / "skills")
    server = build(skills, check_interval=0.0)
    path = skills / MXFP8 / "SKILL.md"
    path.write_text(path.read_text(encoding="utf-8").replace("gens:", "genz:", 1), encoding="utf-8")

    async def run(c):
        return await c.call_tool("reload_skills", {}), await c.call_tool("match_skill", {"hotspot": {"op_name": BLOCKSCALE_OP}})

    reloaded, matched = with_client(server, run)
    assert reloaded.structured_content["cards"] == 2
    assert any("genz" in p or "gens" in p for p in reloaded.structured_content["problems"])
    assert not matched.is_error


def test_concurrent_requests_while_cards_change_are_all_answered(tmp_path):
    skills = copy_skills(tmp_path / "skills")
    server = build(skills, check_interval=0.0)
    original = titles(server)[BLOCKSCALE]
    stop = threading.Event()
    written: list[str] = []

    def writer() -> None:
        i = 0
        while not stop.is_set():
            title = f"Concurrent edit {i}"
            retitle(skills, BLOCKSCALE, title)
            written.append(title)
            i += 1

    async def run(c):
        results = []

        async def one(k: int) -> None:
            if k % 5 == 4:  # runs on a worker thread, beside the event-loop tools
                results.append(("reload", await c.call_tool("reload_skills", {})))
            elif k % 3 == 0:
                results.append(("list", await c.call_tool("list_skills", {})))
            elif k % 3 == 1:
                results.append(("recipe", await c.call_tool("get_recipe", {"card_id": BLOCKSCALE})))
            else:
                results.append(("match", await c.call_tool("match_skill", {"hotspot": {"op_name": BLOCKSCALE_OP}})))

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            for _ in range(4):
                async with anyio.create_task_group() as tg:
                    for k in range(15):
                        tg.start_soon(one, k)
        finally:
            stop.set()
            thread.join()
        return results

    results = with_client(server, run)
    assert len(results) == 60 and len(written) > 1
    for kind, result in results:
        assert not result.is_error, (kind, text(result))
    seen = {r.structured_content["title"] for kind, r in results if kind == "recipe"}
    assert seen <= {original, *written}  # each answer came from one whole snapshot
    assert titles(server)[BLOCKSCALE] == written[-1]  # after the writes stop, the last one is served
