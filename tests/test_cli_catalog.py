"""The catalog CLI end to end: match/list/show/lint, JSON shapes, exit codes, bad input."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skill_server.cli.entry import main
REPO = Path(__file__).resolve().parents[1]
CK = "kernel_gemm_xdl_cshuffle_v3_blockscale_b_preshuffle"


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_match_json_has_the_documented_shape(capsys):
    rc, out, _ = run(capsys, "match", "--op", CK, "--gen", "MI355X", "--scale-format", "fp32_block",
                     "--shape", "4096x65536x1536", "--regime", "prefill", "--json")
    assert rc == 0
    data = json.loads(out)
    m = data["matches"][0]
    for key in ("card_id", "score", "shape_class", "recipe", "reasons", "expectations", "validation"):
        assert key in m
    assert m["card_id"] == "flydsl_fp8_blockscale_gemm"
    assert m["shape_class"]["class_id"] == "wide_n_locality"
    assert m["recipe"]["config"]["xcd_swizzle"] == 8
    assert data["not_applicable"][0]["card_id"] == "flydsl_mxfp8_8wave_gemm"


def test_match_moe_segment_kernels_and_stage(capsys):
    rc, out, _ = run(capsys, "match", "--op", "fused_moe_kernel", "--gen", "gfx950", "--stage", "stage2",
                     "--regime", "prefill", "--segment-kernel", "moe_sum_reduce", "--json")
    assert rc == 0 and json.loads(out)["matches"][0]["card_id"] == "flydsl_prefill_moe_stage2_fp8partial"


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["match", "--op", CK, "--gen", "gfx9999"], "unknown GPU generation"),
        (["match", "--op", CK, "--dtype", "fp7"], "unknown dtype"),
        (["match", "--op", CK, "--scale-format", "weird"], "unknown scale format"),
        (["match", "--op", CK, "--shape", "4096x2048"], "expected MxNxK"),
        (["match", "--op", CK, "--shape", "0x1x1"], "M=0 is out of range"),
        (["match", "--op", CK, "--shape", "1x1x" + "9" * 400], "is out of range"),
        (["match", "--op", "k" * 5000], "at most 4096 characters"),
        (["match", "--op", CK, "--target-gen", "gfx9999"], "target generation: unknown GPU generation"),
        (["show", "no_such_card"], "unknown card 'no_such_card'"),
        (["show", "flydsl_fp8_blockscale_gemm", "--section", "nonsense"], "has no section"),
        (["list", "--limit", "0"], "limit must be between"),
        (["list", "--cursor", "abc"], "invalid cursor"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(capsys, argv, needle):
    rc, _, err = run(capsys, *argv)
    assert rc == 2
    assert needle in err and "Traceback" not in err


def test_list_pages(capsys):
    rc, out, _ = run(capsys, "list", "--limit", "2", "--json")
    page = json.loads(out)
    assert rc == 0 and len(page["skills"]) == 2 and page["total"] == 3 and page["next_cursor"] == "2"
    rc, out, _ = run(capsys, "list", "--limit", "2", "--cursor", "2", "--json")
    page2 = json.loads(out)
    assert len(page2["skills"]) == 1 and page2["next_cursor"] is None
    assert {s["id"] for s in page["skills"] + page2["skills"]} == {
        "flydsl_fp8_blockscale_gemm", "flydsl_mxfp8_8wave_gemm", "flydsl_prefill_moe_stage2_fp8partial"}


def test_list_filters(capsys):
    _, out, _ = run(capsys, "list", "--gen", "H200", "--json")
    assert json.loads(out)["total"] == 0
    _, out, _ = run(capsys, "list", "--operator", "grouped_gemm_moe", "--json")
    assert [s["id"] for s in json.loads(out)["skills"]] == ["flydsl_prefill_moe_stage2_fp8partial"]


def test_show_summary_section_and_full(capsys):
    rc, out, _ = run(capsys, "show", "flydsl_fp8_blockscale_gemm", "--shape", "16384x1536x7168", "--json")
    view = json.loads(out)
    assert rc == 0 and view["mode"] == "summary"
    assert view["shape_class"]["class_id"] == "narrow_n_deep_k" and not view["shape_class"]["tuned"]
    assert list(view["summary"])[0] == "When to use" and "Do-no-harm notes" in view["summary"]
    _, out, _ = run(capsys, "show", "flydsl_fp8_blockscale_gemm", "--section", "pitfalls")
    assert "register-pressure wall" in out
    _, out, _ = run(capsys, "show", "flydsl_mxfp8_8wave_gemm", "--full")
    assert out.startswith("---\nid: flydsl_mxfp8_8wave_gemm")


def _broken_catalog(tmp_path: Path) -> Path:
    skills = tmp_path / "skills"
    shutil.copytree(REPO / "skills", skills)
    moe = skills / "flydsl_prefill_moe_stage2_fp8partial" / "SKILL.md"
    moe.write_text(moe.read_text().replace("  gens:\n  - gfx950", "  gens:\n  - gfx950\n  - [broken", 1))
    art = skills / "flydsl_fp8_blockscale_gemm" / "validation_gfx950.yaml"
    art.write_text(art.read_text().replace("speedup: 1.4541", "speedup: -3"))
    return skills


def test_lint_reports_file_line_field_and_fails(capsys, tmp_path):
    skills = _broken_catalog(tmp_path)
    rc, out, _ = run(capsys, "--skills-dir", str(skills), "lint", "--json")
    data = json.loads(out)
    assert rc == 1 and not data["ok"]
    probs = data["problems"]
    yaml_err = next(p for p in probs if "malformed YAML" in p["message"])
    assert yaml_err["file"].endswith("flydsl_prefill_moe_stage2_fp8partial/SKILL.md") and yaml_err["line"]
    art_err = next(p for p in probs if p["file"].endswith("validation_gfx950.yaml") and p["field"])
    assert "measurements" in art_err["field"] and "greater than 0" in art_err["message"]


def test_one_bad_card_does_not_take_the_catalog_down(capsys, tmp_path):
    skills = _broken_catalog(tmp_path)
    rc, out, err = run(capsys, "--skills-dir", str(skills), "list", "--json")
    data = json.loads(out)
    assert rc == 0 and data["total"] == 2 and data["catalog_problems"] >= 1


def test_lint_is_clean_on_the_project_catalog(capsys):
    rc, out, _ = run(capsys, "lint", "--json")
    data = json.loads(out)
    assert rc == 0, data["problems"]


def test_console_script_runs(tmp_path):
    exe = shutil.which("skill-server")
    cmd = [exe] if exe else [sys.executable, "-m", "skill_server.cli.entry"]
    proc = subprocess.run(cmd + ["match", "--op", CK, "--gen", "gfx950", "--scale-format", "ue8m0_1x32"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "MATCH flydsl_mxfp8_8wave_gemm" in proc.stdout
