"""Static gfx950 gates: ISA / IR parsing on small snippets (no FlyDSL), the gate logic on
synthetic artifacts, and (marked ``flydsl``) the block-scale card's real compile targets."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from verifiers.gfx950 import GateSpec, check_kernel, isa, run_gates
from verifiers.gfx950 import compile as gcompile
from verifiers.gfx950 import env as genv
from verifiers.gfx950.compile import CompileArtifacts
from verifiers.gfx950.gates import occupancy
from verifiers.gfx950.isa import KernelArtifacts
from verifiers.gfx950.report import EXIT_SKIPPED, check_kernel_command, render_text
from verifiers.gfx950.targets import NoTargetsError, load_targets

FOLDER = "flydsl_fp8_blockscale_gemm"

# --------------------------------------------------------------------------- snippets

ISA = textwrap.dedent(
    """\
    \t.amdgcn_target "amdgcn-amd-amdhsa-unknown-gfx950"
    \t.text
    \t.globl\tk0
    k0:
    \ts_load_dwordx2 s[6:7], s[0:1], 0x0
    \tbuffer_load_dwordx4 v1, s[24:27], 0 offen lds
    \tv_mfma_f32_16x16x128_f8f6f4 v[10:13], v[20:27], v[30:37], 0 ; partial
    \tv_mfma_f32_16x16x128_f8f6f4 v[14:17], v[20:27], v[40:47], 0
    \tv_pk_mul_f32 v[10:11], v[10:11], s[8:9]
    \tv_pk_fma_f32 v[50:51], v[10:11], v[60:61], v[50:51]
    \tv_pk_fma_f32 v[52:53], v[12:13], v[62:63], v[52:53]
    \tv_fma_f32 v54, v14, v64, v54
    \tv_fma_f32 v55, v15, v64, v55
    \tv_fma_f32 v56, v16, v64, v56
    \tv_fma_f32 v57, v17, v64, v57
    \tscratch_store_dword off, v2, off offset:4
    \tv_cvt_pk_bf16_f32 v1, v50, v51
    \ts_endpgm
    .Lfunc_end0:
    \t.amdhsa_kernel k0
    \t\t.amdhsa_group_segment_fixed_size 16384
    \t\t.amdhsa_private_segment_fixed_size 8
    \t\t.amdhsa_next_free_vgpr 226
    \t\t.amdhsa_next_free_sgpr 40
    \t\t.amdhsa_accum_offset 228
    \t.end_amdhsa_kernel
    \t.set .Lk0.num_vgpr, 226
    \t.set .Lk0.num_agpr, 0
    \t.amdgpu_metadata
    ---
    amdhsa.kernels:
      - .agpr_count:     0
        .max_flat_workgroup_size: 256
        .name:           k0
        .reqd_workgroup_size:
          - 256
          - 1
          - 1
        .sgpr_spill_count: 0
        .vgpr_spill_count: 3
        .wavefront_size: 64
    ...
    \t.end_amdgpu_metadata
    """
)

SCALE = "@llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4.v8i32.v8i32"


def mfma_call(res: str, acc: str, sa: str = "i32 0", sb: str = "i32 0", opsel: str = "i32 0") -> str:
    return (
        f"  {res} = call <4 x float> {SCALE}(<8 x i32> %a, <8 x i32> %b, <4 x float> {acc}, "
        f"i32 0, i32 0, {opsel}, {sa}, {opsel}, {sb})"
    )


# per-128-K-block promote: each MFMA starts from zero, result * scale, fma into acc
IR_PROMOTE = "\n".join(
    [
        "define amdgpu_kernel void @k0(ptr %p) {",
        mfma_call("%m0", "zeroinitializer"),
        "  %s0 = shufflevector <4 x float> %m0, <4 x float> %m0, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 0, i32 0, i32 0, i32 0>",
        "  %t0 = fmul <8 x float> %s0, %sb",
        "  %acc1 = call <8 x float> @llvm.fma.v8f32(<8 x float> %t0, <8 x float> %sa, <8 x float> zeroinitializer)",
        mfma_call("%m1", "zeroinitializer"),
        "  %e1 = extractelement <4 x float> %m1, i32 0",
        "  %f1 = call float @llvm.fma.f32(float %e1, float %x, float %y)",
        "  ret void",
        "}",
    ]
)

# plain GEMM: the accumulator is carried through a loop phi and scaled once in the epilogue
IR_EPILOGUE_ONLY = "\n".join(
    [
        "define amdgpu_kernel void @k0(ptr %p) {",
        "loop:",
        "  %acc = phi <4 x float> [ zeroinitializer, %entry ], [ %m1, %loop ]",
        mfma_call("%m1", "%acc"),
        "  br label %loop",
        "exit:",
        "  %o = fmul <4 x float> %m1, %scale",
        "  ret void",
        "}",
    ]
)

# two MFMAs accumulate into each other before the promote (e.g. two K=64 steps per block)
IR_CHAIN2 = "\n".join(
    [
        "define amdgpu_kernel void @k0(ptr %p) {",
        mfma_call("%m0", "zeroinitializer"),
        mfma_call("%m1", "%m0"),
        "  %t = fmul <4 x float> %m1, %s",
        "  ret void",
        "}",
    ]
)


def artifacts(isa_text: str = ISA, ir: str = IR_PROMOTE, kernel: str = "k0") -> CompileArtifacts:
    return CompileArtifacts(
        folder="demo",
        target="t",
        status="ok",
        kernels=[KernelArtifacts(kernel=kernel, isa=isa_text, llvm_ir=ir, resources=isa.parse_resources(isa_text))],
        compile_seconds=1.0,
    )


# --------------------------------------------------------------------------- isa.py


def test_parse_resources_reads_directives_sets_and_metadata():
    r = isa.parse_resources(ISA)
    assert (r.kernel, r.vgpr, r.agpr, r.accum_offset, r.sgpr) == ("k0", 226, 0, 228, 40)
    assert (r.scratch_bytes, r.lds_bytes, r.vgpr_spill, r.workgroup_size) == (8, 16384, 3, 256)


def test_parse_resources_rejects_text_without_a_kernel_descriptor():
    with pytest.raises(ValueError, match="amdhsa_kernel"):
        isa.parse_resources("v_nop\n")


def test_instruction_histogram_mfma_kinds_and_scratch():
    body = isa.kernel_body(ISA, "k0")
    h = isa.histogram(body)
    assert h["v_mfma_f32_16x16x128_f8f6f4"] == 2 and h["v_pk_fma_f32"] == 2
    assert "k0:" not in h and ".amdhsa_kernel" not in h  # labels / directives are not instructions
    assert isa.mfma_kinds(body) == {"v_mfma_f32_16x16x128_f8f6f4": 2}
    assert [s.split(": ", 1)[1] for s in isa.scratch_instructions(body)] == ["scratch_store_dword off, v2, off offset:4"]
    assert isa.isa_fma_values(body) == 2 * 2 + 4


@pytest.mark.parametrize(
    ("sa", "sb", "opsel", "kinds"),
    [
        ("i32 0", "i32 0", "i32 0", ("zero", "zero")),
        ("i32 2139062143", "i32 2139062143", "i32 0", ("pinned", "pinned")),
        ("i32 127", "i32 127", "i32 0", ("pinned", "pinned")),  # byte 0 holds 0x7F
        ("i32 127", "i32 127", "i32 1", ("constant", "constant")),  # op_sel picks byte 1 = 0
        ("i32 2139062143", "i32 %sbe", "i32 0", ("pinned", "real")),
        ("i32 128", "i32 2139062143", "i32 0", ("constant", "pinned")),  # E8M0 2.0
    ],
)
def test_scaled_mfma_operands_are_classified(sa, sb, opsel, kinds):
    calls = isa.scaled_mfma_calls(mfma_call("%r", "zeroinitializer", sa, sb, opsel)).calls
    assert len(calls) == 1
    assert (calls[0].scale_a_kind, calls[0].scale_b_kind) == kinds


def test_promote_per_block_is_recognised():
    p = isa.promote_summary(IR_PROMOTE)
    assert (p.fp8_mfma, p.chain_starts, p.promoted_chains, p.max_chain) == (2, 2, 2, 1)
    assert p.unpromoted == []


def test_epilogue_only_scaling_is_an_unbounded_chain():
    p = isa.promote_summary(IR_EPILOGUE_ONLY)
    assert p.max_chain >= 10**9


def test_chained_mfmas_before_the_promote_are_counted():
    p = isa.promote_summary(IR_CHAIN2)
    assert (p.max_chain, p.promoted_chains) == (2, 1)


def test_ir_function_extracts_one_kernel():
    ir = "define void @a() {\n ret void\n}\ndefine amdgpu_kernel void @k0(ptr %p) {\n ret void\n}\n"
    assert isa.ir_function(ir, "k0").startswith("define amdgpu_kernel void @k0")
    assert isa.ir_function(ir, "zz") == ""


# --------------------------------------------------------------------------- gates.py

STRICT = GateSpec(
    required=(r"^v_mfma_f32_16x16x128_f8f6f4\b", r"^v_cvt_pk_bf16_f32\b"),
    forbidden=(r"^v_mfma_f32_16x16x32_fp8",),
    scaled_mfma="pinned",
    require_fp32_promote=True,
    max_vgpr=256,
    max_lds_bytes=32768,
    min_waves_per_simd=2,
)


def test_occupancy_follows_the_gfx950_formula():
    r = isa.parse_resources(ISA)
    occ = occupancy(r)
    assert occ.unified_vgprs == 228 and occ.by_registers == 2  # 512 // 232
    assert occ.by_lds == (160 * 1024 // 16384) * 4 / 4 and occ.waves_per_simd == 2
    with_agpr = r.model_copy(update={"agpr": 128, "accum_offset": 128})
    assert occupancy(with_agpr).by_registers == 2  # 512 // 256
    assert occupancy(r.model_copy(update={"accum_offset": 100, "next_free_vgpr": 97})).by_registers == 4  # 512 // 104
    assert occupancy(r.model_copy(update={"accum_offset": 96, "next_free_vgpr": 96})).by_registers == 5


def test_gates_report_evidence_for_each_failure():
    report = run_gates(artifacts(), STRICT)
    assert report.status == "FAIL"
    assert report.failed == ["scratch"]  # the snippet spills; everything else holds
    scratch = report.gate("scratch")
    assert "8 B" in scratch.detail and any("scratch_store_dword" in e for e in scratch.evidence)
    assert report.gate("fp32_promote").status == "PASS"
    assert report.gate("occupancy").status == "PASS"
    assert report.occupancy[0].waves_per_simd == 2


def test_forbidden_and_missing_instructions_fail():
    spec = GateSpec(required=(r"^v_mfma_scale_",), forbidden=(r"^v_pk_fma_f32",), max_scratch_bytes=64)
    report = run_gates(artifacts(), spec)
    assert set(report.failed) == {"required", "forbidden"}
    assert any("v_pk_fma_f32" in e for e in report.gate("forbidden").evidence)


def test_real_scales_fail_the_pinned_gate_and_pass_the_real_gate():
    real_isa = ISA.replace(
        "v_mfma_f32_16x16x128_f8f6f4 v[14:17], v[20:27], v[40:47], 0",
        "v_mfma_scale_f32_16x16x128_f8f6f4 v[14:17], v[20:27], v[40:47], 0, v1, v2 op_sel_hi:[0,0,0]",
    )
    real_ir = IR_PROMOTE.replace(mfma_call("%m1", "zeroinitializer"), mfma_call("%m1", "zeroinitializer", "i32 %sa", "i32 %sb"))
    spec = GateSpec(scaled_mfma="pinned", max_scratch_bytes=64)
    bad = run_gates(artifacts(real_isa, real_ir), spec)
    assert bad.failed == ["scaled_mfma"]
    assert "real" in bad.gate("scaled_mfma").evidence[0]
    assert run_gates(artifacts(real_isa, real_ir), GateSpec(scaled_mfma="real", max_scratch_bytes=64)).status == "PASS"
    assert run_gates(artifacts(real_isa, real_ir), GateSpec(scaled_mfma="forbidden", max_scratch_bytes=64)).failed == [
        "scaled_mfma"
    ]


def test_epilogue_only_scaling_fails_the_promote_gate():
    report = run_gates(artifacts(ir=IR_EPILOGUE_ONLY), GateSpec(require_fp32_promote=True, max_scratch_bytes=64))
    assert report.failed == ["fp32_promote"]
    assert "unbounded" in report.gate("fp32_promote").detail


def test_promotes_between_mfmas_of_one_k_iteration_fail_the_cluster_gate():
    # the snippet: two MFMAs, then every promote: a cluster schedule for 2 MFMAs per iteration
    spec = GateSpec(promote_cluster=2, max_scratch_bytes=64)
    assert run_gates(artifacts(), spec).status == "PASS"
    interleaved = ISA.replace(
        "\tv_mfma_f32_16x16x128_f8f6f4 v[14:17], v[20:27], v[40:47], 0\n",
        "\tv_pk_fma_f32 v[52:53], v[12:13], v[62:63], v[52:53]\n\tv_mfma_f32_16x16x128_f8f6f4 v[14:17], v[20:27], v[40:47], 0\n",
    )
    bad = run_gates(artifacts(interleaved), spec)
    assert bad.failed == ["promote_cluster"]
    assert "iteration 0" in bad.gate("promote_cluster").evidence[0] and "v_pk_fma_f32" in bad.gate("promote_cluster").evidence[0]
    # the grouping only means something when the MFMA count is a whole number of iterations
    odd = run_gates(artifacts(), GateSpec(promote_cluster=3, max_scratch_bytes=64))
    assert odd.failed == ["promote_cluster"] and "not a whole number" in odd.gate("promote_cluster").detail


def test_skipped_and_failed_compiles_never_pass():
    skipped = CompileArtifacts(folder="demo", target="t", status="skipped", reason="no ld.lld")
    r = run_gates(skipped, STRICT)
    assert r.status == "SKIPPED" and not r.ok and r.reason == "no ld.lld"
    failed = run_gates(CompileArtifacts(folder="demo", target="t", status="error", reason="boom"), STRICT)
    assert failed.status == "FAIL" and failed.failed == ["compiled"]


def test_missing_toolchain_gives_skipped_reports(monkeypatch, tmp_path):
    monkeypatch.setattr(genv, "toolchain_problem", lambda: "no ld.lld for gfx950 found; install it with `apt-get install -y lld-22`")
    reports = check_kernel(FOLDER, use_cache=False)
    assert reports and all(r.status == "SKIPPED" for r in reports)
    assert all("lld-22" in (r.reason or "") for r in reports)
    out = io.StringIO()
    assert check_kernel_command(FOLDER, out=out, err=io.StringIO()) == EXIT_SKIPPED
    assert "SKIPPED" in out.getvalue()


# --------------------------------------------------------------------------- env / targets


def test_find_ld_lld_error_names_the_package(monkeypatch):
    monkeypatch.delenv("SKILL_SERVER_LD_LLD", raising=False)
    monkeypatch.setattr(genv.shutil, "which", lambda name: None)
    monkeypatch.setattr(genv, "LLD_CANDIDATES", ("/nonexistent/ld.lld",))
    with pytest.raises(genv.ToolchainMissing, match="apt-get install -y lld-22"):
        genv.find_ld_lld()


def test_compile_only_env_links_ld_lld_under_a_fake_rocm(tmp_path):
    env = genv.compile_only_env(dump_dir=tmp_path / "d", cache_dir=tmp_path)
    assert env["ARCH"] == env["FLYDSL_GPU_ARCH"] == "gfx950" and env["COMPILE_ONLY"] == "1"
    lld = Path(env["ROCM_PATH"]) / "llvm" / "bin" / "ld.lld"
    assert lld.is_symlink() and lld.resolve() == genv.find_ld_lld().resolve()
    assert genv.compile_only_env(cache_dir=tmp_path)["ROCM_PATH"] == env["ROCM_PATH"]  # idempotent


def test_cache_root_honours_skill_server_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("SKILL_SERVER_CACHE", str(tmp_path))
    assert genv.cache_root() == tmp_path / "gfx950"
    monkeypatch.delenv("SKILL_SERVER_CACHE")
    assert genv.cache_root() == genv.REPO_ROOT / ".cache" / "gfx950"  # a checkout: <repo>/.cache


def test_blockscale_folder_declares_targets_and_negatives():
    decl = load_targets(FOLDER)
    names = [t.name for t in decl.all()]
    assert len(names) == len(set(names))
    assert {"t64x256x128_wpe2_xcd8_qup", "t64x256x128_wpe2_xcd0_qup"} <= {t.name for t in decl.targets}
    assert {t.name: t.expect_fail for t in decl.negative} == {
        "neg_8w_interleaved_qkv": ("promote_cluster",),
        "neg_hw_b_scale_down": ("scaled_mfma",),
        "neg_wpe3_spill_down": ("scratch",),
    }
    eight = [t for t in decl.targets if t.config.get("kernel") == "8wave"]
    assert {(t.config["N"], t.config["K"]) for t in eight} == {(2048, 7168), (1536, 7168)}
    assert all(t.gates.promote_cluster == 16 and t.config["schedule"] == "cluster" for t in eight)
    for t in decl.targets:
        assert t.gates.scaled_mfma == "pinned" and t.gates.require_fp32_promote and t.gates.max_scratch_bytes == 0
    with pytest.raises(KeyError, match="available"):
        decl.get("nope")
    with pytest.raises(NoTargetsError):
        load_targets("fp8_common")


def test_targets_module_imports_neither_torch_nor_flydsl():
    code = (
        "import sys, skill_kernels.flydsl_fp8_blockscale_gemm.gfx950_targets as t; "
        "print(len(t.TARGETS), 'torch' in sys.modules, 'flydsl' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[1:] == ["False", "False"]


def test_cache_entry_is_invalid_once_an_imported_source_changes(monkeypatch, tmp_path):
    from verifiers import locations

    monkeypatch.setattr(locations, "PROJECT_ROOT", tmp_path)  # kernels/... resolves against the project
    src = tmp_path / "kernels" / "demo" / "k.py"
    src.parent.mkdir(parents=True)
    src.write_text("x = 1\n")
    art = artifacts()
    art.sources = {"kernels/demo/k.py": gcompile._sha256(src)}
    entry = tmp_path / "cache" / "t-0123456789abcdef"
    gcompile._store_entry(art, entry)
    hit = gcompile._load_entry(entry)
    assert hit is not None and hit.kernels[0].isa == ISA
    src.write_text("x = 2\n")
    assert gcompile._load_entry(entry) is None


# --------------------------------------------------------------------------- kernel host side (no GPU)


def test_shape_checks_name_the_constraint():
    from skill_kernels.flydsl_fp8_blockscale_gemm.flydsl_8wave import EightWaveConfig
    from skill_kernels.flydsl_fp8_blockscale_gemm.flydsl_8wave import check_shapes as check_8wave
    from skill_kernels.flydsl_fp8_blockscale_gemm.flydsl_gemm import CARD_CONFIG, check_shapes
    from skill_kernels.flydsl_fp8_blockscale_gemm.flydsl_gemm import config_4wave as config_for
    from skill_kernels.flydsl_fp8_blockscale_gemm.recipe import config_for as recipe

    check_shapes(4096, 65536, 1536, CARD_CONFIG)
    with pytest.raises(ValueError, match="multiple of 128"):
        check_shapes(64, 256, 200, CARD_CONFIG)
    with pytest.raises(ValueError, match="tile_n=256"):
        check_shapes(64, 384, 256, CARD_CONFIG)
    with pytest.raises(ValueError, match="32-bit offsets"):
        check_shapes(40000, 65536, 1536, CARD_CONFIG)
    assert config_for(256, 384, 768).tile_n == 128
    assert config_for(4096, 65536, 1536).async_copy and not config_for(4096, 2048, 7168).async_copy
    assert config_for(1000, 7168, 2048).a_scale_vec4 and not config_for(1001, 7168, 2048).a_scale_vec4
    assert config_for(64, 7168, 2048).xcd_swizzle == 8 and config_for(64, 7168, 2048, xcd_swizzle=0).xcd_swizzle == 0
    # the card's decision guide: narrow-N / deep-K -> the 8-wave cluster core, the rest -> 4-wave
    assert recipe(4096, 2048, 7168) == recipe(16384, 1536, 7168) == EightWaveConfig(schedule="cluster")
    for shape in ((4096, 65536, 1536), (16384, 7168, 768), (1000, 1536, 1280), (64, 7168, 2048), (256, 1152, 4096)):
        assert recipe(*shape) == config_for(*shape), shape  # 1152 % 256 != 0: no 8-wave tile fits
    check_8wave(200, 512, 384)  # M is free (rows past M are masked)
    with pytest.raises(ValueError, match="multiple of BLOCK_N=256"):
        check_8wave(128, 384, 256)


def test_build_rejects_bad_operands_with_the_tensor_name():
    import torch

    from skill_kernels.flydsl_fp8_blockscale_gemm import flydsl_gemm
    from verifiers.problem import resolve_callable

    fp8 = torch.float8_e4m3fn
    m, n, k = 64, 256, 256
    inputs = {
        "a": torch.zeros(m, k, dtype=fp8),
        "a_scale_t": torch.ones(k // 128, m),
        "b_shuffled": torch.zeros(n, k, dtype=fp8),
        "b_scale": torch.ones(n // 128, k // 128),
    }
    outputs = {"c": torch.empty(m, n, dtype=torch.bfloat16)}
    with pytest.raises(ValueError, match=r"'a'.*ROCm GPU"):
        flydsl_gemm.build(inputs, outputs)
    with pytest.raises(ValueError, match=r"a_scale_t.*expected dtype"):
        flydsl_gemm.build({**inputs, "a_scale_t": inputs["a_scale_t"].double()}, outputs)
    with pytest.raises(ValueError, match="missing 'b_scale'"):
        flydsl_gemm.build({k_: v for k_, v in inputs.items() if k_ != "b_scale"}, outputs)
    # the names the problem spec binds to resolve
    for spec in ("flydsl_gemm:build", "flydsl_gemm:build_xcd0", "flydsl_gemm:build_direct_epilogue",
                 "flydsl_8wave:build", "recipe:build"):
        assert callable(resolve_callable(spec, package=f"skill_kernels.{FOLDER}"))


# --------------------------------------------------------------------------- FlyDSL compile (slow)


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("skill_cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("SKILL_SERVER_CACHE", str(root))
    yield root
    mp.undo()


@pytest.fixture(scope="module")
def reports(fresh_cache):
    if genv.toolchain_problem():
        from tests.emulator_support import toolchain_missing

        toolchain_missing(genv.toolchain_problem())
    return {r.target: r for r in check_kernel(FOLDER, include_negative=True)}


@pytest.mark.flydsl
@pytest.mark.timeout(600)
def test_card_configs_compile_and_pass_every_gate(reports):
    positives = [r for r in reports.values() if not r.negative]
    assert len(positives) >= 2
    for r in positives:
        assert r.status == "PASS", render_text([r])
        assert not r.cache_hit
        res = r.resources[0]
        assert res["scratch_bytes"] == 0 and res["vgpr_spill"] == 0
        assert r.occupancy[0].waves_per_simd >= 2
        assert set(r.mfma) <= {"v_mfma_f32_16x16x128_f8f6f4", "v_mfma_scale_f32_16x16x128_f8f6f4"}
    assert reports["t64x256x128_wpe2_pinned_down"].mfma == {"v_mfma_scale_f32_16x16x128_f8f6f4": 96}
    assert reports["t64x256x128_wpe2_xcd8_qup"].mfma == {"v_mfma_f32_16x16x128_f8f6f4": 192}  # 12 K tiles x 16
    # cshuffle epilogue (default): 16-byte row chunks; the direct ablation: 2-byte stores
    assert any("buffer_store_dwordx4" in e for e in reports["t64x256x128_wpe2_xcd8_qup"].gate("required").evidence)
    assert reports["t64x256x128_wpe2_direct_down"].resources[0]["lds_bytes"] == 16384
    # deep K keeps a loop: 2 K tiles in the body + a 2-tile tail, not 56 unrolled tiles
    assert reports["t64x256x128_wpe2_xcd8_sync_deepk"].mfma == {"v_mfma_f32_16x16x128_f8f6f4": 64}

    # the 8-wave cluster core: one K iteration in the loop body + the peeled last, 16 MFMAs each,
    # every promote after the iteration's last MFMA, no LDS, 2 waves per SIMD
    for name in ("8w_bm128_bn256_cluster_qkv", "8w_bm128_bn256_cluster_gateup"):
        r = reports[name]
        assert r.mfma == {"v_mfma_f32_16x16x128_f8f6f4": 32}, name
        assert r.gate("promote_cluster").status == "PASS" and "0 fp32 promote" in r.gate("promote_cluster").detail
        assert r.resources[0]["lds_bytes"] == 0 and r.resources[0]["workgroup_size"] == 512


def _mfma_runs_between_barriers(report) -> list[int]:
    """fp8 MFMAs between consecutive s_barrier instructions of a compiled target's ISA."""
    art = Path(report.artifacts_dir)
    text = next(art.glob("*.s")).read_text()
    runs, n = [], 0
    for _, ins in isa.instructions(text):
        if ins.startswith("s_barrier"):
            runs.append(n)
            n = 0
        elif isa.FP8_MFMA.match(ins):
            n += 1
    return [r for r in runs if r]


@pytest.mark.flydsl
@pytest.mark.timeout(600)
def test_eight_wave_quadrant_clusters_sit_between_barriers(reports):
    """The ping-pong structure read from the ISA: each quadrant's 2x2 MFMAs (4) between two
    s_barriers, 8 clusters for 2 K iterations (without the sched_barrier fences LLVM moved
    MFMAs across the barriers: runs of 2, 10, 4 ...)."""
    assert _mfma_runs_between_barriers(reports["8w_bm128_bn256_cluster_qkv"]) == [4] * 8


@pytest.mark.flydsl
@pytest.mark.timeout(600)
def test_interleaved_promotes_fail_only_the_cluster_gate(reports):
    r = reports["neg_8w_interleaved_qkv"]
    assert r.negative and r.holds and r.failed == ["promote_cluster"]
    assert r.gate("promote_cluster").evidence and all("iteration" in e for e in r.gate("promote_cluster").evidence)


@pytest.mark.flydsl
@pytest.mark.timeout(600)
def test_real_scale_variant_fails_only_the_scaled_mfma_gate(reports):
    r = reports["neg_hw_b_scale_down"]
    assert r.negative and r.holds and r.failed == ["scaled_mfma"]
    assert any("(real)" in e for e in r.gate("scaled_mfma").evidence)


@pytest.mark.flydsl
@pytest.mark.timeout(600)
def test_spilling_variant_fails_the_scratch_gate(reports):
    r = reports["neg_wpe3_spill_down"]
    assert r.negative and r.holds and "scratch" in r.failed
    assert r.resources[0]["scratch_bytes"] > 0 and r.resources[0]["vgpr_spill"] > 0
    assert any("scratch_" in e for e in r.gate("scratch").evidence)


@pytest.mark.flydsl
@pytest.mark.timeout(600)
def test_second_run_hits_the_cache(reports):
    again = {r.target: r for r in check_kernel(FOLDER, include_negative=True)}
    assert set(again) == set(reports)
    for name, r in again.items():
        assert r.cache_hit, name
        assert r.resources == reports[name].resources and r.status == reports[name].status
    out = io.StringIO()
    assert check_kernel_command(FOLDER, "t64x256x128_wpe2_xcd8_qup", as_json=True, out=out) == 0
    assert json.loads(out.getvalue())[0]["status"] == "PASS"


@pytest.mark.flydsl
@pytest.mark.timeout(600)
def test_two_targets_sharing_one_launcher_compile_in_one_batch(tmp_path):
    """``recipe_smallest`` and ``xcd8_smallest`` compile the very same (lru-cached) launcher.
    In one compile process FlyDSL reuses the kernel and dumps nothing for the second target;
    the batch must hand it the first one's code, not report 'no kernel'."""
    if genv.toolchain_problem():
        pytest.skip(genv.toolchain_problem())
    names = ["emu_xcd8_smallest_gemm", "emu_recipe_smallest_gemm"]
    arts = gcompile.compile_targets(FOLDER, names, use_cache=False, cache_dir=tmp_path, jobs=1)
    assert all(arts[n].status == "ok" for n in names), {n: arts[n].reason for n in names}
    (a,), (b,) = arts[names[0]].kernels, arts[names[1]].kernels
    assert a.kernel == b.kernel and a.isa == b.isa and b.code_object_file
