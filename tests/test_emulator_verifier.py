"""The gfx950-emulated verifier platform: the cards' FlyDSL arms (and FlyDSL candidate files)
run through the judge and arm processes on the gfx950 emulator, parity only.

The slow tests are real verifications (judge, zygote, arm processes, FlyDSL compile,
emulated launches); each keeps to the emulated platform's lean plan (one seed plus the
secret one; the wrong variants one seed), so a test costs 2-8 emulated launches."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.emulator_support import require_flydsl_toolchain, require_llvm

BLOCKSCALE, MXFP8 = "flydsl_fp8_blockscale_gemm", "flydsl_mxfp8_8wave_gemm"
CANDIDATE = Path(__file__).parent / "fixtures" / "emulated_candidates" / "blockscale_flydsl.py"
NO_TIMING = "emulated: no timing"


def emulated(**kw):
    from verifiers.options import VerifyOptions

    return VerifyOptions(device="gfx950-emulated", **kw)


@pytest.fixture(scope="module")
def toolchain():
    require_llvm()
    require_flydsl_toolchain()


def assert_parity_only(report):
    """Parity ran; timing, signature and segment did not; the report names the emulated
    platform and never an MI355X / ROCm one."""
    assert report.verdict == "INCONCLUSIVE" and not report.complete, report.summary()
    assert report.speedup is None
    prov = report.provenance
    assert prov.platform == "gfx950-emulated" and "MI355" not in prov.device_name
    assert prov.platform_info().key == "cpu/gfx950-emulated"
    for s in report.shape_reports:
        assert s.stages["parity"].status == "PASS", s.stages["parity"].reason
        assert s.timing is None and s.signature == []
        if not s.hidden:
            assert {s.stages[n].reason for n in ("signature", "segment", "timing")} == {NO_TIMING}
            assert any(f.code == "parity_only" for f in s.flags)
    assert "not an MI355X result" in report.summary()


# ----------------------------------------------------------------------------- fast
def test_the_emulated_platform_is_keyed_apart_from_mi355x():
    from skill_server.ledger.models import normalise_platform
    from skill_server.cards.vocabulary import vocabulary
    from verifiers.provenance import Provenance, emulated_platform

    p = normalise_platform(emulated_platform("gfx950 emulator on CPU (x)"))
    assert (p.key, p.runtime, p.generation) == ("cpu/gfx950-emulated", "cpu", "gfx950-emulated")
    assert not vocabulary().is_known_generation("gfx950-emulated")  # never resolved to gfx950
    prov = Provenance(platform="gfx950-emulated", device_name="gfx950 emulator on CPU (x)", flydsl_version="0.5.0")
    assert prov.platform_info().key == "cpu/gfx950-emulated" and prov.platform_info().libraries == {"flydsl": "0.5.0"}


def test_emulated_problem_view_is_the_lean_plan():
    from verifiers.problem import for_platform, load_problem

    for folder in (BLOCKSCALE, MXFP8, "flydsl_prefill_moe_stage2_fp8partial"):
        base = load_problem(folder)
        p = for_platform(base, "gfx950-emulated")
        assert p.parity.seeds == (0,) and not p.perturbations
        assert p.shapes == base.emulation.shapes and p.hidden_shapes == base.emulation.hidden_shapes
        on_cpu = for_platform(base, "cpu")  # the problem itself, with its CPU-sized hidden shapes if it has them
        assert on_cpu.shapes == base.shapes and on_cpu.parity == base.parity
        assert on_cpu.hidden_shapes == (tuple(base.cpu_hidden_shapes) or base.hidden_shapes)
        assert "cpu" in base.arm(base.emulation.baseline).platforms


def test_each_cards_rocm_reference_arm_is_emulated_at_every_emulation_shape():
    from skill_server.cards.catalog import Catalog
    from verifiers.gfx950.emulator.verifier_arms import arm_at, arms_for
    from verifiers.problem import load_problem

    for parsed in Catalog.load(Path(__file__).parent.parent / "skills").cards.values():
        vb = parsed.card.verifier
        problem = load_problem(vb.problem)
        arms = arms_for(vb.problem, vb.reference["rocm"], problem.arms)
        for dims in (*problem.emulation.shapes, *problem.emulation.hidden_shapes):
            assert arm_at(arms, dims) is not None, (vb.problem, dims)


def test_an_emulated_arms_own_name_wins_and_a_cpu_arm_runs_as_is():
    from verifiers.gfx950.emulator.verifier_arms import arms_for, builder_kind
    from verifiers.problem import load_problem

    mx = load_problem(MXFP8)
    assert [a.name for a in arms_for(MXFP8, "scales_pinned", mx.arms)] == ["scales_pinned"]  # the wrong variant
    assert builder_kind(MXFP8, "flydsl_4wave", mx.arms) == "emulated"
    assert builder_kind(MXFP8, "torch_dequant", mx.arms) == "arm"
    bs = load_problem(BLOCKSCALE)
    assert [a.name for a in arms_for(BLOCKSCALE, "flydsl_4wave", bs.arms)][:2] == ["xcd8_smallest", "xcd8_small"]
    with pytest.raises(KeyError, match="declares no emulated arm for 'ck_blockscale'"):
        builder_kind(BLOCKSCALE, "ck_blockscale", bs.arms)  # ROCm only, no emulation


@pytest.mark.parametrize(("candidate", "shapes", "message"), [
    ("arm:flydsl_4wave", ["4096x2048x7168"], "shape 4096x2048x7168: not emulation-sized"),
    ("arm:ck_blockscale", None, "declares no emulated arm for 'ck_blockscale'"),
    ("arm:flydsl_4wave_xcd0", ["64x256x128"], "arm 'flydsl_4wave_xcd0' has no emulated arm at"),
])
def test_bad_input_on_the_emulated_platform_is_refused_before_any_process(toolchain, candidate, shapes, message):
    from verifiers.api import verify

    with pytest.raises(ValueError, match=message):
        verify(BLOCKSCALE, candidate, shapes=shapes, options=emulated())


def test_a_problem_without_emulation_and_a_box_without_a_linker_are_refused(monkeypatch, tmp_path):
    from verifiers.api import verify

    problem = Path(__file__).parent / "fixtures" / "cpu_matmul_problem.py"
    with pytest.raises(ValueError, match="declares no emulation"):
        verify(str(problem), "arm:torch_mm", options=emulated())
    monkeypatch.setenv("SKILL_SERVER_LD_LLD", str(tmp_path / "no-ld.lld"))
    with pytest.raises(ValueError, match=r"this box cannot compile and emulate FlyDSL kernels: SKILL_SERVER_LD_LLD="):
        verify(BLOCKSCALE, "arm:flydsl_4wave", options=emulated())


def test_the_cli_refuses_a_shape_too_large_to_emulate_with_exit_2(toolchain, tmp_path):
    import subprocess

    from tests.mcp_support import cli_command

    proc = subprocess.run([*cli_command(), "verify", BLOCKSCALE, "--candidate", "arm:flydsl_4wave", "--device",
                           "gfx950-emulated", "--shape", "4096x2048x7168", "--no-record", "--quiet"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "not emulation-sized" in proc.stderr, proc.stderr


# ----------------------------------------------------------------------------- slow
@pytest.mark.slow
@pytest.mark.flydsl
def test_the_blockscale_flydsl_arm_passes_parity_on_the_emulator_through_the_verifier(toolchain):
    from verifiers.api import verify

    report = verify(BLOCKSCALE, "arm:flydsl_4wave", options=emulated())
    assert_parity_only(report)
    assert report.baseline == "torch_dequant" and report.shapes == ["64x256x128"]
    visible, hidden = report.shape_reports
    assert hidden.hidden and len(visible.parity.cases) == 2 and len(hidden.parity.cases) == 2  # seed 0 + the secret one
    assert visible.secret_seed is not None and [c.secret for c in visible.parity.cases].count(True) == 1


@pytest.mark.slow
@pytest.mark.flydsl
def test_the_blockscale_8wave_cluster_core_passes_parity_through_the_verifier_with_tails(toolchain):
    """The card's narrow-N / deep-K row (8-wave ping-pong, cluster promotes) against the card's
    oracle: 64 rows (half a 128-row CTA), 200 rows (128 + a 72-row tail) over two N blocks
    and three K iterations, 192 rows over eight K iterations (K=1024: its v_pk_mul_f32 promote
    reads an SGPR pair, tests/test_emulator_packed_sgpr.py), and the hidden 128x256x256 (one
    loop trip + the peeled step)."""
    from verifiers.api import verify

    shapes = ["64x256x128", "200x512x384", "192x512x1024"]
    report = verify(BLOCKSCALE, "arm:flydsl_8wave_cluster", shapes=shapes, options=emulated())
    assert_parity_only(report)
    assert report.shapes == shapes and report.baseline == "torch_dequant"
    assert len(report.shape_reports) == 4 and report.shape_reports[-1].hidden
    assert all(len(s.parity.cases) == 2 for s in report.shape_reports)  # seed 0 + the secret one


@pytest.mark.slow
@pytest.mark.flydsl
def test_the_fused_moe_stage2_gemm_passes_parity_through_the_verifier(toolchain):
    """The card's FlyDSL stage 2 (fused GEMM storing fp8 partials + infp8 reduce) against the
    oracle under the relaxed rules: a ragged 64-column tile (N=96), a K tail (K=80) with
    top_k=4, blocks past num_padded."""
    from verifiers.api import verify

    moe = "flydsl_prefill_moe_stage2_fp8partial"
    report = verify(moe, "arm:flydsl_fp8", shapes=["24x96x64x8x2", "20x192x80x8x4"], options=emulated())
    assert_parity_only(report)
    assert report.baseline == "triton_bf16" and len(report.shape_reports) == 2
    assert all(len(s.parity.cases) == 2 for s in report.shape_reports)


@pytest.mark.slow
@pytest.mark.flydsl
def test_the_blockscale_recipe_passes_parity_through_the_verifier_with_a_tail(toolchain):
    """The card's reference arm (config_for -> the 4-wave row at these K) at its emulation shape
    and at 100x256x384 (a 36-row M tail, a ping-pong pair + a K tail), plus the hidden shape."""
    from verifiers.api import verify

    report = verify(BLOCKSCALE, "arm:flydsl_recipe", shapes=["64x256x128", "100x256x384"], options=emulated())
    assert_parity_only(report)
    assert report.shapes == ["64x256x128", "100x256x384"] and len(report.shape_reports) == 3


@pytest.mark.slow
@pytest.mark.flydsl
def test_the_mxfp8_flydsl_arm_passes_parity_on_the_emulator_through_the_verifier(toolchain):
    from verifiers.api import verify

    report = verify(MXFP8, "arm:flydsl_4wave", options=emulated())
    assert_parity_only(report)
    assert report.shapes == ["128x128x256"]
    assert [s.hidden for s in report.shape_reports] == [False, True]  # the hidden one: 320x256x384


@pytest.mark.slow
@pytest.mark.flydsl
def test_the_mxfp8_8wave_recipe_with_permlane_stores_passes_parity_through_the_verifier(toolchain):
    """The card's reference arm: the 8-wave pipeline, block_n by pick_block_n (128 at these
    launch-starved grids), swap-ab stores widened by v_permlane16_swap, at 128 rows (half a
    256-row block) and the hidden 320 rows (256 + a 64-row tail, 2 N blocks, 3 K steps)."""
    from verifiers.api import verify

    report = verify(MXFP8, "arm:flydsl_8wave", options=emulated())
    assert_parity_only(report)
    assert report.shapes == ["128x128x256"] and [s.hidden for s in report.shape_reports] == [False, True]


@pytest.mark.slow
@pytest.mark.flydsl
def test_the_mxfp8_wide_grid_tile_with_64_byte_row_stores_passes_parity_through_the_verifier(toolchain):
    """The wide-grid row's tile (block_n=256: v_permlane16_swap then the ds_bpermute transpose,
    64-byte row stores) at one full 256x256 block and at 320x512x384 (an M tail, 2 N blocks)."""
    from verifiers.api import verify

    shapes = ["256x256x256", "320x512x384"]
    report = verify(MXFP8, "arm:flydsl_8wave_bn256", shapes=shapes, options=emulated(hidden_shapes=False))
    assert_parity_only(report)
    assert report.shapes == shapes and all(len(s.parity.cases) == 2 for s in report.shape_reports)


@pytest.mark.slow
@pytest.mark.flydsl
def test_a_wrong_emulated_variant_fails_parity_through_the_verifier(toolchain):
    from verifiers.api import verify

    report = verify(MXFP8, "arm:scales_omitted", options=emulated(hidden_shapes=False, secret_seed=False))
    assert report.verdict == "FAIL"
    (s,) = report.shape_reports
    assert s.stages["parity"].status == "FAIL" and s.stages["load"].status == "PASS"
    assert s.stages["integrity"].status == "PASS"
    assert report.provenance.platform == "gfx950-emulated"


@pytest.mark.slow
@pytest.mark.flydsl
def test_a_flydsl_candidate_file_compiles_and_runs_on_the_emulator(toolchain):
    """The candidate contract on CPU: the rewrite compiles its gfx950 kernel in its own arm
    process (compile_for_emulator) and launches it on the emulator; the right one passes,
    the card's trap (B scale as an E8M0 MFMA exponent) fails."""
    from verifiers.api import verify

    lean = emulated(hidden_shapes=False, secret_seed=False)
    good = verify(BLOCKSCALE, f"{CANDIDATE}:build", options=lean)
    assert_parity_only(good)
    assert "kernel_blockscale_gemm" in good.shape_reports[0].log_tail  # FlyDSL compiled it in the candidate's arm
    wrong = verify(BLOCKSCALE, f"{CANDIDATE}:build_wrong", options=lean)
    assert wrong.verdict == "FAIL" and wrong.shape_reports[0].stages["parity"].status == "FAIL"
    assert "outside rtol" in wrong.shape_reports[0].stages["parity"].reason
