"""gfx950 emulator: loading code objects, decoding, and refusing bad input before anything runs."""
from __future__ import annotations

import pytest

from tests.emulator_support import require_llvm

pytestmark = pytest.mark.usefixtures("_llvm")


@pytest.fixture(name="_llvm")
def _llvm_fixture():
    require_llvm()


@pytest.fixture(scope="module")
def cast_binary():
    from verifiers.gfx950.emulator.validation.triton_cases import binary

    return binary("fp8_cast")


def test_metadata_and_descriptor(cast_binary):
    from verifiers.gfx950.emulator import load_code_object

    co = load_code_object(cast_binary.hsaco)
    k = co.kernel(cast_binary.name)
    assert co.target.endswith("gfx950")
    kinds = [a.value_kind for a in k.explicit_args]
    assert kinds == ["global_buffer"] * 3 + ["by_value"] + ["global_buffer"] * 2  # + Triton's two scratch pointers
    assert [a.offset for a in k.explicit_args][:4] == [0, 8, 16, 24]
    d = k.descriptor
    assert d.user_sgpr_enables["kernarg_segment_ptr"] and d.workgroup_id_enables[0]
    assert d.user_sgpr_count == 2 + d.kernarg_preload_dwords  # kernarg pointer + preloaded kernargs
    assert k.wavefront_size == 64 and k.code_size > 0


def test_decoder_parses_operands_and_modifiers():
    from verifiers.gfx950.emulator.decoder import parse_line
    from verifiers.gfx950.emulator.operands import Const, Reg

    m, ops, mods = parse_line("buffer_load_dwordx4 v[126:129], v2, s[12:15], 0 offen offset:256")
    assert m == "buffer_load_dwordx4" and mods == {"offen": True, "offset": 256}
    assert ops[0] == Reg("v", 126, 4, text="v[126:129]") and ops[2].count == 4 and isinstance(ops[3], Const)
    m, ops, mods = parse_line("v_pk_mul_f32 v[52:53], v[2:3], s[8:9] op_sel_hi:[1,0]")
    assert len(ops) == 3 and mods == {"op_sel_hi": (1, 0)}
    m, ops, mods = parse_line("v_mfma_f32_16x16x128_f8f6f4 a[0:3], v[0:7], v[8:15], a[0:3]")
    assert ops[0].index == 256 and ops[0].count == 4  # AccVGPRs live after the 256 VGPRs
    _, ops, _ = parse_line("v_add_f32_e64 v1, -v2, |v3|")
    assert ops[1].neg and ops[2].abs
    _, ops, _ = parse_line("s_mov_b64 s[28:29], s[6:7]")
    assert [o.index for o in ops] == [28, 6]


def test_not_an_elf_truncated_and_wrong_target(cast_binary):
    from verifiers.gfx950.emulator import CodeObjectError, load_code_object

    with pytest.raises(CodeObjectError, match="not an ELF"):
        load_code_object(b"hello, world" * 10)
    with pytest.raises(CodeObjectError, match="truncated"):
        load_code_object(cast_binary.hsaco[: len(cast_binary.hsaco) // 2])
    other = bytearray(cast_binary.hsaco)
    other[48] = 0x4C  # e_flags machine: gfx942
    with pytest.raises(CodeObjectError, match="gfx942, not gfx950"):
        load_code_object(bytes(other))
    with pytest.raises(CodeObjectError, match="does not exist"):
        load_code_object("/nonexistent/k.hsaco")


def test_code_object_really_compiled_for_another_target():
    """A Triton kernel compiled for gfx942 (MI300) is refused, naming both targets."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from verifiers.gfx950.emulator import CodeObjectError, load_code_object
    from verifiers.gfx950.emulator.validation import triton_kernels as tk

    k = triton.compile(ASTSource(tk.fp8_upcast_kernel, signature={"x_ptr": "*fp8e4nv", "y_ptr": "*fp32", "n": "i32",
                                                                  "BLOCK": "constexpr"}, constexprs={"BLOCK": 256}),
                       target=GPUTarget("hip", "gfx942", 64), options={"num_warps": 4})
    with pytest.raises(CodeObjectError, match="gfx942, not gfx950"):
        load_code_object(k.asm["hsaco"])


def test_bad_launch_arguments_are_refused_before_running(cast_binary):
    import torch

    from verifiers.gfx950.emulator import CodeObjectError, LaunchArgumentError, launch

    x, y4, y5 = torch.zeros(16), torch.zeros(16, dtype=torch.uint8), torch.zeros(16, dtype=torch.uint8)
    name, good = cast_binary.name, [x, y4, y5, 16, None, None]
    with pytest.raises(CodeObjectError, match="no kernel 'nope'.*fp8_cast_kernel"):
        launch(cast_binary.hsaco, "nope", 1, 256, good)
    with pytest.raises(LaunchArgumentError, match="takes 6 explicit arguments.*got 4"):
        launch(cast_binary.hsaco, name, 1, 256, good[:4])
    with pytest.raises(LaunchArgumentError, match="argument 0.*needs a CPU torch tensor or None, got int"):
        launch(cast_binary.hsaco, name, 1, 256, [7] + good[1:])
    with pytest.raises(LaunchArgumentError, match="argument 3.*needs an int, float, bool or bytes, got Tensor"):
        launch(cast_binary.hsaco, name, 1, 256, good[:3] + [x] + good[4:])
    with pytest.raises(LaunchArgumentError, match="does not fit the 4-byte slot"):
        launch(cast_binary.hsaco, name, 1, 256, good[:3] + [1 << 40] + good[4:])
    with pytest.raises(LaunchArgumentError, match="3 bytes given for a 4-byte"):
        launch(cast_binary.hsaco, name, 1, 256, good[:3] + [b"abc"] + good[4:])
    with pytest.raises(LaunchArgumentError, match="more than its maximum"):
        launch(cast_binary.hsaco, name, 1, 2048, good)
    with pytest.raises(LaunchArgumentError, match="grid must have 1 to 3 positive sizes"):
        launch(cast_binary.hsaco, name, (0,), 256, good)


def test_tensor_too_small_for_what_the_kernel_reads(cast_binary):
    """n says 5000 elements but x holds 100: the first lane past the end stops the run,
    naming the instruction and the argument; nothing outside the tensors is touched."""
    import torch

    from verifiers.gfx950.emulator import MemoryAccessError, launch

    x, y4, y5 = torch.zeros(100), torch.zeros(5000, dtype=torch.uint8), torch.zeros(5000, dtype=torch.uint8)
    with pytest.raises(MemoryAccessError, match=r"global_load_dword.*outside every argument's buffer.*argument 0"):
        launch(cast_binary.hsaco, cast_binary.name, 5, 256, [x, y4, y5, 5000, None, None])


def test_access_past_a_view_into_a_larger_storage_is_refused(cast_binary):
    """x is the first 100 floats of a bigger storage: the kernel may not read the bytes
    after x even though they belong to the same allocation."""
    import torch

    from verifiers.gfx950.emulator import MemoryAccessError, launch

    big = torch.zeros(10_000)
    x = big[:100]
    y4, y5 = torch.zeros(5000, dtype=torch.uint8), torch.zeros(5000, dtype=torch.uint8)
    with pytest.raises(MemoryAccessError, match=r"outside every argument's buffer.*argument 0.*bytes past its end"):
        launch(cast_binary.hsaco, cast_binary.name, 5, 256, [x, y4, y5, 5000, None, None])
