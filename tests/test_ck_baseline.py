"""The CK block-scale baseline follows aiter's production dispatch: the tuned row for the
shape (read as aiter reads its tuned CSV), the row's entry point with its kernel name,
output in place, and the instance recorded. What needs aiter and a ROCm GPU cannot run here;
the lookup, the choice, the recording and the refusals can."""
from __future__ import annotations

import subprocess
import sys

import pytest

from skill_kernels.flydsl_fp8_blockscale_gemm import ck_baseline as ck
from skill_kernels.flydsl_fp8_blockscale_gemm.inputs import make_inputs, make_outputs

HEADER = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio"
V1 = "a8w8_blockscale_bpreshuffle_1x128x128_256x64x256x128_16x16_16x16_8x32x1_8x32x1_1x32x1x8_8_2x1_intrawave_v1"
V3 = "a8w8_blockscale_bpreshuffle_1x128x128_256x64x128x128_16x16_16x16_8x32x1_8x32x1_1x32x1x8_8_2x1_intrawave_v3"
ASM = "_ZN5aiter42fp8gemm_bf16_blockscale_BpreShuffle_64x128E"
# the card's four shapes as aiter's gfx950 tuned rows have them (MI355X: 256 CUs)
ROWS = [
    f"gfx950,256,16384,1536,7168,ck,13,3,210.0224,{V1},1717.8,851.25,0.0",
    f"gfx950,256,4096,2048,7168,ck,13,0,79.0202,{V1},1521.88,0.76964,0.0",
    f"gfx950,256,4096,65536,1536,ck,13,0,629.476,{V1},1310.03,1.0228,0.0",
    f"gfx950,256,16384,7168,768,ck,1,0,197.2607,{V3},914.47,1282.41,0.0",
    f"gfx950,256,64,7168,2048,asm,22,7,9.16,{ASM},25.64,429.16,0.0033",
    f"gfx942,304,4096,2048,7168,ck,2,0,140.1,{V3},800.0,0.5,0.0",
    f"gfx950,256,128,2048,7168,ck,4,0,20.0,{V3},1.0,1.0,0.0",
]


@pytest.fixture
def tuned(tmp_path):
    path = tmp_path / "a8w8_blockscale_bpreshuffle_tuned_gemm.csv"
    path.write_text("\n".join([HEADER, *ROWS, ROWS[1]]) + "\n")  # a duplicate row, as merged files have
    return path


def test_the_card_shapes_find_their_gfx950_rows(tuned):
    table = ck.read_tuned_csv(tuned)
    assert len(table) == len(ROWS)
    for (m, n, k), name in [((16384, 1536, 7168), V1), ((4096, 2048, 7168), V1), ((4096, 65536, 1536), V1),
                            ((16384, 7168, 768), V3)]:
        row = ck.lookup_tuned(table, "gfx950", 256, m, n, k)
        assert (row.libtype, row.kernel_name) == ("ck", name)
    row = ck.lookup_tuned(table, "gfx950", 256, 4096, 2048, 7168)
    assert (row.kernel_id, row.split_k, row.us, row.source) == (13, 0, 79.0202, f"{tuned.name}:3")


def test_lookup_keys_on_arch_and_cu_count_then_padded_m(tuned):
    table = ck.read_tuned_csv(tuned)
    assert ck.lookup_tuned(table, "gfx942", 304, 4096, 2048, 7168).kernel_name == V3
    assert ck.lookup_tuned(table, "gfx950", 304, 4096, 2048, 7168) is None  # another CU count: not this box's row
    assert ck.lookup_tuned(table, "gfx950", 256, 100, 2048, 7168) is None
    assert ck.lookup_tuned(table, "gfx950", 256, 100, 2048, 7168, padded_ms=(112, 128)).m == 128


def test_a_legacy_csv_without_gfx_keys_on_cu_count(tmp_path):
    path = tmp_path / "old.csv"
    path.write_bytes(("\ufeffcu_num,M,N,K,libtype,kernelId,splitK,us,kernelName\r\n"
                      f"256,4096,2048,7168,ck,13,0,79.0,{V1}\r\n").encode())
    row = ck.lookup_tuned(ck.read_tuned_csv(path), "gfx950", 256, 4096, 2048, 7168)
    assert row.kernel_name == V1 and row.gfx is None


def test_a_bad_tuned_csv_names_file_line_and_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("gfx,cu_num,M,N,K,libtype\n")
    with pytest.raises(ck.TunedCsvError, match=r"bad.csv: line 1: missing column\(s\) \['kernelName'\]"):
        ck.read_tuned_csv(path)
    path.write_text(f"{HEADER}\n{ROWS[0]}\ngfx950,256,40x96,1,1,ck,1,0,1,k,1,1,0\n")
    with pytest.raises(ck.TunedCsvError, match="bad.csv: line 3"):
        ck.read_tuned_csv(path)
    with pytest.raises(ck.TunedCsvError, match="cannot read"):
        ck.read_tuned_csv(tmp_path / "missing.csv")


def test_aiters_lookup_answer_becomes_a_row():
    config = {"libtype": "ck", "kernelId": 1, "splitK": 0, "us": 197.26, "kernelName": V3, "tflops": 914.47}
    row = ck.TunedRow.from_config(config, 16384, 7168, 768, "aiter get_CKGEMM_config, x.csv")
    assert (row.libtype, row.kernel_name, row.kernel_id, row.split_k) == ("ck", V3, 1, 0)


def test_dispatch_follows_the_rows_libtype_and_records_the_instance(tuned):
    table = ck.read_tuned_csv(tuned)
    row = ck.lookup_tuned(table, "gfx950", 256, 16384, 7168, 768)
    public = ck.choose_dispatch(row, public_takes_out=True)
    assert public.variant == "gemm_a8w8_blockscale_bpreshuffle(out=c)"
    assert public.kernel_instance == f"ck:{V3} (tuned, {tuned.name}:5)"
    assert public.module == "module_gemm_a8w8_blockscale_bpreshuffle"
    old = ck.choose_dispatch(row, public_takes_out=False)
    assert old.variant == "gemm_a8w8_blockscale_bpreshuffle_ck(Y=c)"
    asm = ck.choose_dispatch(ck.lookup_tuned(table, "gfx950", 256, 64, 7168, 2048), public_takes_out=False)
    assert asm.entry == "gemm_a8w8_blockscale_bpreshuffle_asm" and ASM in asm.kernel_instance
    untuned = ck.choose_dispatch(None, public_takes_out=False)
    assert untuned.entry == "gemm_a8w8_blockscale_bpreshuffle_ck" and "default heuristic" in untuned.kernel_instance

    def launch():
        pass

    annotated = ck.annotate(launch, public)
    assert (annotated.variant, annotated.kernel_instance) == (public.variant, public.kernel_instance)


def test_a_libtype_without_an_in_place_entry_is_refused_not_copied():
    row = ck.TunedRow(gfx="gfx950", cu_num=256, m=1, n=1, k=1, libtype="opus", kernel_name="opus_k7")
    with pytest.raises(ck.PlatformError, match="libtype 'opus'.*takes out="):
        ck.choose_dispatch(row, public_takes_out=False)
    assert ck.choose_dispatch(row, public_takes_out=True).entry == ck.PUBLIC_ENTRY  # aiter runs it in place


def test_the_arm_refuses_off_rocm_and_without_aiter():
    dims = {"M": 128, "N": 256, "K": 512}
    with pytest.raises(ck.PlatformError, match="ROCm only"):
        ck.build(make_inputs(dims, 0), make_outputs(dims))
    try:
        import aiter  # noqa: F401
    except ImportError:
        with pytest.raises(ck.PlatformError, match="install aiter on the ROCm box"):
            ck._import_aiter()
    else:  # pragma: no cover - a box with aiter
        pytest.skip("aiter is installed here")


def test_prepare_refuses_with_one_line_where_it_cannot_build():
    run = subprocess.run([sys.executable, "-m", "skill_kernels.flydsl_fp8_blockscale_gemm.ck_baseline", "prepare",
                          "--shape", "128x256x512"], capture_output=True, text=True, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode == 2 and "Traceback" not in out
    assert out.startswith("ck_blockscale prepare: ") and ("aiter" in out or "ROCm GPU" in out)
    bad = subprocess.run([sys.executable, "-m", "skill_kernels.flydsl_fp8_blockscale_gemm.ck_baseline", "prepare",
                          "--shape", "12x3"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "MxNxK" in bad.stderr
    with pytest.raises(ck.PlatformError, match="prepare failed: ck_blockscale prepare: "):
        ck.prepare([{"M": 128, "N": 256, "K": 512}], progress=lambda line: None)
