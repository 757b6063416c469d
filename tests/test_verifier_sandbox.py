"""The arm sandbox (verifiers/arms/sandbox.py): a candidate cannot reach the server's secrets,
files, other runs' caches, the network or the judge.

Real processes: a real zygote forks arms with the judge's own policy builder, and the
candidate (tests/fixtures/candidates/escape_attempts.py) tries each escape in ``build``.
A refused attempt is harmless (the candidate then computes honestly); one that works
raises ``ESCAPED``. With the sandbox hook removed from the zygote every case here fails
(bench/verifier_defence_off.py, "arm sandbox off").
"""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from verifiers.arms import sandbox
from verifiers.arms.handle import ArmFailure, ArmHandle, Zygote
from verifiers.ipc.shared_buffers import allocate
from verifiers.launch import bytecode

from verifier_support import FIXTURES, PARITY_ONLY, PROBLEM_FILE, candidate

pytestmark = pytest.mark.skipif(not sandbox.support().active, reason=f"no Landlock here: {sandbox.support().reason}")
ATTEMPTS = FIXTURES / "candidates" / "escape_attempts.py"
REPO = Path(__file__).resolve().parent.parent
PLANTED = [REPO / "verifiers" / "_planted_by_candidate.py"]


class World:
    """A state folder with a key and a ledger, a fake caller HOME, the verifier's baseline
    compile cache, a TCP and an abstract Unix listener, and a zygote."""

    def __init__(self, root: Path, mp: pytest.MonkeyPatch) -> None:
        import sysconfig

        self.root, self.state, self.home = root, root / "state", root / "home"
        self.state.mkdir()
        self.home.mkdir()
        self.key = os.urandom(32)
        (self.state / "signing.key").write_bytes(self.key)
        (self.state / "ledger.sqlite").write_bytes(b"SQLite format 3\0")
        mp.setenv("SKILL_SERVER_CACHE", str(root / "cache"))
        self.jit = sandbox.baseline_cache()
        self.bytecode = bytecode.persisted_folder()  # the verifier's disk bytecode cache (under the cache folder)
        assert self.bytecode is not None and self.bytecode.is_relative_to(root / "cache")
        self.bytecode.mkdir(parents=True)
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.tcp.setblocking(False)
        self.abstract_name = f"verifier-sandbox-test-{os.getpid()}-{os.urandom(4).hex()}"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.abstract_name)
        self.unix.listen(4)
        self.unix.setblocking(False)
        for key, value in {"STATE": self.state, "HOME": self.home, "JIT": self.jit, "BYTECODE": self.bytecode,
                           "PORT": self.tcp.getsockname()[1],
                           "ABSTRACT": self.abstract_name}.items():
            mp.setenv(f"VERIFIER_TEST_{key}", str(value))
        self.planted = PLANTED + [Path(sysconfig.get_paths()["purelib"]) / "_planted_by_candidate.pth"]
        self.signals = 0
        signal.signal(signal.SIGWINCH, self._count)
        self.work = root / "work"
        self.work.mkdir()
        self.sys_path = [p for p in sys.path if p]
        self.zygote = Zygote(self.work / "zygote", profile=False, triton=False, sys_path=self.sys_path)
        self.zygote.wait_ready(120)

    def _count(self, *_: object) -> None:
        self.signals += 1

    def secrets(self) -> list[str]:
        return [str(self.state), str(self.work), str(self.root / "cache")]

    def arm(self, function: str, trusted: bool = False) -> tuple[ArmHandle, str | None]:
        """Fork a confined arm, load ``escape_attempts.py:function``, build it on real
        shared buffers; (handle, the arm's error or None)."""
        scratch = Path(tempfile.mkdtemp(prefix="arm-", dir=self.work))
        prefix = Path(tempfile.mkdtemp(prefix="prefix-", dir=self.work))
        policy = sandbox.arm_policy("baseline" if trusted else "candidate", scratch, prefix, trusted,
                                    [ATTEMPTS.parent, Path(PROBLEM_FILE).parent], self.sys_path, False, self.secrets())
        handle = ArmHandle(function, "candidate", self.zygote, prefix, write_bytecode=False, sandbox=policy.model_dump())
        handle.request({"op": "hello", "role": "candidate", "sys_path": self.sys_path, "problem": PROBLEM_FILE,
                        "builder": {"kind": "file", "target": str(ATTEMPTS), "function": function},
                        "device": "cpu", "profile": False, "cpu_threads": 1}, 120)
        a, b = torch.randn(8, 8), torch.randn(8, 8)
        bufs = allocate({"a": a, "b": b}, {"c": torch.empty(8, 8)}, torch.device("cpu"))
        bufs.inputs["a"].copy_(a)
        bufs.inputs["b"].copy_(b)
        try:
            handle.request({"op": "build", "id": "s1", "set": bufs.wire}, 60, bufs.fds)
            handle.request({"op": "call", "id": "s1"}, 60)
        except ArmFailure as exc:
            return handle, exc.reason
        finally:
            bufs.close_descriptors()
        assert torch.allclose(bufs.outputs["c"], a @ b, atol=1e-5)  # the buffers and the socket still work
        return handle, None

    def harm(self) -> list[str]:
        """What an escape left behind."""
        out = [f"planted {p}" for p in self.planted if p.exists()]
        out += [f"wrote {p}" for p in self.home.rglob("*") if p.is_file()]
        out += [f"planted {p}" for p in self.jit.rglob("*") if p.is_file()] if self.jit.exists() else []
        out += [f"planted {p}" for p in self._untrusted_bytecode()]
        if (self.state / "ledger.sqlite").read_bytes() != b"SQLite format 3\0":
            out.append("ledger changed")
        for name, listener in (("tcp", self.tcp), ("abstract unix", self.unix)):
            try:
                listener.accept()[0].close()
                out.append(f"{name} connection accepted")
            except BlockingIOError:
                pass
        if self.signals:
            out.append(f"{self.signals} signal(s) reached the judge")
        return out

    def _untrusted_bytecode(self) -> list[Path]:
        """Files in the verifier's persisted bytecode cache that it did not write itself: the
        judge keeps its trusted baselines' bytecode there (``verifiers.launch.bytecode``), each
        file listed in the manifest with its digest; anything else, an unlisted file, a file whose
        digest is not the manifest's, or a manifest that is no longer the judge's JSON, was planted."""
        import json

        out = []
        for manifest_path in self.bytecode.rglob(bytecode.MANIFEST):
            try:
                listed = json.loads(manifest_path.read_text())
                assert isinstance(listed, dict)
            except (ValueError, AssertionError):
                out.append(manifest_path)
        for path in self.bytecode.rglob("*"):
            if not path.is_file() or path.name in (bytecode.MANIFEST, ".lock"):
                continue
            folder = next((p for p in path.parents if (p / bytecode.MANIFEST).is_file()), None)
            listed = json.loads((folder / bytecode.MANIFEST).read_text()) if folder is not None else {}
            rel = str(path.relative_to(folder)) if folder is not None else ""
            if not isinstance(listed, dict) or listed.get(rel) != bytecode._digest(path):
                out.append(path)
        return out

    def close(self) -> None:
        self.zygote.close()
        self.tcp.close()
        self.unix.close()
        signal.signal(signal.SIGWINCH, signal.SIG_DFL)
        for p in self.planted:
            p.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    w = World(tmp_path_factory.mktemp("sandbox"), mp)
    yield w
    w.close()
    mp.undo()


@pytest.mark.parametrize("attempt", ["read_key", "write_ledger", "write_project", "write_site_packages",
                                     "write_home_cache", "plant_baseline_cache", "plant_persisted_bytecode", "tcp_connect", "abstract_unix",
                                     "judge_memory", "ptrace_judge", "signal_judge"])
def test_an_escape_attempt_from_a_confined_arm_is_refused_and_harmless(world, attempt):
    handle, error = world.arm(attempt)
    handle.close()  # the arm's log arrives through a pipe: read it once the arm has ended and it is drained
    assert handle.sandbox.get("abi", 0) >= 6 and handle.sandbox.get("reason") is None, handle.sandbox
    assert error is None, error
    assert world.key.hex()[:12] not in handle.log_tail()
    assert f"{attempt}: refused" in handle.log_tail(), handle.log_tail()
    assert world.harm() == []


def test_a_trusted_baseline_arm_writes_its_compile_cache_and_a_candidate_gets_its_own():
    with tempfile.TemporaryDirectory() as tmp:
        scratch, prefix = Path(tmp) / "s", Path(tmp) / "p"
        base = sandbox.arm_policy("baseline", scratch, prefix, True, [], [], False, [tmp])
        cand = sandbox.arm_policy("candidate", scratch, prefix, False, [], [], False, [tmp])
    for var in ("TRITON_CACHE_DIR", "FLYDSL_RUNTIME_CACHE_DIR", "CUDA_CACHE_PATH", "XDG_CACHE_HOME"):
        assert Path(base.env[var]).is_relative_to(sandbox.baseline_cache())
        assert Path(cand.env[var]).is_relative_to(scratch)
    writes = {r.path for r in cand.rules if r.access == "write"}
    assert writes == {str(scratch.resolve())}
    assert str(sandbox.baseline_cache()) in {r.path for r in base.rules if r.access == "write"}


def test_a_read_root_holding_the_state_folder_is_granted_around_it(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "var").mkdir()
    policy = sandbox.arm_policy("candidate", tmp_path / "s", tmp_path / "p", False, [tmp_path], [], False,
                                [str(tmp_path / "var")])
    granted = {r.path for r in policy.rules}
    assert str(tmp_path / "code") in granted and str(tmp_path) not in granted
    assert not any(Path(g).is_relative_to(tmp_path / "var") for g in granted)
    with pytest.raises(sandbox.SandboxError, match="holds"):
        sandbox.arm_policy("baseline", tmp_path, tmp_path / "p", True, [], [], False, [str(tmp_path / "var")])


def test_a_whole_verification_confines_the_candidate_and_says_so(world, monkeypatch):
    from verifiers.api import verify
    from verifiers.options import VerifyOptions

    monkeypatch.setenv("SKILL_SERVER_STATE_DIR", str(world.state))
    report = verify(PROBLEM_FILE, f"{ATTEMPTS}:everything", shapes=["32x32x32"], options=VerifyOptions(**PARITY_ONLY))
    shape = report.shape_reports[0]
    assert shape.stages["parity"].status == "PASS", shape.stages
    assert report.provenance.sandbox == sandbox.support().text() and "fs, net, scope" in report.provenance.sandbox
    assert f"sandbox: {report.provenance.sandbox}" in report.summary()
    assert "tcp_connect: refused" in shape.log_tail and "read_key: refused" in shape.log_tail
    assert world.harm() == []


_SECCOMP_NO_LANDLOCK = r"""
import ctypes, struct, sys
# a seccomp filter that makes the Landlock system calls fail with ENOSYS, as on a kernel without it
ins = [(0x20, 0, 0, 0), (0x15, 3, 0, 444), (0x15, 2, 0, 445), (0x15, 1, 0, 446), (0x06, 0, 0, 0x7fff0000),
       (0x06, 0, 0, 0x00050000 | 38)]
prog = b"".join(struct.pack("HBBI", *i) for i in ins)
buf = ctypes.create_string_buffer(prog)
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(Prog(len(ins), ctypes.addressof(buf))), 0, 0) == 0
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from verifiers.api import verify
from verifiers.options import VerifyOptions
from verifier_support import PARITY_ONLY
report = verify(sys.argv[2], sys.argv[3], shapes=["32x32x32"], options=VerifyOptions(**PARITY_ONLY))
print(report.model_dump_json())
"""


def _without_landlock(env: dict[str, str], cand: str) -> object:
    from verifiers.report import VerificationReport

    out = subprocess.run([sys.executable, "-c", _SECCOMP_NO_LANDLOCK, str(REPO), PROBLEM_FILE, cand],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return VerificationReport.model_validate_json(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_without_landlock_the_run_warns_and_the_operator_setting_refuses():
    env = {**os.environ, "PYTHONPATH": str(REPO), "SKILL_SERVER_WARM_JUDGE": "0"}  # one run per process: no template
    report = _without_landlock({**env, sandbox.REQUIRE_ENV: "1"}, candidate("honest_bmm"))
    assert report.verdict == "ERROR"
    assert "a sandbox is required" in report.shape_reports[0].stages["load"].reason
    assert "no Landlock (ENOSYS)" in report.shape_reports[0].stages["load"].reason
    report = _without_landlock(env, candidate("honest_bmm"))
    assert report.shape_reports[0].stages["parity"].status == "PASS"
    assert report.provenance.sandbox == "unavailable: the kernel has no Landlock (ENOSYS)"
    assert any(f.code == "sandbox" and f.severity == "warn" for f in report.flags)
    assert "sandbox: unavailable" in report.summary()


def test_a_verified_ledger_record_keeps_what_confined_the_run(tmp_path):
    import json

    from ledger_support import BLOCKSCALE, GFX950, make_project, report_platform, shape_report, verification_report

    from skill_server.service.facade import SkillService

    svc = SkillService(make_project(tmp_path), check_interval=0.0, ledger_path=tmp_path / "var" / "ledger.sqlite")
    rep = verification_report(BLOCKSCALE, [shape_report("4096x2048x7168", 1.3, baseline="ck_blockscale")],
                              candidate="arm:flydsl_4wave", **report_platform(GFX950))
    rep.provenance.sandbox = "landlock ABI 7: fs, net, scope"
    receipt = svc.record_result(report=json.loads(svc.signed_envelope(rep).model_dump_json()), recorded_by="agent")
    [row] = svc.get_validation_history(BLOCKSCALE).results
    assert receipt.level == "verified" and row.evidence.level == "verified"
    assert row.notes.endswith("sandbox: landlock ABI 7: fs, net, scope")
    assert str((tmp_path / "var").resolve()) in sandbox.secret_paths()  # the ledger's folder is no arm's to read


def test_the_cli_and_the_server_take_the_require_sandbox_setting():
    from skill_server.cli.entry import build_parser
    from skill_server.cli.serve import ServeArgs
    from skill_server.cli.verify_support import VerifyArgs
    from skill_server.settings import Settings

    parser, env = build_parser(), Settings.from_environ({})
    args = parser.parse_args(["verify", "card", "--candidate", "x.py:build", "--require-sandbox"])
    assert VerifyArgs.from_namespace(args, env).verify_options().require_sandbox is True
    assert ServeArgs.from_namespace(parser.parse_args(["serve", "--require-sandbox"]), env).require_sandbox is True


CONFINED_IMPORT = r"""
import os, subprocess, sys
from pathlib import Path
from verifiers import locations
from verifiers.arms import landlock
version, why = landlock.abi()
if why:
    print("SKIP", why); sys.exit(0)
links = Path(sys.argv[1])
locations.child_pythonpath(None, links)  # made before confinement, as a compile's temp folder is
grant = [(str(locations.CODE_ROOT / "verifiers"), landlock.READ_EXEC), (sys.base_prefix, landlock.READ_EXEC),
         (os.path.realpath(sys.executable), landlock.READ_EXEC), (str(links), landlock.READ_EXEC),
         ("/usr", landlock.READ_EXEC), ("/lib", landlock.READ_EXEC), ("/lib64", landlock.READ_EXEC),
         ("/etc", landlock.READ), ("/proc", landlock.READ), ("/dev/null", landlock.READ)]
landlock.restrict(version, [(p, r) for p, r in grant if os.path.exists(p)])
for label, path in (("checkout", str(locations.CODE_ROOT)), ("links", locations.child_pythonpath(None, links))):
    got = subprocess.run([sys.executable, "-S", "-c", "import verifiers.judge.stats; print(verifiers.__file__)"],
                         env={"PYTHONPATH": path, "PATH": os.environ.get("PATH", "")}, capture_output=True, text=True)
    print(label, got.returncode, (got.stdout or got.stderr).strip().splitlines()[-1:])
"""


def test_a_confined_arms_subprocess_imports_the_checkout_through_package_links(tmp_path):
    """A confined arm may read the checkout's packages but not list its root (the state folder
    may lie there), and Python finds no module in a path entry it cannot list: the emulated
    arms' compile subprocess failed that way from a plain checkout. ``child_pythonpath`` with
    a links folder puts one symlink per package on the path instead."""
    from verifiers import locations

    if locations.INSTALLED:
        pytest.skip("an installed package is on the interpreter's own path")
    proc = subprocess.run([sys.executable, "-c", CONFINED_IMPORT, str(tmp_path / "pyroot")], capture_output=True,
                          text=True, cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": str(locations.CODE_ROOT)})
    out = proc.stdout + proc.stderr
    if out.startswith("SKIP"):
        pytest.skip(out)
    lines = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    assert lines["links"].startswith("0"), out  # imported through the links
    assert not lines["checkout"].startswith("0"), out  # the checkout itself on the path: nothing found
