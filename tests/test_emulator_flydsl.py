"""The cards' FlyDSL kernels executed on the gfx950 emulator (compiled as the gates compile
them): each emulated arm passes its problem's parity against the oracle at a small shape,
each deliberately wrong variant fails it, and no run shows a hazard."""
from __future__ import annotations

import pytest

from tests.emulator_support import require_flydsl_toolchain, require_llvm

FOLDERS = ("flydsl_fp8_blockscale_gemm", "flydsl_mxfp8_8wave_gemm", "flydsl_prefill_moe_stage2_fp8partial")

pytestmark = [pytest.mark.flydsl, pytest.mark.slow]


def _arms():
    from verifiers.gfx950.targets import load_targets

    return [(f, a.name) for f in FOLDERS for a in load_targets(f).emulated]


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    """Compile every emulation kernel of a folder in one batch (one torch/flydsl import per worker)."""
    require_llvm()
    require_flydsl_toolchain()
    from verifiers.gfx950.compile import compile_targets
    from verifiers.gfx950.targets import load_targets

    for folder in FOLDERS:
        names = list(load_targets(folder).emulation_kernels())
        arts = compile_targets(folder, names)
        bad = {n: a.reason for n, a in arts.items() if a.status != "ok"}
        assert not bad, bad


@pytest.mark.parametrize(("folder", "arm"), _arms())
def test_emulated_arm_parity(folder, arm):
    from verifiers.gfx950.emulator.flydsl_arm import run_emulated_parity

    r = run_emulated_parity(folder, arm, seed=0)
    assert r.as_expected, (f"{folder}/{arm}: parity {'held' if r.parity_holds else 'failed'}, expected "
                           f"{'to hold' if r.expect_parity else 'to fail'}; {r.failures}")
    assert not r.hazards, r.hazards
    assert r.launches and all(rep.instructions > 0 for rep in r.launches)
    if (folder, arm) == ("flydsl_mxfp8_8wave_gemm", "real_4x1_tail"):
        # the M tail inside a 256-row block: buffer-resource bounds read 0 / drop stores, as on silicon
        assert r.launches[0].buffer_oob_loads > 0 and r.launches[0].buffer_oob_stores > 0


def test_host_layout_matches_flydsl_packing():
    """The dynamic-layout struct the emulator builds for a tensor is byte-for-byte what
    FlyDSL's own C ABI packer writes."""
    import torch
    from flydsl.compiler.jit_argument import TorchTensorJitArg

    from verifiers.gfx950.emulator.flydsl_host import tensor_layout_values

    for t in (torch.zeros(7, 33, dtype=torch.uint8), torch.zeros(12), torch.zeros(5, 6, 8).permute(0, 2, 1).contiguous(),
              torch.zeros(10, 40)[:, :16]):
        arg = TorchTensorJitArg(t)
        slots = arg.__c_abi_spec__()
        assert len(slots) == 2
        ctype, fill = slots[1]
        buf = ctype()
        fill(arg, buf)
        vals = tensor_layout_values(t)
        fmt_bytes = b"".join(int(v).to_bytes(4 if i < t.dim() else 8, "little", signed=True) for i, v in enumerate(vals))
        assert bytes(buf) == fmt_bytes, (t.shape, t.stride())


def test_host_launcher_computes_the_grid():
    """The block-scale launcher's grid comes from interpreting its host code: ceil(M/64) x N/256."""
    import torch

    from verifiers.gfx950.emulator.flydsl_arm import emulated_kernels

    gemm = emulated_kernels("flydsl_fp8_blockscale_gemm", "xcd8_small")["gemm"]
    n, k = gemm.config["N"], gemm.config["K"]
    for m in (1, 63, 64, 65, 200):
        args = (torch.zeros(m * n, dtype=torch.bfloat16), torch.zeros(m * k, dtype=torch.int8),
                torch.zeros(n * k, dtype=torch.int8), torch.zeros(k // 128 * m), torch.zeros(n // 128 * (k // 128)), m)
        hl = gemm.host.run(args)
        assert hl.grid == (-(-m // 64), n // 256, 1) and hl.block == (256, 1, 1)
        assert len(hl.args) == len(gemm.code_object.kernel(hl.kernel).explicit_args)
    from verifiers.gfx950.emulator import LaunchArgumentError

    with pytest.raises(LaunchArgumentError, match="argument 5 is a tensor, the launcher expects i32"):
        gemm.host.run(args[:5] + (torch.zeros(1),))
    with pytest.raises(LaunchArgumentError, match="missing argument"):
        gemm.host.run(args[:4])


def test_fp8_store_and_reduce_are_bit_exact():
    """The emulated FlyDSL store epilogue writes the very e4m3 bytes the Triton arm writes
    ((acc * w) * s, clamp, round to nearest even), and the emulated reduce turns them into
    the very bf16 output: v_cvt_pk_fp8_f32 / v_cvt_pk_f32_fp8 checked bit for bit."""
    import torch

    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial import triton_arms
    from verifiers.gfx950.emulator.flydsl_arm import emulated_builder
    from verifiers.gfx950.targets import load_targets
    from verifiers.problem import load_problem

    folder = "flydsl_prefill_moe_stage2_fp8partial"
    problem = load_problem(folder)
    dims = dict(load_targets(folder).emulated_arm("fp8_epilogue").dims)
    inputs = problem.make_inputs(dims, 1, "cpu")
    emu_out, tri_out = problem.make_outputs(dims, "cpu")["out"], problem.make_outputs(dims, "cpu")["out"]
    emu = emulated_builder(folder, "fp8_epilogue")(inputs, {"out": emu_out})
    emu()
    tri = triton_arms.build_fp8({k: v.clone() for k, v in inputs.items()}, {"out": tri_out})
    tri()
    assert emu.producer_scale == tri.producer_scale == emu.reducer_scale
    assert torch.equal(emu.partial.view(torch.uint8), tri.partial.view(torch.uint8))
    assert torch.equal(emu_out, tri_out)


def test_check_kernel_emulate_cli(capsys):
    """``skill-server check-kernel CARD --emulate --json``: the gates and every emulated arm in one document."""
    import json

    from skill_server.cli.entry import main
    rc = main(["check-kernel", "flydsl_mxfp8_8wave_gemm", "--target", "bm128_bn128_k2048", "--emulate", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, doc
    assert doc["emulation"]["platform"] == "gfx950-emulated"
    arms = {a["emulated_arm"]: a for a in doc["emulation"]["arms"]}
    assert arms["real_2x2"]["parity_holds"] and not arms["scales_pinned"]["parity_holds"]
    assert doc["gates"]


def test_emulate_command_reports_a_wrong_expectation(capsys, monkeypatch):
    """If a deliberately wrong arm were to pass parity, the command must fail (exit 1)."""
    from verifiers.gfx950.emulator import cli
    from verifiers.gfx950.emulator.cli import emulate_command

    real = cli.run_emulated_parity

    def flipped(folder, name, seed=0):  # noqa: ANN001, ANN202
        r = real(folder, name, seed)
        return r.model_copy(update={"expect_parity": not r.expect_parity})

    monkeypatch.setattr(cli, "run_emulated_parity", flipped)
    rc = emulate_command("flydsl_mxfp8_8wave_gemm", arm="real_2x2")
    out = capsys.readouterr().out
    assert rc == 1 and "NOT AS EXPECTED" in out


def test_emulate_full_runs_the_real_shape_kernel(capsys):
    """``check-kernel --emulate --full`` runs the FULL_EMULATED_ARMS (the card's 4-wave deep-K
    kernel and the recipe's 8-wave cluster core, compiled for the problem's N=2048, K=7168, their
    whole K loops); here at M=64 (M is a runtime argument: the same code, 8 of the 512 4-wave
    workgroups, half of one 8-wave CTA's rows) so the test stays cheap. The card shape itself is
    measured in bench/emulator_speed.py and by the CLI (docs/gfx950_emulator.md)."""
    import json

    from verifiers.gfx950.emulator.cli import emulate_command
    from verifiers.gfx950.targets import load_targets

    full = load_targets("flydsl_fp8_blockscale_gemm").full
    assert [dict(a.dims) for a in full] == [{"M": 4096, "N": 2048, "K": 7168}] * 2
    rc = emulate_command("flydsl_fp8_blockscale_gemm", full=True, as_json=True, dims={"M": 64, "N": 2048, "K": 7168})
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, doc
    assert doc["full"] and doc["seconds"] > 0 and not doc["errors"]
    four, eight = doc["arms"]
    assert [four["emulated_arm"], eight["emulated_arm"]] == ["full_deepk", "full_8wave_cluster"]
    for arm in (four, eight):
        assert arm["parity_holds"] and arm["dims"] == {"M": 64, "N": 2048, "K": 7168}
        (launch,) = arm["launches"]
        assert launch["instructions"] > 300_000  # the K loop ran, not a toy shape
    assert four["launches"][0]["workgroups"] == 8 and eight["launches"][0]["workgroups"] == 8


def test_emulate_moe_full_runs_the_card_shape_kernels_at_one_token(capsys):
    """The MoE card's FULL_EMULATED_ARMS: the fused FlyDSL stage 2 (cshuffle_pf8 GEMM + infp8
    reduce) compiled for the card's first shape (N=2880, K=2880, the scale calibrated for E=128,
    top_k=4), against the torch baseline. Here at M=1 (M and the routing are runtime: the same
    code objects; 4 expert blocks x 45 column tiles, each with the whole 90-step K loop, and the
    padding rows of every block); the card shape itself is measured by the CLI
    (bench/results/emulated_full_shapes.md)."""
    import json

    from verifiers.gfx950.emulator.cli import emulate_command
    from verifiers.gfx950.targets import load_targets

    folder = "flydsl_prefill_moe_stage2_fp8partial"
    (arm,) = load_targets(folder).full
    dims = {**arm.dims, "M": 1}
    rc = emulate_command(folder, full=True, as_json=True, dims=dims)
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, doc
    (run,) = doc["arms"]
    assert run["emulated_arm"] == "full_fused_pf8" and run["baseline"] == "torch_bf16" and run["dims"] == dims
    assert run["parity_holds"] and not run["failures"], run["failures"]
    gemm, reduce = run["launches"]  # one launch each: the check runs the kernels once
    assert gemm["kernel"].startswith("moe2_gemm_cshuffle_pf8_s") and reduce["kernel"].startswith("moe_reduce_infp8_s")
    assert gemm["kernel"].rpartition("_s")[2] == reduce["kernel"].rpartition("_s")[2]  # one scale, both sides
    assert gemm["workgroups"] == 4 * 45 and gemm["instructions"] > 1_000_000  # the K loop ran, not a toy shape
    assert not gemm["hazards"] and not reduce["hazards"]
    # the torch baseline is the bf16-partial arithmetic: far closer to the oracle than fp8 partials
    assert run["baseline_metrics"]["out"]["rel_l2"] < run["metrics"]["out"]["rel_l2"] / 4


def test_an_emulated_arms_budget_reaches_its_launches(capsys, monkeypatch):
    """The budget an arm declares (EmulatedArm.budget; the MoE card-shape arm raises launch's
    default) is the one its kernels run under: a 1 ms budget stops the fused GEMM at the end of
    its first batch of workgroups with the budget's message, an error of the arm (exit 1), never
    a traceback. (The instruction budget is checked at backward branches, which the emulation
    shape's two-step K loop never takes.)"""
    from dataclasses import replace

    from verifiers.gfx950.emulator import flydsl_arm
    from verifiers.gfx950.emulator.cli import emulate_command
    from verifiers.gfx950.targets import EmulationBudget

    real = flydsl_arm.load_targets

    def tight(folder):  # noqa: ANN001, ANN202
        t = real(folder)
        return replace(t, emulated=tuple(replace(a, budget=EmulationBudget(max_seconds=1e-3)) for a in t.emulated))

    monkeypatch.setattr(flydsl_arm, "load_targets", tight)
    assert emulate_command("flydsl_prefill_moe_stage2_fp8partial", arm="fused_pf8") == 1
    out = capsys.readouterr().out
    assert "fused_pf8" in out and "ERROR" in out and "emulation exceeded its 0.001 s budget" in out, out
    with pytest.raises(ValueError, match="max_seconds must be positive"):
        EmulationBudget(max_seconds=0)


def test_emulate_full_refuses_bad_use(capsys, monkeypatch):
    """--full without --emulate, a folder without FULL_EMULATED_ARMS, dims that do not name the
    problem's dims: clear messages and exit codes, no traceback."""
    from dataclasses import replace

    from skill_server.cli.entry import main
    from verifiers.gfx950.emulator import cli
    from verifiers.gfx950.emulator.cli import emulate_command

    assert main(["check-kernel", "flydsl_fp8_blockscale_gemm", "--full"]) == 2
    assert "--full applies to --emulate" in capsys.readouterr().err
    real = cli.load_targets
    monkeypatch.setattr(cli, "load_targets", lambda folder: replace(real(folder), full=()))  # every card has some now
    assert emulate_command("flydsl_prefill_moe_stage2_fp8partial", full=True) == 2
    assert "declares no FULL_EMULATED_ARMS" in capsys.readouterr().err
    monkeypatch.undo()
    assert emulate_command("flydsl_fp8_blockscale_gemm", full=True, dims={"M": 64}) == 1
    assert "dims {'M': 64} must give a positive int for each of ['K', 'M', 'N']" in capsys.readouterr().out
