"""ROCm 7's default rocprofv3 output (the rocpd SQLite database) and rocprofv3 JSON, read directly."""
from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from profile_support import Dispatch, rocpd_database
from skill_server.profiles import ProfileError, load_profile
from trace_readers import read_trace

MOE2 = "moe_gemm2_a8w4_mfma_moe2_cshuffle_pf8_t128x256"
REDUCE = "moe_topk_reduce_infp8_bf16out"
CK = "void ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle<256, 128>(ck::Argument)"


def layer(t0: int = 1_000_000) -> list[Dispatch]:
    return [Dispatch(CK, t0, t0 + 90_000, vgpr=128, lds=8192),
            Dispatch("void aiter::moe_sorting_kernel<int, float>(aiter::MoeSortingKernelArgs)", t0 + 92_000, t0 + 98_000),
            Dispatch("moe_gemm1_a8w4_mfma_moe1_silu_t128x128", t0 + 100_000, t0 + 240_000),
            Dispatch(MOE2, t0 + 242_000, t0 + 352_000),
            Dispatch(REDUCE, t0 + 354_000, t0 + 394_000)]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return rocpd_database(tmp_path / "4242_results.db", layer() + layer(5_000_000), copies=3)


def test_rocpd_database_reads_like_a_kernel_trace(db: Path) -> None:
    s = load_profile(db, top=20)
    assert s.format == "rocpd" and s.dispatch_count == 10 and s.kernel_count == 5
    assert s.device_names == ["AMD Instinct MI355X (gfx950)"] and s.device_gen == "gfx950"
    assert s.skipped == {"MEMORY_COPY": 3} and any("schema version 3.0.3" in n for n in s.notes)
    top = s.hotspots[0]
    assert top.hotspot.op_name == "moe_gemm1_a8w4_mfma_moe1_silu_t128x128" and top.total_ns == 280_000
    ck = next(h for h in s.hotspots if h.full_name == CK)
    assert (ck.resources.vgpr_count, ck.resources.lds_bytes, ck.resources.workgroup_size) == (128, 8192, [256, 1, 1])
    moe2 = next(h for h in s.hotspots if h.full_name == MOE2)
    assert REDUCE in moe2.hotspot.segment_kernels and moe2.hotspot.stage == "stage2"


def test_rocpd_records_keep_lanes_and_correlation(db: Path) -> None:
    t = read_trace(db)
    d = t.dispatches[0]
    assert (d.agent, d.queue, d.stream, d.correlation_id, d.kind) == (2, 1, 1, 1, "KERNEL_DISPATCH")
    assert [x.start_ns for x in t.dispatches] == sorted(x.start_ns for x in t.dispatches)


def test_rocpd_bytes_from_stdin_and_gzip(db: Path) -> None:
    raw = db.read_bytes()
    assert load_profile(content=raw).format == "rocpd"
    assert load_profile(content=gzip.compress(raw)).dispatch_count == 10
    gz = db.with_suffix(".db.gz")
    gz.write_bytes(gzip.compress(raw))
    assert load_profile(gz).kernel_count == 5


@pytest.mark.parametrize("version", ["4.0.0", "4.1.0", "2"])
def test_newer_or_older_schema_is_refused_with_its_version(tmp_path: Path, version: str) -> None:
    path = rocpd_database(tmp_path / "r.db", layer(), version=version)
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    text = str(err.value)
    assert f"unsupported rocpd schema version {version}" in text and "rocpd convert" in text
    assert "\n" not in text  # one line


def test_sqlite_that_is_not_rocpd(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT)")
    con.commit()
    con.close()
    with pytest.raises(ProfileError, match="not a rocpd one .*Nsight"):
        load_profile(path)


def test_damaged_database_is_one_clear_error(db: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.db"
    cut.write_bytes(db.read_bytes()[: 6000])
    with pytest.raises(ProfileError) as err:
        load_profile(cut)
    assert "rocpd" in str(err.value) or "SQLite" in str(err.value)


def test_rocpd_without_dispatches(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no kernel dispatches"):
        load_profile(rocpd_database(tmp_path / "e.db", []))


# ---- rocprofv3 --output-format json ------------------------------------------------------------

def results_json(records: list[dict]) -> str:
    return json.dumps({"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 4242, "init_time": 1, "fini_time": 2},
        "agents": [{"size": 1, "id": {"handle": 1}, "type": 1, "name": "AMD EPYC"},
                   {"size": 1, "id": {"handle": 9}, "type": 2, "name": "gfx950", "product_name": "AMD Instinct MI355X"}],
        "kernel_symbols": [{"kernel_id": 1, "kernel_name": "_ZN2ck3gemmEv", "formatted_kernel_name": "ck::gemm()",
                            "demangled_kernel_name": "ck::gemm()", "truncated_kernel_name": "gemm"},
                           {"kernel_id": 2, "kernel_name": "moe_sum_kernel", "formatted_kernel_name": "moe_sum_kernel"}],
        "buffer_records": {"kernel_dispatch": records, "memory_copy": [{"kind": 11}]},
    }]})


def record(kernel_id: int, start: int, end: int, corr: int) -> dict:
    return {"size": 1, "kind": 10, "operation": 1, "thread_id": 4242,
            "correlation_id": {"internal": corr, "external": 0}, "start_timestamp": start, "end_timestamp": end,
            "dispatch_info": {"size": 1, "agent_id": {"handle": 9}, "queue_id": {"handle": 3}, "kernel_id": kernel_id,
                              "dispatch_id": corr, "private_segment_size": 0, "group_segment_size": 4096,
                              "workgroup_size": {"x": 256, "y": 1, "z": 1}, "grid_size": {"x": 1024, "y": 1, "z": 1}}}


def test_rocprofv3_json_is_read_directly() -> None:
    s = load_profile(content=results_json([record(1, 100, 600, 1), record(2, 700, 800, 2), record(1, 900, 1400, 3)]))
    assert s.format == "rocprofv3_json" and s.dispatch_count == 3 and s.device_gen == "gfx950"
    assert [(h.full_name, h.calls, h.total_ns) for h in s.hotspots] == [("ck::gemm()", 2, 1000), ("moe_sum_kernel", 1, 100)]
    assert s.skipped == {"memory_copy": 1} and s.hotspots[0].resources.lds_bytes == 4096


@pytest.mark.parametrize("rec, needle", [
    (record(7, 100, 600, 1), "kernel_id 7 has no entry in kernel_symbols"),
    ({**record(1, 100, 600, 1), "end_timestamp": 50}, "end >= start"),
    ("oops", "record is a str"),
])
def test_bad_rocprofv3_json_records(rec, needle) -> None:
    with pytest.raises(ProfileError) as err:
        load_profile(content=results_json([rec]))
    assert needle in str(err.value) and "kernel_dispatch[0]" in str(err.value)


def test_rocprofv3_json_streams_records_and_resolves_symbols_that_come_after_them(monkeypatch) -> None:
    import trace_readers.source as source

    doc = json.loads(results_json([record(1, 100, 600, 1), record(2, 700, 800, 2)] * 500))
    tool = doc["rocprofiler-sdk-tool"][0]
    tool["kernel_symbols"] = tool.pop("kernel_symbols")  # now after buffer_records, as a streamer meets it last
    text = json.dumps(doc, indent=1)
    real = source.Source.text_chunks
    monkeypatch.setattr(source.Source, "text_chunks", lambda self, size=1 << 20: real(self, 97))  # records cut anywhere
    s = load_profile(content=text)
    assert s.dispatch_count == 1000 and [h.full_name for h in s.hotspots] == ["ck::gemm()", "moe_sum_kernel"]
    with pytest.raises(ProfileError) as err:  # cut inside a record: one line, with where it ended
        load_profile(content=text[: len(text) // 2])
    assert "truncated" in str(err.value) and "<content>:" in str(err.value)
