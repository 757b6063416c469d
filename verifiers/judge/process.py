"""The judge process: inputs, oracle, comparisons, statistics, verdict and report.

    python -I -X pycache_prefix=<fresh dir> -c "...verifiers.launch.judge_start.fresh()" <repo root>

or forked from a warm template (``verifiers.launch.judge_start``), started by ``verifiers.launch.runner``,
which writes a preamble and then ``{"key": ..., "job": ..., "env": ...}`` on its stdin.
The judge loads the harness, torch and the problem (inputs, oracle; never an arm's code,
never the candidate), makes itself a child subreaper, and starts the arm processes
(``verifiers.arms.process``), each with a fresh bytecode prefix:

1. baseline A (and, when timing, a second baseline A' loading side by side with it), both
   trusted and both loaded before any candidate code exists: the source files A loaded (A'
   loads the same ones) join the file manifest the caller re-hashes after the run;
2. a short-lived *probe* imports the candidate and checks the function exists (bad input
   FAILs in seconds), and must be gone before anything is timed;
3. per visible shape: the baseline's parity references (every case, hidden shapes'
   cases included), then A's warm-up, timer floor and the A/A control -- all while no
   candidate process exists; then a fresh candidate process C: its parity cases
   (hidden ones interleaved), the A/B rounds; then C exits.
4. profiling, per shape after its A/B rounds, in processes that are never timed
   (``verifiers.judge.profiler_arms``): the baseline's profiler process, loaded beside A,
   and the shape's candidate profiler process, which gets the candidate's code only now.

Nothing in an arm's argv or environment says which case is hidden or what the secret
seed is: the arms get buffers and ``build`` / ``call`` commands, nothing else. The
results go back on the authenticated channel (``verifiers.ipc.channel``).
"""
from __future__ import annotations

import gc
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from verifiers import locations
from verifiers.arms import sandbox
from verifiers.arms.env import arm_environment
from verifiers.arms.handle import ArmFailure, ArmHandle, Zygote
from verifiers.arms.sandbox import SandboxStatus
from verifiers.gfx950.emulator.verifier_arms import builder_kind
from verifiers.hw import bounds
from verifiers.hw.device import Flusher, measure_copy_bandwidth, open_device, set_cpu_threads
from verifiers.hw.neighbours import NeighbourWatch
from verifiers.ipc import channel
from verifiers.ipc.job import JudgeJob
from verifiers.judge.blame import Blame
from verifiers.judge.parity import baseline_ref, candidate_case, plan_for, rules_from, summarize
from verifiers.judge.profiler_arms import ProfilerArm
from verifiers.judge.profiling import candidate_signature, judge_traces, profile_arms
from verifiers.judge.session import Arm, Session, TreeWatch
from verifiers.judge.timing import TimingStage
from verifiers.launch import files, procwatch
from verifiers.problem import EMULATED_PLATFORM as EMULATED, for_platform, load_problem
from verifiers.provenance import Provenance, runtime_versions
from verifiers.report import HIDDEN_ONLY_STAGES, STAGES, Flag, ShapeReport, StageResult, shape_verdict

#: why timing, signature and segment do not run on the gfx950-emulated platform
EMULATED_NO_TIMING = "emulated: no timing"

REPO_ROOT = locations.CODE_ROOT
SANDBOX_HINT = "SKILL_SERVER_REQUIRE_SANDBOX=1 or --require-sandbox"


class Progress:
    def __init__(self, writer: channel.Writer, total: int) -> None:
        self.writer, self.done, self.total = writer, 0, total

    def step(self, message: str, advance: int = 1) -> None:
        self.done = min(self.done + advance, self.total)
        self.writer.send("progress", {"done": self.done, "total": self.total, "message": message})

    def note(self, message: str) -> None:
        self.step(message, 0)


class Judge:
    def __init__(self, job: JudgeJob, writer: channel.Writer, zygote: Any = None) -> None:
        self.job, self.writer = job, writer
        self.forked_zygote = zygote  # forked by ``main`` before the job was read; set up in ``run``
        self.reports: dict[str, ShapeReport] = {}
        self.arms: list[Any] = []
        self.tmp = Path(job.work_dir)
        self.handles: list[Any] = []

    # -- helpers ---------------------------------------------------------------------
    def stage(self, label: str, name: str, status: str, reason: str, seconds: float = 0.0) -> None:
        self.reports[label].stages[name] = StageResult(name=name, status=status, reason=reason[:4000], seconds=seconds)

    def flag(self, label: str, code: str, severity: str, message: str) -> None:
        self.reports[label].flags.append(Flag(code=code, severity=severity, message=message[:2000], shape=label))

    def skip_rest(self, labels: list[str], reason: str, stages: tuple[str, ...] = ("parity", "signature", "segment", "timing")) -> None:
        for label in labels:
            for name in stages:
                if self.reports[label].stages[name].status == "SKIPPED":
                    self.stage(label, name, "SKIPPED", reason)

    def prefix_copy(self, source: Path) -> Path:
        """A private bytecode prefix for one process: hard links to a trusted prefix's files
        (a process that compiles something new writes a new file, never through a link)."""
        target = Path(tempfile.mkdtemp(prefix="verifier-pycache-", dir=self.tmp))
        if source.is_dir():
            for path in source.rglob("*.pyc"):
                dst = target / path.relative_to(source)
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(path, dst)
                except OSError:
                    try:
                        dst.write_bytes(path.read_bytes())
                    except OSError:
                        pass
        return target

    def spawn(self, label: str, role: str, trusted: bool, template: Path | None) -> Any:
        """Fork an arm process from the zygote (torch is loaded there already) with a fresh
        bytecode prefix (empty, or links to ``template``); ``greet`` gives it its code."""

        prefix = (self.prefix_copy(template) if template is not None
                  else Path(tempfile.mkdtemp(prefix="verifier-pycache-", dir=self.tmp)))
        policy = self._sandbox_policy(role, trusted, prefix)
        try:
            handle = ArmHandle(label, role, self.zygote, prefix, write_bytecode=trusted,
                               timeout_s=self.job.options.load_timeout_s, sandbox=policy.model_dump())
        except ArmFailure as exc:
            raise Blame(f"the arm process could not be started: {exc}", None, candidate=False) from None
        self._sandboxed(handle, policy.required)
        arm = Arm(handle, label, trusted, prefix=prefix)
        self.arms.append(arm)
        self.handles.append(handle)
        return arm

    def _sandbox_policy(self, role: str, trusted: bool, prefix: Path) -> Any:
        """The allow-list of one arm (``verifiers.arms.sandbox``): its own scratch folder, the code
        it needs, nothing of the state folder, the caller's caches or the other arms."""

        scratch = Path(tempfile.mkdtemp(prefix=f"arm-{role}-", dir=self.tmp))
        code = {p.parent for p in files.problem_sources(self.job.problem)}
        if not trusted and self.job.candidate.kind == "file":
            code.add(Path(self.job.candidate.target).parent)  # absolute: the caller resolved it
        gpu = role != "probe" and bool(getattr(self, "device", None) is not None and self.device.is_gpu)
        return sandbox.arm_policy(role, scratch, prefix, trusted, sorted(code), self.job.sys_path, gpu,
                                  self.job.secrets + [str(self.tmp)], self.require_sandbox)

    def _sandboxed(self, handle: Any, required: bool) -> None:
        """Keep what confined the arm; an unconfined arm is refused when the operator says so."""

        status = SandboxStatus.model_validate(handle.sandbox or {"reason": "the arm reported no sandbox"})
        if not status.active and self.sandbox.active:
            self.sandbox = status
        if required and not status.active:
            handle.kill()
            raise Blame(f"{handle.label}: a sandbox is required ({SANDBOX_HINT}) and the arm could not be "
                        f"confined: {status.reason}", None, candidate=False)

    def greet(self, arm: Any, role: str, builder: dict[str, Any], profile: bool) -> Any:
        self.watch.add(arm)
        return self._hello(arm, role, builder, profile)

    def _hello(self, arm: Any, role: str, builder: dict[str, Any], profile: bool) -> Any:
        """Give a watched arm process its code (it imports the problem and builds the arm)."""
        device = "cpu" if role == "probe" else str(self.device.torch_device)  # a probe only imports
        hello = {"op": "hello", "role": role, "sys_path": self.job.sys_path, "problem": self.job.problem,
                 "builder": builder, "device": device, "profile": profile, "cpu_threads": self.options.cpu_threads}
        try:
            reply = arm.handle.request(hello, timeout_s=self.options.load_timeout_s)
        except ArmFailure as exc:
            raise Blame(str(exc), arm) from None
        arm.files = [f for f in reply.get("files", []) if isinstance(f, str)][:20000] if arm.trusted else []
        return arm

    def start_arm(self, label: str, role: str, trusted: bool, builder: dict[str, Any], profile: bool) -> Any:
        return self.greet(self.spawn(label, role, trusted, self.template), role, builder, profile)

    # -- the run ---------------------------------------------------------------------
    def run(self) -> list[ShapeReport]:
        t_start = self.t_start = time.perf_counter()
        job = self.job
        self.sandbox = sandbox.support()
        self.require_sandbox = job.options.require_sandbox or sandbox.required()
        self.labels = list(job.shapes)
        for label in self.labels:
            self.reports[label] = ShapeReport(shape=label)
        for name in STAGES:
            for label in self.labels:
                self.stage(label, name, "SKIPPED", "not reached")
        self.progress = Progress(self.writer, 10)
        self.progress.note("judge: loading the harness, torch and the problem")
        # the zygote imports torch while the judge does; it forks every arm process later

        self.template = Path(sys.pycache_prefix or self.tmp)
        self.initial_bytecode = {str(p.relative_to(self.template)) for p in self.template.rglob("*.pyc")}
        # the profiler's first use is warmed in the zygote only where it cannot touch a GPU
        # driver (a forked child of a process that initialised CUDA/HIP cannot use it)
        cpu_only = not sandbox.may_use_gpu(job.options.device)
        warm = job.options.profile and cpu_only
        if self.require_sandbox and not self.sandbox.active:
            for label in self.labels:
                self.stage(label, "load", "ERROR", f"a sandbox is required ({SANDBOX_HINT}) and none is available "
                                                   f"here: {self.sandbox.reason}; no arm was started")
            if self.forked_zygote is not None:
                self.forked_zygote.close()
            return self._finish(t_start)
        triton = cpu_only and _mentions_triton(job)
        if self.forked_zygote is not None:
            self.zygote = self.forked_zygote
            self.zygote.setup(self.prefix_copy(self.template), warm, triton, job.sys_path, job.cwd,
                              arm_environment(cpu=cpu_only))
        else:
            self.zygote = Zygote(self.prefix_copy(self.template), warm, triton, job.sys_path, job.cwd, cpu=cpu_only)
        try:
            self._load()
        except Exception as exc:
            for label in self.labels:
                self.stage(label, "load", "ERROR", f"{type(exc).__name__}: {exc}")
            for arm in self.arms:
                arm.handle.kill()
            self.zygote.close()
            return self._finish(t_start)
        try:
            self._verify()
        except Exception as exc:  # a harness bug: report it, never pass
            tb = traceback.format_exc()[-3000:]
            for label, report in self.reports.items():
                self.flag(label, "harness_error", "fail", f"{type(exc).__name__}: {exc}")
                current = next((n for n in STAGES if report.stages[n].reason == "not reached"), "load")
                self.stage(label, current, "ERROR", tb)
            self.skip_rest(list(self.reports), "harness error in an earlier stage")
        finally:
            for prof in (getattr(self, "base_profiler", None), getattr(self, "cand_profiler", None)):
                if prof is not None and not prof.warmed.done():
                    prof.arm.handle.kill()  # its loader thread holds the socket: no exit handshake
            for arm in list(self.arms):
                arm.handle.close()
            self.zygote.close()
        return self._finish(t_start)

    def _load(self) -> None:
        import torch


        job = self.job
        self.options = opts = job.options
        self.device = device = open_device(opts.device)
        # gfx950-emulated: the emulation-sized shapes and the lean parity plan; parity only
        self.problem = problem = for_platform(load_problem(job.problem), device.platform)
        self.no_timing = EMULATED_NO_TIMING if device.platform == EMULATED else None
        self.timed = opts.timing and self.no_timing is None
        if not device.is_gpu:
            set_cpu_threads(opts.cpu_threads)
        self.base_arm = pick_baseline(problem, job.baseline, job.baselines, device.platform)
        self.spec = job.candidate
        self.is_aa = self.spec.kind == "arm" and self.spec.target == self.base_arm.name
        self.rules = rules_from(problem.parity, opts.strict_min_cosine, opts.max_error_ratio,
                                opts.determinism_atol, opts.determinism_rtol)
        self.flusher = Flusher(device, opts.flush_bytes)
        self.watch = TreeWatch(os.getpid(), self.zygote.pid)
        props = device.properties
        self.neighbours = NeighbourWatch.open(device.platform, props.get("index"), props.get("uuid"))
        self.rng = random.Random(int.from_bytes(os.urandom(16), "little"))
        self.secret = (int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF) if opts.secret_seed else None
        self.seeds = list(opts.seeds if opts.seeds is not None else problem.parity.seeds)
        visible = [problem.parse_shape(label) for label in self.labels]
        hidden = [dict(d) for d in problem.hidden_shapes if dict(d) not in visible] if opts.hidden_shapes else []
        self.hidden = [(f"hidden-{i + 1}", d) for i, d in enumerate(hidden)]
        for label, _ in self.hidden:
            self.reports[label] = ShapeReport(shape=label, hidden=True)
            for name in STAGES:
                self.stage(label, name, "SKIPPED", "not reached")
        self.dims = {label: problem.parse_shape(label) for label in self.labels}
        self.dims.update(dict(self.hidden))
        prov = Provenance(device_name=device.name, platform=device.platform, device_properties=device.properties,
                          **runtime_versions())
        prov.harness_digest = files.combined_digest(files.digest_files(files.harness_sources()))
        for label, report in self.reports.items():
            report.provenance = prov
            report.baseline_arm = self.base_arm.name
            report.dims = None if report.hidden else dict(self.dims[label])
        bw = opts.peak_bandwidth_gbs * 1e9 if opts.peak_bandwidth_gbs else None
        self.bandwidth, self.bw_source = (bw, "declared") if bw else (None, "none")
        if bw is None and self.timed:
            self.bandwidth, self.bw_source = measure_copy_bandwidth(device), "measured"
        n_cases = len(self.seeds) + (1 if self.secret is not None else 0) + len(problem.perturbations)
        per_shape = 2 + (len(self.hidden) * n_cases) // max(len(self.labels), 1) + n_cases + (2 if opts.profile else 0) \
            + (4 if opts.timing else 0)
        self.progress.total = 3 + per_shape * len(self.labels)
        torch.manual_seed(0)

    def _hash_own_sources(self) -> "Future":
        """Start hashing the files the judge itself relies on (the harness, the problem's folder,
        every module it loaded) on a thread, while A loads: most of the manifest, none of it
        waiting for A (file reads and hashing let the main thread's socket waits run)."""
        loaded = {str(Path(m.__file__).resolve()) for m in list(sys.modules.values())
                  if isinstance(getattr(m, "__file__", None), str) and m.__file__.endswith(".py")}
        paths = set(map(str, files.harness_sources() + files.problem_sources(self.job.problem))) | loaded
        return _in_background("judge-manifest", files.digest_files, paths)

    def _manifest(self, own: "Future", extra: list[str]) -> None:
        """Every source file the trusted processes rely on, hashed before any candidate runs:
        the judge's own (``_hash_own_sources``) and the ones A loaded besides."""
        digests = own.result()
        digests.update(files.digest_files(set(extra) - set(digests)))
        self.writer.send("manifest", {"files": dict(sorted(digests.items()))})

    def _bytecode(self, prefixes: list[Path]) -> None:
        """Digests of the bytecode trusted processes compiled this run (files the caller's
        cache did not already hold), taken before any candidate process exists."""
        import hashlib

        out = []
        for prefix in prefixes:
            if not prefix.is_dir():
                continue
            digests = {}
            for path in prefix.rglob("*.pyc"):
                rel = str(path.relative_to(prefix))
                if rel not in self.initial_bytecode and path.is_file():
                    digests[rel] = hashlib.blake2b(path.read_bytes(), digest_size=20).hexdigest()
            out.append({"dir": str(prefix), "digests": digests})
        self.writer.send("bytecode", {"prefixes": out})

    def _profiling(self) -> bool:
        """Whether this run profiles (its profiler processes exist)."""
        return bool(self.options.profile and self.no_timing is None)

    def _start_baseline_profiler(self, builder: dict[str, Any]) -> None:
        """Fork the baseline's profiler process beside A; it loads (trusted, from the zygote's
        bytecode) and then loads the profiler on a thread of its own."""
        self.base_profiler = None
        if not self._profiling():
            return
        arm = self.spawn(f"baseline {self.base_arm.name} (profiler)", "baseline", True, self.zygote.prefix)
        self.watch.add(arm)  # on the judge's thread: the watch is not shared with the loader
        self.base_profiler = ProfilerArm(arm, str(self.device.torch_device), self.options.load_timeout_s,
                                         lambda: self._hello(arm, "baseline", builder, True))

    def _fork_candidate_profiler(self, label: str) -> None:
        """Fork the process the candidate of ``label`` will be profiled in: trusted code only
        until its profiling (``verifiers.judge.profiler_arms``); it opens its device context and
        loads the profiler now."""
        if not self._profiling() or self.cand_profiler is not None:
            return
        try:
            arm = self.spawn(f"candidate {self.spec.label} (profiler)", "candidate", False, None)
        except Blame as exc:
            self.progress.note(f"{label}: the candidate's profiler process could not be forked early ({exc.reason}); "
                               "it starts when profiling")
            return
        self.watch.expect(arm)
        self.cand_profiler = ProfilerArm(arm, str(self.device.torch_device), self.options.load_timeout_s)

    def _profilers_before_timing(self, label: str) -> float:
        """Nothing is timed while a profiler process opens its device context (nor, with
        ``profiler_loads_during_timing`` off, while one loads the profiler). A candidate
        profiler process that failed to open is dropped (one starts when profiling); seconds waited."""
        t0 = time.perf_counter()
        timeout = self.options.load_timeout_s
        if self.cand_profiler is not None:
            try:
                self.cand_profiler.wait_opened(timeout)
            except Blame as exc:
                self.progress.note(f"{label}: the candidate's profiler process did not open ({exc.reason[:200]}); "
                                   "one starts when profiling")
                self._drop(self.cand_profiler.arm)
                self.cand_profiler = None
        if not self.options.profiler_loads_during_timing:
            for prof in (self.base_profiler, self.cand_profiler):
                if prof is not None:
                    try:
                        prof.wait_warmed(timeout, self.progress.note)
                    except Blame:
                        pass  # a baseline profiler that failed to load says so when profiling
        return time.perf_counter() - t0

    def _drop(self, arm: Any) -> None:
        self.watch.close(arm)
        if arm in self.arms:
            self.arms.remove(arm)

    def _start_marks(self):  # noqa: ANN202 - a closure
        """Where the judge's start goes (seconds per step, into the first shape's phase_seconds):
        ``start_load`` is the judge's own start (torch, the problem, the device) up to here."""
        self.start_phases: dict[str, float] = {"start_load": round(time.perf_counter() - self.t_start, 3)}
        last = [time.perf_counter()]

        def mark(name: str) -> None:
            now = time.perf_counter()
            self.start_phases[name] = round(now - last[0], 3)
            last[0] = now
        return mark

    def _verify(self) -> None:
        opts = self.options
        base_builder = {"kind": "arm", "target": self.base_arm.name, "function": None}
        name = self.base_arm.name
        mark = self._start_marks()
        if not self._prepare_arms():
            return
        mark("start_prepare")
        self.cand_profiler: ProfilerArm | None = None
        self.base_profiler: ProfilerArm | None = None
        self.base_failure = ""
        self.a2 = None
        second = None
        try:
            self.zygote.wait_ready(opts.load_timeout_s)
            mark("start_zygote")
            self._fork_candidate_profiler(self.labels[0])
            self.a = self.spawn(f"baseline {name} (A)", "baseline", True, self.zygote.prefix)
            second = self._start_second_baseline(base_builder) if self.timed else None
            self._start_baseline_profiler(base_builder)
            own_sources = self._hash_own_sources()
            self.greet(self.a, "baseline", base_builder, False)
            mark("start_baseline")
        except (Blame, Exception) as exc:
            reason = exc.reason if isinstance(exc, Blame) else f"{type(exc).__name__}: {exc}"
            for label in self.reports:
                self.stage(label, "load", "ERROR", f"the baseline arm could not be loaded: {reason}")
            self.skip_rest(list(self.reports), "the baseline arm could not be loaded")
            return
        self._manifest(own_sources, list(self.a.files))
        self._bytecode([Path(sys.pycache_prefix or ""), self.zygote.prefix, self.a.prefix])
        # later arms start from A's prefix: candidates from links to it (they can only hurt themselves)
        self.template = self.prefix_copy(self.a.prefix)
        self.zygote.seal()
        self.a.handle.suspend()
        mark("start_manifest")
        if second is not None:  # no candidate code runs while a trusted process loads
            self._join_second_baseline(second)
        mark("start_second_baseline")
        if self.base_profiler is not None:
            self._join_baseline_profiler()
            mark("start_baseline_profiler")
        # from here on bytecode is compiled in memory: nothing a candidate writes can be read
        sys.pycache_prefix = tempfile.mkdtemp(prefix="verifier-empty-pycache-", dir=self.tmp)
        sys.dont_write_bytecode = True
        self.writer.send("candidate", {"started": True})
        failure = None
        if self.timed:  # the candidate proper may start only once the baseline was timed alone
            self.progress.step("probing the candidate")
            failure = self._probe()
            mark("start_probe")
        if failure is not None:
            for label in self.reports:
                self.stage(label, "load", "FAIL", failure)
            self.skip_rest(list(self.reports), "the candidate could not be loaded")
            self._integrity_all()
            return
        hidden_labels = [lbl for lbl, _ in self.hidden]
        self.started_s = time.perf_counter() - self.t_start
        for i, label in enumerate(self.labels):
            self._shape(label, hidden_labels if i == 0 else [])
        for label in hidden_labels:
            for name in HIDDEN_ONLY_STAGES:
                self.stage(label, name, "SKIPPED", "hidden shape: parity only")
        self._integrity_all()

    def _start_second_baseline(self, builder: dict[str, Any]) -> "Future | None":
        """Fork the second baseline process (A', for the A/A control) beside A and have it load on
        its own socket while A loads and the judge hashes the manifest (``start_second_baseline``
        is what is left to wait for): both start from the zygote's trusted bytecode before any
        candidate code exists, and the judge waits for A' before the candidate's probe. None: it
        could not be forked (every shape's timing says why)."""
        self.a2 = None
        try:
            self.a2 = self.spawn(f"baseline {self.base_arm.name} (A')", "baseline", True, self.zygote.prefix)
        except Blame as exc:
            self._second_baseline_failed(exc.reason)
            return None
        self.watch.add(self.a2)  # on the judge's thread: the watch is not shared with the loader
        return _in_background("judge-second-baseline", self._hello, self.a2, "baseline", builder, False)

    def _join_baseline_profiler(self) -> None:
        """The baseline's profiler process has loaded (its profiler may still be loading); one
        that failed leaves the run without profiles, which each shape's signature says."""
        try:
            self.base_profiler.wait_opened(self.options.load_timeout_s)
        except Blame as exc:
            self.progress.note(f"the baseline's profiler process could not be loaded: {exc.reason[:300]}")
            self.base_failure = exc.reason
            self._drop(self.base_profiler.arm)
            self.base_profiler = None

    def _join_second_baseline(self, future: "Future") -> None:
        try:
            future.result()
            self.a2.handle.suspend()
        except Blame as exc:
            self._second_baseline_failed(exc.reason)

    def _second_baseline_failed(self, reason: str) -> None:
        self.a2 = None
        for label in self.reports:
            self.stage(label, "timing", "ERROR", f"the second baseline process could not be loaded: {reason}")

    def _prepare_arms(self) -> bool:
        """Run the ``prepare`` step of the problem's arms in this run (the baseline, and the
        candidate when it is one of the problem's arms), before any arm process exists. The
        caller's time limit pauses meanwhile (the ``preparing`` messages). False: it failed and
        every shape says so."""
        arms = [self.base_arm]
        own = self.problem.arms.get(self.spec.target) if self.spec.kind == "arm" else None
        if own is not None and own.name != self.base_arm.name:  # (an emulated-only arm has no prepare)
            arms.append(own)
        shapes = [dict(d) for d in self.dims.values()]
        for arm in arms:
            if not arm.prepare:
                continue
            t0 = time.monotonic()
            self.writer.send("preparing", {"active": True})
            try:
                fn = self.problem.resolve_builder(arm.prepare)
                done = fn(shapes, lambda line: self.progress.note(f"preparing {arm.name}: {str(line)[:200]}"))
            except Exception as exc:
                for label in self.reports:
                    self.stage(label, "load", "ERROR", f"preparing arm {arm.name} failed: {type(exc).__name__}: {exc}")
                self.skip_rest(list(self.reports), f"arm {arm.name} could not be prepared")
                return False
            finally:
                self.writer.send("preparing", {"active": False})
            for label, report in self.reports.items():
                report.prepared.extend(f"{arm.name}: {line}" for line in (done or [])[:20])
            self.progress.note(f"prepared {arm.name} in {time.monotonic() - t0:.0f} s")
        return True

    def _builder(self) -> dict[str, Any]:
        s = self.spec
        target = s.target
        if s.kind == "file":
            target = str(Path(target).expanduser().resolve())
        kind = s.kind
        if s.kind == "arm" and self.device.platform == EMULATED:

            kind = builder_kind(self.problem.name, s.target, self.problem.arms)
        return {"kind": kind, "target": target, "function": s.function}

    def _probe(self) -> str | None:
        try:
            arm = self.start_arm(f"candidate {self.spec.label} (probe)", "probe", False, self._builder(), False)
        except Blame as exc:
            return exc.reason
        arm.handle._gone(10.0)
        self.watch.close(arm)
        self.arms.remove(arm)
        for blame in self.watch.check():
            return f"while importing the candidate: {blame.reason}"
        return None

    def _integrity_all(self) -> None:
        for label, report in self.reports.items():
            if report.stages["integrity"].status == "SKIPPED":
                report.integrity_changes = list(dict.fromkeys(report.integrity_changes))
                if report.integrity_changes:
                    self.stage(label, "integrity", "FAIL", "; ".join(report.integrity_changes[:8]))
                else:
                    self.stage(label, "integrity", "PASS",
                               "no process started by an arm; the caller re-hashes every file the judge relied on")

    # -- one visible shape ------------------------------------------------------------
    def _shape(self, label: str, hidden_labels: list[str]) -> None:
        import torch


        opts = self.options
        deadline = time.monotonic() + opts.time_limit_s
        sessions = {lbl: Session(self.problem, self.dims[lbl], self.device, self.flusher, opts, self.rng, deadline)
                    for lbl in [label] + hidden_labels}
        gen = torch.Generator().manual_seed(self.rng.getrandbits(63))
        plans = plan_for(self.problem, [label] + hidden_labels, self.seeds, self.secret, self.rng)
        t = time.perf_counter()
        phases = self.reports[label].phase_seconds
        if label == self.labels[0]:
            phases["start"] = round(getattr(self, "started_s", 0.0), 3)
            phases.update(getattr(self, "start_phases", {}))
        self._fork_candidate_profiler(label)  # it opens its device context beside the baseline references
        self.progress.step(f"{label}: baseline references for {len(plans)} parity cases (no candidate code loaded)")
        refs = {p.key: baseline_ref(sessions[p.label], self.a, p, self.rules) for p in plans}
        phases["baseline_refs"] = round(time.perf_counter() - t, 3)
        waited = self._profilers_before_timing(label)
        if waited > 0.05:
            phases["profiler_open_wait"] = round(waited, 3)
        t_solo = time.perf_counter()
        solo = None
        timing_stage = None
        if self.timed and self.a2 is not None and any(r.error is None for r in refs.values()):

            timing_stage = TimingStage(sessions[label], opts.timing_config(), self.rules, self.watch, self.neighbours,
                                       gen, self._our_pids, lambda m: self.progress.note(f"{label}: {m}"))
            self.progress.step(f"{label}: baseline alone: warm-up, timer floor, A/A control")
            try:
                solo = timing_stage.solo(self.a, self.a2)
            except Blame as exc:
                self.stage(label, "timing", exc.status, f"before the candidate started: {exc.reason}")
        for blame in self.watch.check():
            self.reports[label].integrity_changes.append(blame.reason)
        phases["solo"] = round(time.perf_counter() - t_solo, 3)
        # -- the candidate
        self.progress.step(f"{label}: starting the candidate")
        t_cand = time.perf_counter()
        try:
            cand = self.start_arm(f"candidate {self.spec.label}", "candidate", False, self._builder(), False)
            phases["candidate_start"] = round(time.perf_counter() - t_cand, 3)
        except Blame as exc:
            for lbl in [label] + hidden_labels:
                self.stage(lbl, "load", "FAIL", exc.reason)
            self.skip_rest([label] + hidden_labels, "the candidate could not be loaded")
            return
        for lbl in [label] + hidden_labels:
            self.stage(lbl, "load", "PASS", f"problem {self.problem.name}, baseline arm {self.base_arm.name}, "
                                            f"candidate {self.spec.label} (own process)")
        profile = False
        try:
            profile = self._candidate_phase(label, hidden_labels, sessions, plans, refs, cand, solo, timing_stage,
                                            gen, t)
        finally:
            for blame in self.watch.check():
                self.reports[label].integrity_changes.append(blame.reason)
            self.watch.close(cand)
            self.arms.remove(cand)
            for blame in self.watch.check():
                self.reports[label].integrity_changes.append(blame.reason)
            if timing_stage is not None:  # A's, A''s and C's sets: the next shape allocates its own
                timing_stage.release()
            if self.device.is_gpu:
                gc.collect()  # buffers caught in reference cycles hold device memory until collected
                torch.cuda.ipc_collect()
                torch.cuda.empty_cache()
        # profiled once C has ended and the timed sets are freed: the profiler processes build
        # their own arms, and memory cached by the timed processes serves no other process (the
        # MoE card's DeepSeek shape ran out of device memory on the H200 profiling beside them)
        if profile and self.reports[label].integrity_changes:
            self.skip_rest([label], "an arm started a process", ("signature", "segment"))
        elif profile:
            self._profile(label, sessions[label], gen)
            for blame in self.watch.check():
                self.reports[label].integrity_changes.append(blame.reason)

    def _candidate_phase(self, label, hidden_labels, sessions, plans, refs, cand, solo, timing_stage, gen,
                         t) -> bool:
        """Parity, then timing; True: the shape is to be profiled (once C has ended)."""
        opts = self.options
        cases: dict[str, list] = {lbl: [] for lbl in [label] + hidden_labels}
        t_parity = time.perf_counter()
        for p in plans:
            self.progress.step(f"parity case {len(sum(cases.values(), [])) + 1}/{len(plans)}")
            cases[p.label].append(candidate_case(sessions[p.label], cand, p, refs[p.key], self.rules, opts.settle_ms / 1e3))
        for blame in self.watch.check():
            self.reports[label].integrity_changes.append(blame.reason)
        self.reports[label].phase_seconds["candidate_parity"] = round(time.perf_counter() - t_parity, 3)
        if len(self.seeds) < 4 and self.no_timing is None:
            self.flag(label, "few_seeds", "warn", f"{len(self.seeds)} visible parity seeds (at least 4 recommended)")
        elif len(self.seeds) < 4:  # the emulated platform's lean plan (Problem.emulation), by design
            self.flag(label, "few_seeds", "info", f"{len(self.seeds)} visible parity seed(s) and the secret one: "
                                                  "the emulated platform's lean parity plan")
        for lbl, items in cases.items():
            result = summarize(items, self.rules)
            self.reports[lbl].parity = result
            self.reports[lbl].secret_seed = self.secret
            self.stage(lbl, "parity", result.status, result.reason, time.perf_counter() - t)
            for case in items:
                for note in case.notes:
                    self.flag(lbl, "baseline_parity" if "baseline arm itself" in note else "contract_note", "warn", note)
        parity_ok = self.reports[label].stages["parity"].status == "PASS"
        if self.reports[label].integrity_changes:
            self.skip_rest([label], "an arm started a process", ("signature", "segment", "timing"))
            return False
        if self.no_timing is not None:  # e.g. the emulator: parity is all this platform can show
            self.skip_rest([label], self.no_timing, ("signature", "segment", "timing"))
            self.flag(label, "parity_only", "info", f"{self.device.platform}: parity only; {self.no_timing}")
            return False
        if not opts.timing:
            self.stage(label, "timing", "SKIPPED", "timing disabled (VerifyOptions.timing=False)")
        elif not parity_ok and not opts.time_failed_parity:
            self.stage(label, "timing", "SKIPPED", "parity did not pass (a fast wrong kernel scores 0)")
        elif solo is None or timing_stage is None:
            if self.reports[label].stages["timing"].status == "SKIPPED":
                self.stage(label, "timing", "ERROR", "the baseline's solo phase did not complete")
        else:
            self._timing(label, timing_stage, solo, cand)
        # profiling runs in processes that are never timed (verifiers.judge.profiler_arms)
        if not opts.profile:
            self.skip_rest([label], "profiling disabled (VerifyOptions.profile=False)", ("signature", "segment"))
        elif not parity_ok and not opts.time_failed_parity:
            self.skip_rest([label], "parity did not pass", ("signature", "segment"))
        elif self.reports[label].integrity_changes:
            self.skip_rest([label], "an arm started a process", ("signature", "segment"))
        else:
            return True
        return False

    def _profile(self, label: str, session: Any, gen: Any) -> None:
        """Both arms profiled at ``label`` in their profiler processes: the baseline's (it serves
        every shape) and this shape's candidate's, which gets the candidate's code now and ends
        here. The profiler starts and stops in both at once; each one's calls run with the other
        suspended."""
        t = time.perf_counter()
        self.progress.step(f"{label}: profiling both arms (processes of their own, never timed)")
        opts = self.options
        cand_prof, self.cand_profiler = self.cand_profiler, None
        cand = None
        try:
            if self.base_profiler is None:
                raise Blame(f"the baseline's profiler process could not be loaded: {self.base_failure}", None,
                            candidate=False)
            waited = self.base_profiler.wait_warmed(opts.load_timeout_s, self.progress.note)
            if cand_prof is not None:
                waited += cand_prof.wait_warmed(opts.load_timeout_s, self.progress.note)
                cand = self.greet(cand_prof.arm, "candidate", self._builder(), True)
            else:
                cand = self.start_arm(f"candidate {self.spec.label} (profiler)", "candidate", False, self._builder(),
                                      True)
            t_loaded = time.perf_counter()
            records, phases = profile_arms([(self.base_profiler.arm, session), (cand, session)], opts.profile_calls,
                                           self.rules.rtol, self.rules.atol, gen)
        except Blame as exc:
            self._profile_failed(label, exc, t)
            return
        finally:
            if cand_prof is not None or cand is not None:
                self._drop(cand if cand is not None else cand_prof.arm)
            if self.base_profiler is not None and self.base_profiler.arm.handle.alive:
                self.base_profiler.arm.handle.suspend()
        phases.update(profile_wait=round(waited, 3), profile_candidate_load=round(t_loaded - t - waited, 3))
        self.reports[label].phase_seconds.update(phases)
        self._judge_profile(label, records[0], records[1], t)

    def _profile_failed(self, label: str, exc: Blame, t: float) -> None:
        self.stage(label, "signature", exc.status, exc.reason, time.perf_counter() - t)
        self.stage(label, "segment", "SKIPPED", "profiling failed")

    def _judge_profile(self, label: str, base_records: Any, cand_records: Any, t: float) -> None:
        opts = self.options
        spec = candidate_signature(self.problem, opts, self.base_arm, self.spec.target if self.spec.kind == "arm" else None,
                                   self.is_aa)
        out = judge_traces(self.problem, opts, self.base_arm, spec, base_records, cand_records, self.spec.label,
                           self.device.platform)
        report = self.reports[label]
        report.signature, report.segment, report.segment_speedup = out.checks, out.segments, out.segment_speedup
        self.stage(label, "signature", out.signature_status, out.signature_reason, time.perf_counter() - t)
        self.stage(label, "segment", out.segment_status, out.segment_reason, time.perf_counter() - t)

    def _timing(self, label: str, stage: Any, solo: Any, cand: Any) -> None:
        t = time.perf_counter()
        opts = self.options
        self.progress.step(f"{label}: A/B rounds")
        try:
            result = stage.versus(solo, cand, f"candidate {self.spec.label}")
        except Blame as exc:
            result = solo.result.model_copy(update={"status": exc.status, "reason": exc.reason})
        if result.status == "PASS" and result.ab is not None and result.ab.median_b_ms is not None:
            bound = bounds.physical_bound(self.problem, self.dims[label],
                                          opts.peak_tflops * 1e12 if opts.peak_tflops else None,
                                          self.bandwidth, self.bw_source, opts.bound_margin)
            bound = bounds.check(bound, result.ab.median_b_ms - (result.timer_floor_ms or 0.0))
            if bound.status == "impossible" and self.flusher.nbytes < self.flusher.required_bytes:
                self.flag(label, "physical_bound", "warn", bound.message + " (flush below 2x LLC: not enforced)")
            elif bound.status == "impossible":
                result.failures.append(bound.message)
                result.status, result.reason = "FAIL", bound.message
                self.flag(label, "physical_bound", "fail", bound.message)
            elif bound.status == "below_bound":
                self.flag(label, "physical_bound", "warn", bound.message)
            result.bound = bound
            self.reports[label].bound = bound
        self.reports[label].timing = result
        self.reports[label].phase_seconds["timing"] = round(time.perf_counter() - t, 3)
        for note in result.notes:
            self.flag(label, "timing_note", "warn", note)
        for n in result.neighbours:
            self.flag(label, "gpu_neighbour", "warn", f"another process held a context on the device: {n}")
        self.stage(label, "timing", result.status, result.reason, time.perf_counter() - t)

    def _our_pids(self) -> set[int]:
        return {os.getpid()} | {a.handle.pid for a in self.arms if a.handle.alive}

    def _finish(self, t_start: float) -> list[ShapeReport]:
        out = []
        text = self.sandbox.text()
        about = getattr(getattr(self, "a", None), "about", None) or {}
        for report in self.reports.values():
            if about:
                report.baseline_instance = "; ".join(f"{k}: {v}" for k, v in sorted(about.items()))
            if report.provenance is not None:
                report.provenance.sandbox = text
            if not self.sandbox.active and self.handles:
                self.flag(report.shape, "sandbox", "warn",
                          f"the arms ran without a sandbox ({text}): the candidate could read the server's state "
                          f"and write files as this user; {SANDBOX_HINT} refuses such runs")
            report.seconds = time.perf_counter() - t_start
            report.log_tail = "\n".join(f"[{h.label}] {line}" for h in self.handles for line in h.log)[-6000:]
            report.verdict = shape_verdict(report.stages, report.timing)
            out.append(report)
        return out


def _in_background(name: str, fn: Any, *args: Any) -> Future:
    """``fn(*args)`` on a thread of its own (named ``name``), which ends with it; its Future."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
    try:
        return pool.submit(fn, *args)
    finally:
        pool.shutdown(wait=False)


def pick_baseline(problem: Any, name: str | None, binding: dict[str, str], platform: str) -> Any:
    """The baseline arm on ``platform``: the one named (``--baseline``), else the card's
    binding for that platform, else (a problem run without a card) the problem's own."""
    if platform == EMULATED:  # a CPU arm stands in for the baseline (the relative parity rules)
        name, platform = name or problem.emulation.baseline, "cpu"
    name = name or binding.get(platform)
    if name:
        arm = problem.arm(name)
        if platform not in arm.platforms:
            raise ValueError(f"baseline arm {name!r} runs on {list(arm.platforms)}, not on {platform}")
        return arm
    if binding:
        raise ValueError(f"the card's verifier binding names no baseline arm for {platform} (it binds "
                         f"{dict(binding)}); pass --baseline ARM")
    for arm in problem.arms.values():
        if arm.role == "baseline" and platform in arm.platforms:
            return arm
    raise ValueError(f"problem {problem.name!r} has no baseline arm for {platform}; "
                     f"arms: {[(a.name, a.role, list(a.platforms)) for a in problem.arms.values()]}")


def _mentions_triton(job: JudgeJob) -> bool:
    """Whether the zygote should load triton for the arms (only a start-up cost question)."""

    paths = files.problem_sources(job.problem)
    if job.candidate.kind == "file":
        paths.append(Path(job.candidate.target))
    for path in paths[:200]:
        try:
            if "triton" in path.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def _terminate(_signum: int, _frame: Any) -> None:
    """Asked to stop (the caller's time limit): take every descendant down, then exit."""
    me = os.getpid()
    procwatch.kill_tree([p.pid for p in procwatch.descendants(me)])
    os._exit(143)


def _watch_caller() -> None:
    """The caller keeps the write end of this process's stdin open for the whole run: its end
    of file (the caller ended the run, or exited however, SIGKILL included) stops the judge
    and every process under it."""
    def watch() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        _terminate(0, None)

    threading.Thread(target=watch, name="caller-watch", daemon=True).start()


def main() -> int:
    """The judge, once ``verifiers.launch.judge_start`` read the preamble: fork the zygote while
    this process holds nothing of the job, then read the envelope (key, job, environment)."""

    zygote = Zygote.fork_here()
    try:
        envelope = json.loads(sys.stdin.readline())
        key = str(envelope["key"])
        job = JudgeJob.model_validate(envelope["job"])
        env = {str(k): str(v) for k, v in dict(envelope.get("env") or {}).items()}
    except Exception as exc:
        print(f"judge: unreadable job: {exc}", file=sys.stderr)
        zygote.close()
        return 2
    _watch_caller()
    os.environ.clear()  # the caller's environment, for the judge only: the zygote has the arm allow-list
    os.environ.update(env)
    tempfile.tempdir = None  # a forked judge would keep the template's TMPDIR choice
    writer = channel.Writer(key)
    procwatch.become_subreaper()
    if os.geteuid() != 0:  # as root it would change nothing: root may ptrace any process
        procwatch.make_undumpable()
    signal.signal(signal.SIGTERM, _terminate)
    if job.cwd:
        try:
            os.chdir(job.cwd)
        except OSError:
            pass
    judge = Judge(job, writer, zygote)
    try:
        reports = judge.run()
        writer.send("result", {"shapes": [r.model_dump(mode="json") for r in reports]})
    except BaseException as exc:  # pragma: no cover - the last resort: say why
        writer.send("result", {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-3000:]})
        return 1
    finally:
        for arm in list(judge.arms):
            arm.handle.kill()
    return 0
