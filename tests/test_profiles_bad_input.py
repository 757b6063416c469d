"""Every kind of bad profile input ends in one ProfileError that says where and what was expected."""
from __future__ import annotations

import gzip
import json
import pathlib
import random
from pathlib import Path

import pytest

from skill_server.profiles import MAX_BYTES_ENV, ProfileError, load_profile

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"
TRACE = FIXTURES / "rocprofv3_kernel_trace.csv"
STATS = FIXTURES / "rocprofv3_kernel_stats.csv"
ROCM = FIXTURES / "torch_rocm_trace.json"
HEADER = "Kind,Agent_Id,Queue_Id,Stream_Id,Dispatch_Id,Kernel_Name,Start_Timestamp,End_Timestamp,VGPR_Count\n"


def error_of(**kwargs) -> ProfileError:
    with pytest.raises(ProfileError) as err:
        load_profile(**kwargs)
    return err.value


# ---- files and arguments ---------------------------------------------------------------

def test_missing_file_names_the_file(tmp_path: Path) -> None:
    err = error_of(path=tmp_path / "nope.csv")
    assert err.file == str(tmp_path / "nope.csv") and "no such file" in str(err)


def test_a_directory_lists_the_profiles_inside(tmp_path: Path) -> None:
    (tmp_path / "1234_kernel_trace.csv").write_text(TRACE.read_text())
    (tmp_path / "1234_agent_info.csv").write_text("x\n")
    err = error_of(path=tmp_path)
    assert "is a directory" in str(err) and "1234_kernel_trace.csv" in str(err)
    assert "agent_info" not in str(err)


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "k.csv"
    target.write_text(TRACE.read_text())
    real_open = pathlib.Path.open

    def deny(self, *args, **kwargs):
        if self == target:
            raise PermissionError(13, "Permission denied")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", deny)  # root ignores chmod, so simulate it
    err = error_of(path=target)
    assert "cannot open: Permission denied" in str(err) and err.file == str(target)


@pytest.mark.parametrize("kwargs", [{}, {"path": TRACE, "content": "x"}])
def test_exactly_one_of_path_or_content(kwargs: dict) -> None:
    assert "exactly one of path= or content=" in str(error_of(**kwargs))


@pytest.mark.parametrize("kwargs, where", [
    ({"content": 12}, "content"),
    ({"path": 12}, "path"),
    ({"content": "x", "format": "nsys"}, "format"),
    ({"content": "x", "top": 0}, "top"),
    ({"content": "x", "top": 2.5}, "top"),
    ({"content": "x", "min_pct": -1}, "min_pct"),
    ({"content": "x", "min_pct": 101}, "min_pct"),
    ({"content": "x", "min_pct": float("nan")}, "min_pct"),
    ({"content": "x", "max_bytes": 0}, "max_bytes"),
])
def test_bad_arguments(kwargs: dict, where: str) -> None:
    err = error_of(**kwargs)
    assert err.where == where and err.expected


def test_unknown_format_lists_the_known_ones() -> None:
    err = error_of(content="x", format="nsys")
    assert "rocprofv3_kernel_trace" in err.expected and "torch_trace" in err.expected


@pytest.mark.parametrize("text", ["", "\n\n   \n"])
def test_empty_input(text: str) -> None:
    assert "empty" in str(error_of(content=text))


def test_unrecognised_csv_says_what_is_accepted_without_echoing_it() -> None:
    err = error_of(content='"user","secret-token","x"\n"a","b",1\n')
    assert "unrecognised profile" in str(err) and "kernel_trace.csv" in err.expected and err.line == 1
    assert "secret-token" not in str(err)  # the input may be any file the caller can name


@pytest.mark.parametrize("header, needle", [
    ('"Domain","Function","Process_Id","Thread_Id","Correlation_Id"', "API trace"),
    ('"Correlation_Id","Dispatch_Id","Kernel_Name","Counter_Name","Counter_Value"', "counter_collection.csv"),
])
def test_other_rocprofv3_csv_files_name_the_file_to_pass(header: str, needle: str) -> None:
    err = error_of(content=header + "\n")
    assert needle in str(err) and "kernel_trace.csv" in str(err)


def test_error_carries_structured_fields() -> None:
    err = error_of(content=HEADER + "KERNEL_DISPATCH,1,1,1,1,k,10,x,3\n")
    assert isinstance(err, ValueError)
    assert err.as_dict() == {
        "error": "profile_error", "message": str(err), "reason": "'x' is not an integer", "file": "<content>",
        "line": 2, "where": "column End_Timestamp", "expected": "a non-negative integer",
    }
    assert str(err).startswith("<content>:2: 'x' is not an integer (at column End_Timestamp)")


# ---- CSV -------------------------------------------------------------------------------

def test_missing_columns_are_named(tmp_path: Path) -> None:
    p = tmp_path / "k.csv"
    p.write_text("Kind,Kernel_Name,Start_Timestamp\nKERNEL_DISPATCH,k,1\n")
    err = error_of(path=p, format="rocprofv3_kernel_trace")
    assert "missing column(s) End_Timestamp" in str(err) and err.line == 1 and err.file == str(p)
    err = error_of(content="Name,Calls\nk,1\n", format="kernel_stats")
    assert "missing column(s) TotalDurationNs" in str(err)


def test_truncated_csv_names_the_line(tmp_path: Path) -> None:
    text = TRACE.read_text()
    cut = text[: text.rindex("\n", 0, len(text) - 1) + 40]  # last row cut short
    p = tmp_path / "k.csv"
    p.write_text(cut)
    err = error_of(path=p)
    assert "looks truncated" in str(err) and err.line == cut.count("\n") + 1


def test_unterminated_quote_is_reported() -> None:
    rows = "KERNEL_DISPATCH,1,1,1,1,k,10,20,3\n" + 'KERNEL_DISPATCH,1,1,1,1,"void k<int>(int,10,20,3\n' + "x,y\n" * 3
    err = error_of(content=HEADER + rows)
    assert err.line == 3 and "truncated" in str(err)  # the line where the bad row starts


@pytest.mark.parametrize("row, line_no, column, reason", [
    ("KERNEL_DISPATCH,1,1,1,1,k,abc,20,3", 2, "Start_Timestamp", "'abc' is not an integer"),
    ("KERNEL_DISPATCH,1,1,1,1,k,10,,3", 2, "End_Timestamp", "empty cell"),
    ("KERNEL_DISPATCH,1,1,1,1,k,-10,20,3", 2, "Start_Timestamp", "negative value -10"),
    ("KERNEL_DISPATCH,1,1,1,1,k,10.5,20,3", 2, "Start_Timestamp", "'10.5' is not an integer"),
    ("KERNEL_DISPATCH,1,1,1,1,k,10,20,many", 2, "VGPR_Count", "'many' is not an integer"),
])
def test_wrong_types_name_the_row_and_column(row: str, line_no: int, column: str, reason: str) -> None:
    err = error_of(content=HEADER + row + "\n")
    assert (err.line, err.where, err.reason) == (line_no, f"column {column}", reason)


def test_end_before_start_is_refused() -> None:
    err = error_of(content=HEADER + "KERNEL_DISPATCH,1,1,1,1,k,10,20,3\nKERNEL_DISPATCH,1,1,1,2,k,30,25,3\n")
    assert err.line == 3 and "End_Timestamp 25 is before Start_Timestamp 30" in str(err)


def test_empty_kernel_name_is_refused() -> None:
    err = error_of(content=HEADER + 'KERNEL_DISPATCH,1,1,1,1,"",10,20,3\n')
    assert err.line == 2 and err.where == "column Kernel_Name"


def test_trace_with_only_other_kinds_has_no_kernels() -> None:
    err = error_of(content=HEADER + "MEMORY_COPY,1,1,1,,,10,20,\nMEMORY_COPY,1,1,1,,,30,40,\n")
    assert "no KERNEL_DISPATCH rows (only 2 MEMORY_COPY rows)" in str(err)


def test_header_only_has_no_kernels() -> None:
    assert "no KERNEL_DISPATCH rows" in str(error_of(content=HEADER))
    assert "no kernel rows" in str(error_of(content="Name,Calls,TotalDurationNs\n"))


def test_zero_duration_kernels_have_no_share() -> None:
    assert "zero duration" in str(error_of(content=HEADER + "KERNEL_DISPATCH,1,1,1,1,k,10,10,3\n"))


@pytest.mark.parametrize("row, reason", [
    ("k,0,100", "Calls is 0"),
    ("k,1,lots", "'lots' is not a non-negative number"),
    ("k,1,-5", "'-5' is not a non-negative number"),
    ("k,1,inf", "'inf' is not a non-negative number"),
])
def test_bad_stats_rows(row: str, reason: str) -> None:
    err = error_of(content="Name,Calls,TotalDurationNs\n" + row + "\n")
    assert err.reason == reason and err.line == 2


def test_api_stats_are_not_mistaken_for_kernel_stats() -> None:
    text = ('"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"\n'
            '"hipStreamCreateWithFlags",4,262497406,65624351.5,85.15,3991286,249121840,1.2e8\n'
            '"hipLaunchKernel",16,692734,43295.875,0.2247,1000,670044,167133.6\n')
    assert "hip_api_stats.csv" in str(error_of(content=text))


def test_non_utf8_bytes_are_refused() -> None:
    err = error_of(content=b"Kernel_Name,Start_Timestamp,End_Timestamp\n\xff\xfe,1,2\n")
    assert "not UTF-8" in str(err)


# ---- JSON ------------------------------------------------------------------------------

def test_truncated_json_names_line_and_column(tmp_path: Path) -> None:
    text = ROCM.read_text()
    p = tmp_path / "t.json"
    p.write_text(text[: len(text) // 2])
    err = error_of(path=p)
    assert "invalid JSON" in str(err) and "looks truncated" in str(err)
    assert err.line is not None and err.line > 1 and err.where.startswith("column ")


@pytest.mark.parametrize("text, needle", [
    ('[{"ph": "X"}, {"ph": "X"', "looks truncated"),
    ("[1, 2", "event is a int"),
    ("[[1]]", "event is a list"),
    ('{"events": []}', "no traceEvents key"),
    ('{"rocprofiler-sdk-tool": []}', "no kernel dispatch records"),
    ('{"traceEvents": {}}', "traceEvents is not a list"),
    ('{"traceEvents": []}', "no device kernels"),
    ("[]", "no device kernels"),
])
def test_bad_json_documents(text: str, needle: str) -> None:
    assert needle in str(error_of(content=text))


@pytest.mark.parametrize("text, needle", [("42", "top-level JSON is a int"), ('"trace"', "top-level JSON is a str")])
def test_json_scalars_when_the_format_is_forced(text: str, needle: str) -> None:
    assert "unrecognised profile" in str(error_of(content=text))
    assert needle in str(error_of(content=text, format="torch_trace"))


@pytest.mark.parametrize("event, where", [
    ('"kernel"', "traceEvents[1]"),
    ('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": "2"}', "traceEvents[1]"),
    ('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": -2}', "traceEvents[1]"),
    ('{"ph": "X", "cat": "kernel", "name": "k", "ts": true, "dur": 2}', "traceEvents[1]"),
    ('{"ph": "X", "cat": "kernel", "ts": 1.0, "dur": 2}', "traceEvents[1].name"),
    ('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": 2, "args": [1]}', "traceEvents[1].args"),
    ('{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": "now", "dur": 2}', "traceEvents[1]"),
])
def test_bad_events_name_their_index(event: str, where: str) -> None:
    good = '{"ph": "X", "cat": "kernel", "name": "ok", "ts": 0.0, "dur": 1.0}'
    err = error_of(content='{"traceEvents": [' + good + ", " + event + "]}")
    assert err.where == where and err.expected


# ---- size limits and gzip --------------------------------------------------------------

def test_file_over_the_limit_says_how_to_raise_it() -> None:
    err = error_of(path=TRACE, max_bytes=1000)
    text = str(err)
    assert f"is {TRACE.stat().st_size} bytes" in text and "limit of 1000 bytes" in text
    assert "max_bytes=" in text and MAX_BYTES_ENV in text
    assert load_profile(TRACE, max_bytes=TRACE.stat().st_size).kernel_count == 10


def test_limit_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_BYTES_ENV, "2000")
    assert "limit of 2000 bytes" in str(error_of(path=ROCM))
    assert load_profile(ROCM, max_bytes=10**8).format == "torch_trace"  # the argument wins
    monkeypatch.setenv(MAX_BYTES_ENV, "lots")
    assert error_of(path=ROCM).where == MAX_BYTES_ENV


def test_content_over_the_limit() -> None:
    assert "limit of 100 bytes" in str(error_of(content=TRACE.read_text(), max_bytes=100))
    assert "limit of 100 bytes" in str(error_of(content=TRACE.read_bytes(), max_bytes=100))


def test_gzip_bomb_is_stopped_by_the_decompressed_size(tmp_path: Path) -> None:
    bomb = tmp_path / "big.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b" " * 5_000_000 + b"]"))
    assert bomb.stat().st_size < 50_000
    err = error_of(path=bomb, max_bytes=1_000_000)
    assert "decompressed content exceeds the limit" in str(err) and "1000000 bytes" in str(err)


def test_truncated_gzip_is_reported(tmp_path: Path) -> None:
    packed = gzip.compress(ROCM.read_bytes())
    p = tmp_path / "t.json.gz"
    p.write_bytes(packed[: len(packed) // 2])
    assert "gzip stream is corrupt or truncated" in str(error_of(path=p))
    csv_packed = gzip.compress(TRACE.read_bytes())
    assert "gzip" in str(error_of(content=csv_packed[: len(csv_packed) - 20]))


# ---- robustness: any damage gives a ProfileError, never another exception -----------------

@pytest.mark.parametrize("source", [TRACE, STATS, ROCM])
def test_truncation_anywhere_never_escapes_as_another_exception(source: Path) -> None:
    data = source.read_bytes()
    rng = random.Random(0)
    cuts = sorted({rng.randrange(1, len(data)) for _ in range(40)})
    for cut in cuts:
        try:
            load_profile(content=data[:cut])
        except ProfileError:
            pass


@pytest.mark.parametrize("source", [TRACE, STATS, ROCM])
def test_corrupted_bytes_never_escape_as_another_exception(source: Path) -> None:
    data = bytearray(source.read_bytes())
    rng = random.Random(1)
    for _ in range(40):
        damaged = bytearray(data)
        for _ in range(5):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            load_profile(content=bytes(damaged))
        except ProfileError:
            pass


def test_json_with_wrong_shapes_of_args_does_not_crash() -> None:
    doc = json.loads(ROCM.read_text())
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "cpu_op":
            ev["args"]["Input Dims"] = "oops"
            ev["args"]["Input type"] = 5
            ev["args"]["External id"] = "x"
    s = load_profile(content=json.dumps(doc))
    assert all(h.hotspot.shape is None for h in s.hotspots)


# ---- new inputs: binary formats, stdin, event order --------------------------------------------

def test_binary_profiles_name_the_converter() -> None:
    pftrace = b"\x0a\x8d\x02\x12\x0a\x10" + bytes(range(200))  # a Perfetto trace starts with a protobuf field
    for data in (pftrace, b"PK\x03\x04" + b"\x00" * 100, gzip.compress(pftrace)):
        err = error_of(content=data)
        assert "rocpd convert" in str(err) and "--output-format csv" in str(err)
        assert "\n" not in str(err)


def test_events_out_of_order_read_like_the_ordered_trace() -> None:
    doc = json.loads(ROCM.read_text())
    ordered = load_profile(content=json.dumps(doc), top=100)
    shuffled = dict(doc, traceEvents=random.Random(3).sample(doc["traceEvents"], len(doc["traceEvents"])))
    out_of_order = load_profile(content=json.dumps(shuffled), top=100)
    key = lambda s: sorted((h.full_name, h.calls, h.total_ns, str(h.hotspot.shape), h.hotspot.label,  # noqa: E731
                            tuple(sorted(h.hotspot.segment_kernels))) for h in s.hotspots)
    assert key(out_of_order) == key(ordered)
    rows = TRACE.read_text().splitlines()
    mixed = "\n".join([rows[0], *random.Random(4).sample(rows[1:], len(rows) - 1)]) + "\n"
    a, b = load_profile(TRACE, top=100), load_profile(content=mixed, top=100)
    assert {h.hotspot.op_name: h.hotspot.segment_kernels for h in a.hotspots} == \
        {h.hotspot.op_name: h.hotspot.segment_kernels for h in b.hotspots}


@pytest.mark.parametrize("payload, needle", [
    (lambda: gzip.compress(ROCM.read_bytes()), None),  # gzip on stdin reads like the file
    (lambda: gzip.compress(ROCM.read_bytes())[:3000], "gzip stream is corrupt or truncated"),
    (lambda: b"\x00\x01binary", "cannot read"),
    (lambda: b"", "empty"),
])
def test_stdin_takes_bytes_and_bad_input_is_one_line(payload, needle, capsys, monkeypatch) -> None:
    import io
    import sys

    from skill_server.cli.entry import main
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload())))
    rc = main(["match-profile", "-", "--gen", "gfx950", "--json"])
    out, err = capsys.readouterr()
    if needle is None:
        assert rc == 0 and json.loads(out)["format"] == "torch_trace"
    else:
        assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_stdin_over_the_limit_is_not_read_whole(capsys, monkeypatch) -> None:
    import io
    import sys

    from skill_server.cli.entry import main
    stream = io.BytesIO(b"x" * 5000)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stream))
    assert main(["match-profile", "-", "--max-bytes", "1000"]) == 2
    assert stream.tell() <= 1001 and "limit of 1000 bytes" in capsys.readouterr().err
