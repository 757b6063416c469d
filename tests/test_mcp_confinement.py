"""Files a client names, through the real MCP client (in memory): only regular files under
the operator's roots are read, and no error quotes a file. Inline uploads replace paths."""
from __future__ import annotations

import base64
import gzip
import os
import sys

import pytest
from mcp_support import PROFILES, build, text, with_client

SECRET = "SECRET-3f9a1c77-do-not-echo"
TRACE = PROFILES / "rocprofv3_kernel_trace.csv"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A root holding a real trace, files that are not profiles, and ways out of the root."""
    root = tmp_path_factory.mktemp("workspace")
    outside = tmp_path_factory.mktemp("outside")
    (root / "trace.csv").write_bytes(TRACE.read_bytes())
    (root / "trace.csv.gz").write_bytes(gzip.compress(TRACE.read_bytes()))
    (root / "passwd.csv").write_text(f"root:{SECRET}:0:0:root:/root:/bin/bash\n")
    (root / "header.csv").write_text(f"user,password,{SECRET}\nalice,hunter2,x\n")
    (root / "keys.json").write_text('{"%s": "value", "other": 1}\n' % SECRET)
    (root / "first.json.gz").write_bytes(gzip.compress(f"{SECRET},a,b\n".encode()))
    (root / ".env").mkdir()
    (root / ".env" / "trace.csv").write_bytes(TRACE.read_bytes())
    (root / "notes.txt").write_text(SECRET)
    (outside / "trace.csv").write_bytes(TRACE.read_bytes())
    (root / "escape.csv").symlink_to(outside / "trace.csv")
    (root / "outdir").symlink_to(outside, target_is_directory=True)
    (root / "etc.csv").symlink_to("/etc/passwd")
    os.mkfifo(root / "fifo.csv")
    return root, outside


@pytest.fixture(scope="module")
def server(workspace):
    return build(file_roots=(workspace[0],))


def call(server, name, args):
    return with_client(server, lambda c: c.call_tool(name, args))


def test_a_trace_under_the_root_is_read_by_relative_or_absolute_path(server, workspace):
    root, _ = workspace
    rel = call(server, "match_profile", {"path": "trace.csv", "top": 3})
    absolute = call(server, "match_profile", {"path": str(root / "trace.csv.gz"), "top": 3})
    assert not rel.is_error, text(rel)
    assert not absolute.is_error, text(absolute)
    assert rel.structured_content["hotspots"] == absolute.structured_content["hotspots"]


@pytest.mark.parametrize("path,why", [
    ("/etc/passwd", "outside the folders"),
    ("/proc/self/environ", "outside the folders"),
    ("/proc/self/fd/0", "outside the folders"),
    ("/dev/zero", "outside the folders"),
    ("../../../../etc/passwd", "outside the folders"),
    ("escape.csv", "outside the folders"),  # a symlink out of the root
    ("outdir/trace.csv", "outside the folders"),  # through a symlinked folder
    ("etc.csv", "outside the folders"),
    (".env/trace.csv", "hidden file or folder"),
    ("notes.txt", "must be named"),
    ("fifo.csv", "not a regular file"),  # opening a FIFO would block: refused without blocking
    ("missing.csv", "no such file"),
    ("", "expected a file path"),
    ("a\x00b.csv", "not a usable file path"),
])
def test_paths_outside_the_roots_or_not_regular_profile_files_are_refused(server, path, why):
    result = call(server, "match_profile", {"path": path})
    assert result.is_error and why in text(result), text(result)
    assert "root:" not in text(result) and SECRET not in text(result)


def test_the_outside_file_itself_is_readable_so_the_refusal_is_the_roots(workspace):
    """The same paths work with the root that holds them: the refusal above is confinement."""
    _, outside = workspace
    result = call(build(file_roots=(outside,)), "match_profile", {"path": str(outside / "trace.csv"), "top": 1})
    assert not result.is_error, text(result)


@pytest.mark.parametrize("name", ["passwd.csv", "header.csv", "keys.json", "first.json.gz"])
def test_errors_about_a_file_never_quote_it(server, name):
    result = call(server, "match_profile", {"path": name})
    assert result.is_error
    message = text(result)
    assert name in message  # names the file, so the client knows which
    assert SECRET not in message and "hunter2" not in message and "password" not in message, message


def test_inline_errors_still_explain_what_was_expected(server):
    result = call(server, "match_profile", {"content": "not,a,profile\n1,2,3\n"})
    assert result.is_error and "unrecognised profile" in text(result) and "<content>" in text(result)


def test_no_roots_means_inline_content_only():
    result = call(build(file_roots=()), "match_profile", {"path": str(TRACE)})
    assert result.is_error and "content_base64" in text(result)


def test_inline_upload_as_text_or_gzip_base64_matches_the_path(server):
    data = TRACE.read_bytes()
    by_path = call(server, "match_profile", {"path": "trace.csv", "top": 3})
    by_text = call(server, "match_profile", {"content": data.decode(), "top": 3})
    by_b64 = call(server, "match_profile", {"content_base64": base64.b64encode(gzip.compress(data)).decode(), "top": 3})
    assert not by_b64.is_error, text(by_b64)
    assert by_path.structured_content["hotspots"] == by_text.structured_content["hotspots"] \
        == by_b64.structured_content["hotspots"]


@pytest.mark.parametrize("args,expect", [
    ({"content_base64": "not base64!"}, "not valid base64"),
    ({"content": "a", "content_base64": "YQ=="}, "not both"),
    ({"content": "x" * 70_000}, "upload limit"),
    ({"content_base64": base64.b64encode(b"x" * 70_000).decode()}, "upload limit"),
])
def test_uploads_are_capped_and_checked(args, expect):
    result = call(build(max_upload_bytes=64 << 10), "match_profile", args)
    assert result.is_error and expect in text(result), text(result)
    assert len(text(result)) < 1000


def test_a_gzip_bomb_stops_at_the_profile_limit():
    bomb = gzip.compress(b"Kernel_Name,Start_Timestamp,End_Timestamp\n" + b"0" * (8 << 20))
    result = call(build(max_profile_bytes=1 << 20), "match_profile", {"content_base64": base64.b64encode(bomb).decode()})
    assert result.is_error and "limit" in text(result), text(result)


# ------------------------------------------------------------------ run_verifier
@pytest.fixture(scope="module")
def exec_server(workspace):
    root, _ = workspace
    (root / "cand.py").write_text("def build(inputs, outputs):\n    return lambda: None\n")
    return build(file_roots=(root,), allow_exec_tools=True)


def verify(server, **args):
    return call(server, "run_verifier", {"card_id": "flydsl_fp8_blockscale_gemm", **args})


@pytest.mark.parametrize("candidate,why", [
    ("/etc/passwd:build", "outside the folders"),
    (f"{sys.executable}:build", "outside the folders"),
    ("../outside/x.py:build", "outside the folders"),
    ("os:system", "not by module"),
    ("subprocess:run", "not by module"),
    ("missing.py:build", "does not exist"),
])
def test_candidate_files_are_confined_and_modules_are_not_importable_by_name(exec_server, candidate, why):
    result = verify(exec_server, candidate=candidate)
    assert result.is_error and why in text(result), text(result)


@pytest.mark.parametrize("option", [{"python": "/bin/sh"}, {"plot_path": "/tmp/x.png"},
                                    {"rocprof_trace": "/etc/passwd"}, {"secret_seed": False},
                                    {"hidden_shapes": False}, {"profile": False}, {"max_error_ratio": 1e9},
                                    {"forbid_baseline_kernels": False}, {"peak_tflops": 1e9},
                                    {"not_an_option": 1}])
def test_a_client_cannot_set_an_interpreter_output_path_or_loosen_the_rules(exec_server, option):
    result = verify(exec_server, candidate="arm:torch_dequant", options=option)
    assert result.is_error and "cannot be set by a client" in text(result), text(result)


def test_effort_knobs_pass_and_a_confined_candidate_reaches_the_verifier(exec_server):
    """Both reach the verifier's own argument checks (an unknown arm / baseline), before any run."""
    by_arm = verify(exec_server, candidate="arm:no_such_arm", options={"rounds": 7, "warmup_ms": 30.0})
    by_file = verify(exec_server, candidate="cand.py:build", baseline="no_such_baseline")
    assert by_arm.is_error and "no_such_arm" in text(by_arm) and "cannot be set" not in text(by_arm)
    assert by_file.is_error and "no_such_baseline" in text(by_file), text(by_file)


def test_every_client_option_is_a_real_verifier_option():
    from skill_server.policy.client_policy import CLIENT_VERIFY_OPTIONS
    from verifiers.options import VerifyOptions

    assert CLIENT_VERIFY_OPTIONS <= set(VerifyOptions.model_fields)
    assert not CLIENT_VERIFY_OPTIONS & {"python", "plot_path", "rocprof_trace", "rocprof_baseline_trace"}
