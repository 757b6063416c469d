"""The verification worker: one shape, one fresh process.

    python -m verifiers.worker verify --problem NAME|FILE.py --candidate FILE.py:FUNC \\
        --shape MxNxK [--baseline ARM] [--hidden] [--options-json JSON] --report-out PATH [--nonce-stdin]
    python -m verifiers.worker profile --problem NAME|FILE.py --candidate FILE.py:FUNC \\
        --shape MxNxK [--arm candidate|baseline|ARM] [--calls N]

``verify`` runs the stages (load, integrity, parity, signature, segment, timing) and writes
a ``ShapeReport`` JSON to ``--report-out``. Progress goes to stdout as lines starting with
``@@verifier-progress``; anything else on stdout/stderr is the candidate's or torch's.
The order matters: the harness, the problem and the baseline are imported, the device is
opened and the integrity snapshot is taken *before* the candidate's module is imported.

``profile`` runs flush + call iterations of one arm and nothing else, for capturing a
rocprofv3 kernel trace: ``rocprofv3 --kernel-trace --output-format csv -d OUT -- python -m
verifiers.worker profile ...``; pass the CSV back with ``VerifyOptions.rocprof_trace``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from verifiers import integrity
from verifiers.options import VerifyOptions
from verifiers.report import STAGES, Flag, ShapeReport, StageResult, ThreadCounts, shape_verdict

PROGRESS_PREFIX = "@@verifier-progress "
_urandom = os.urandom  # captured before any candidate code runs
_write = sys.stdout.write
_flush = sys.stdout.flush


class Progress:
    def __init__(self, total: int) -> None:
        self.done, self.total = 0, total

    def step(self, message: str, advance: int = 1) -> None:
        self.done = min(self.done + advance, self.total)
        _write(PROGRESS_PREFIX + json.dumps({"done": self.done, "total": self.total, "message": message}) + "\n")
        _flush()

    def note(self, message: str) -> None:
        self.step(message, advance=0)


def draw_secret_seed() -> int:
    return int.from_bytes(_urandom(4), "little") & 0x7FFFFFFF


def pick_baseline(problem: Any, name: str | None, platform: str) -> Any:
    if name:
        arm = problem.arm(name)
        if platform not in arm.platforms:
            raise ValueError(f"baseline arm {name!r} runs on {list(arm.platforms)}, not on {platform}")
        return arm
    for arm in problem.arms.values():
        if arm.role == "baseline" and platform in arm.platforms:
            return arm
    raise ValueError(
        f"problem {problem.name!r} has no baseline arm for {platform}; "
        f"arms: {[(a.name, a.role, list(a.platforms)) for a in problem.arms.values()]}"
    )


class ShapeRun:
    """State of one ``verify`` run; every stage records into ``self.report``."""

    def __init__(self, args: argparse.Namespace, options: VerifyOptions, nonce: str) -> None:
        self.args, self.options = args, options
        self.label = args.label or args.shape
        self.report = ShapeReport(shape=self.label, hidden=bool(args.hidden), nonce=nonce)
        self.report.stages = {n: StageResult(name=n, status="SKIPPED", reason="not reached") for n in STAGES}
        self.snapshot: integrity.Snapshot | None = None
        self.t0 = time.perf_counter()
        self.current = "load"
        self.candidate_imported = False

    # -- bookkeeping -----------------------------------------------------------------
    def stage(self, name: str, status: str, reason: str, t_start: float | None = None) -> None:
        seconds = time.perf_counter() - t_start if t_start is not None else 0.0
        self.current = name
        self.report.stages[name] = StageResult(name=name, status=status, reason=reason, seconds=seconds)

    def flag(self, code: str, severity: str, message: str) -> None:
        self.report.flags.append(Flag(code=code, severity=severity, message=message, shape=self.report.shape))

    def check_integrity(self, when: str) -> bool:
        if self.snapshot is None:
            return True
        changes = self.snapshot.changes()
        if changes:
            new = [f"{when}: {c}" for c in changes if f"{when}: {c}" not in self.report.integrity_changes]
            self.report.integrity_changes += new
            self.stage("integrity", "FAIL", "harness state was modified: " + "; ".join(self.report.integrity_changes[:8]))
            return False
        return True

    # -- the run ---------------------------------------------------------------------
    def run(self) -> ShapeReport:
        try:
            self._run()
        except Exception as exc:  # a harness bug: report it, never pass
            self.flag("harness_error", "fail", f"{type(exc).__name__}: {exc}")
            failed_in = self.current
            for name, st in self.report.stages.items():
                if st.reason == "not reached":
                    self.report.stages[name] = StageResult(name=name, status="SKIPPED", reason="harness error in an earlier stage")
            self.stage(failed_in, "ERROR", traceback.format_exc()[-3000:])
        self.report.seconds = time.perf_counter() - self.t0
        self.report.verdict = shape_verdict(self.report.stages, self.report.timing)
        return self.report

    def _run(self) -> None:
        from verifiers import contract

        opts, args = self.options, self.args
        t = time.perf_counter()
        progress = Progress(total=20)  # re-estimated once the problem is known
        self.progress = progress
        progress.note(f"{self.label}: loading problem and device")
        # --- load: harness, torch, problem, device, baseline (never the candidate yet)
        import torch

        from verifiers.candidate import load_candidate, parse_candidate
        from verifiers.device import Flusher, measure_copy_bandwidth, open_device, set_cpu_threads
        from verifiers.parity import rules_from
        from verifiers.problem import load_problem
        from verifiers.provenance import Provenance, runtime_versions

        import torch.profiler  # noqa: F401  (the signature stage needs it; imported before the snapshot)

        # every harness module is imported (and so guarded by the snapshot) before the
        # candidate: a module first imported later could already have been patched
        import verifiers.bounds  # noqa: F401
        import verifiers.kernel_trace  # noqa: F401
        import verifiers.segment  # noqa: F401
        import verifiers.signature  # noqa: F401
        try:
            problem = load_problem(args.problem)
            dims = problem.parse_shape(args.shape)
            device = open_device(opts.device)
            if device.platform == "cpu":
                set_cpu_threads(opts.cpu_threads)
                device.cpu_timer = opts.cpu_timer
            base_arm = pick_baseline(problem, args.baseline, device.platform)
            base_builder = problem.resolve_builder(base_arm.build)
            cand_spec = parse_candidate(args.candidate)
        except Exception as exc:
            self.stage("load", "ERROR", f"{type(exc).__name__}: {exc}", t)
            return
        seeds = list(opts.seeds if opts.seeds is not None else problem.parity.seeds)
        n_cases = len(seeds) + (1 if opts.secret_seed else 0) + len(problem.perturbations)
        # candidate imported, each parity case, profiling, 3 warm-ups, A/A, A/B, done
        progress.total = 1 + n_cases + (0 if args.hidden else 1 + 5) + 1
        self.report.dims = None if args.hidden else dict(dims)
        self.report.baseline_arm = base_arm.name
        self.report.provenance = Provenance(
            device_name=device.name, platform=device.platform, device_properties=device.properties,
            **runtime_versions(),
        )
        flusher = Flusher(device, opts.flush_bytes)
        bandwidth = opts.peak_bandwidth_gbs * 1e9 if opts.peak_bandwidth_gbs else None
        bw_source = "declared" if bandwidth else "none"
        if bandwidth is None and not args.hidden and opts.timing:
            bandwidth, bw_source = measure_copy_bandwidth(device), "measured"
        torch.manual_seed(0)
        # --- snapshot, then the candidate
        # the problem's own modules (inputs, oracle, quantisers, the baseline) are guarded too:
        # a candidate that made the inputs easier or the oracle agree with it would pass parity
        own = {getattr(problem.oracle, "__module__", None), getattr(problem.make_inputs, "__module__", None),
               getattr(problem.make_outputs, "__module__", None), getattr(base_builder, "__module__", None)}
        own |= {name for name in list(sys.modules) if name.startswith("skill_kernels.")}
        extra = tuple(sorted(m for m in own if m))
        self.snapshot = integrity.Snapshot.take(extra_modules=extra)
        threads0 = integrity.python_threads()
        self.report.threads = ThreadCounts(python_before=len(threads0), os_before=integrity.os_thread_count())
        try:
            cand_builder = load_candidate(cand_spec, problem)
        except contract.CandidateError as exc:
            self.stage("load", "FAIL", str(exc), t)
            self._skip_rest("the candidate could not be loaded")
            self._finish_integrity("after candidate import")
            return
        self.candidate_imported = True
        self.stage("load", "PASS", f"problem {problem.name}, baseline arm {base_arm.name}, candidate {cand_spec.label}", t)
        progress.step("candidate imported")
        if not self.check_integrity("after candidate import"):
            self._skip_rest("the candidate modified the harness at import")
            self._finish_integrity("after candidate import")
            return
        is_aa = cand_spec.kind == "arm" and cand_spec.target == base_arm.name
        if is_aa:
            self.flag("aa_run", "info", "the candidate is the baseline arm itself (A/A verification)")
        secret = draw_secret_seed() if opts.secret_seed else None
        # --- parity
        rules = rules_from(problem.parity, opts.strict_min_cosine, opts.max_error_ratio,
                           opts.determinism_atol, opts.determinism_rtol)
        if len(seeds) < 4:
            self.flag("few_seeds", "warn", f"{len(seeds)} visible parity seeds (at least 4 recommended)")
        self._parity(problem, dims, cand_builder, base_builder, device, rules, seeds, secret)
        self.check_integrity("after parity")
        parity_ok = self.report.stages["parity"].status == "PASS"
        if args.hidden:
            for name in ("signature", "segment", "timing"):
                self.stage(name, "SKIPPED", "hidden shape: parity only")
            self._finish_integrity("end")
            self.report.secret_seed = secret
            progress.step("done")
            return
        value_seeds = [((secret or 1000) * 7 + 101 + i) & 0x7FFFFFFF for i in range(opts.rotating_sets + 1)]
        # --- signature + segment (profiled outside the timed loop)
        if not opts.profile:
            self.stage("signature", "SKIPPED", "profiling disabled (VerifyOptions.profile=False)")
            self.stage("segment", "SKIPPED", "profiling disabled (VerifyOptions.profile=False)")
        elif not parity_ok and not opts.time_failed_parity:
            self.stage("signature", "SKIPPED", "parity did not pass")
            self.stage("segment", "SKIPPED", "parity did not pass")
        else:
            self._signature(problem, dims, device, flusher, base_arm, base_builder, cand_builder, cand_spec, is_aa, value_seeds)
        self.check_integrity("after profiling")
        # --- timing
        if not opts.timing:
            self.stage("timing", "SKIPPED", "timing disabled (VerifyOptions.timing=False)")
        elif not parity_ok and not opts.time_failed_parity:
            self.stage("timing", "SKIPPED", "parity did not pass (a fast wrong kernel scores 0)")
        elif self.report.stages["integrity"].status == "FAIL":
            self.stage("timing", "SKIPPED", "integrity failed")
        else:
            self._timing(problem, dims, device, flusher, rules, base_arm, base_builder, cand_builder, cand_spec,
                         value_seeds, bandwidth, bw_source)
        self._finish_integrity("end")
        self.report.secret_seed = secret
        progress.step("done")

    def _skip_rest(self, reason: str) -> None:
        for name in ("parity", "signature", "segment", "timing"):
            self.stage(name, "SKIPPED", reason)

    def _finish_integrity(self, when: str) -> None:
        ok = self.check_integrity(when)
        threads = self.report.threads
        threads.python_after = len(integrity.python_threads())
        threads.os_after = integrity.os_thread_count()
        if threads.os_after > threads.os_before:
            self.flag("threads", "info", f"native threads {threads.os_before} -> {threads.os_after} over the run")
        if threads.python_after > threads.python_before:
            names = sorted(integrity.python_threads().values())
            self.flag("threads", "warn", f"Python threads {threads.python_before} -> {threads.python_after} at the end: {names[:8]}")
        if ok and self.report.stages["integrity"].status != "FAIL":
            self.stage("integrity", "PASS", "timers, synchronise, comparisons and harness code unchanged")

    # -- stages ----------------------------------------------------------------------
    def _parity(self, problem, dims, cand_builder, base_builder, device, rules, seeds, secret) -> None:
        from verifiers.parity import run_parity

        t = time.perf_counter()
        self.current = "parity"
        label = self.label
        result = run_parity(
            problem, [(label, dims)], cand_builder, base_builder, device, rules, seeds, secret,
            settle_s=self.options.settle_ms / 1e3, progress=self.progress.step,
        )
        self.report.parity = result
        self.stage("parity", result.status, result.reason, t)
        for case in result.cases:
            for note in case.notes:
                code = "baseline_parity" if "baseline arm itself" in note else "contract_note"
                self.flag(code, "warn", note)

    def _signature(self, problem, dims, device, flusher, base_arm, base_builder, cand_builder, cand_spec, is_aa, value_seeds) -> None:
        from verifiers import contract, signature as sig
        from verifiers.kernel_trace import from_rocprofv3_csv, profile_launches
        from verifiers.problem import SignatureSpec
        from verifiers.segment import score_segment, segment_speedup

        t = time.perf_counter()
        self.current = "signature"
        opts = self.options
        extra = SignatureSpec(
            required=tuple(opts.candidate_required), forbidden=tuple(opts.candidate_forbidden),
            launches_per_iter=opts.candidate_launches_per_iter,
        )
        if cand_spec.kind == "arm":
            cand_sig = sig.merge(problem.arm(cand_spec.target).signature, extra)
        else:
            cand_sig = sig.merge(problem.candidate_signature, extra)
        if opts.forbid_baseline_kernels and not is_aa and base_arm.signature.required:
            cand_sig = sig.merge(cand_sig, SignatureSpec(forbidden=base_arm.signature.required))
        self.progress.step("profiling both arms (outside the timed loop)")
        try:
            pristine = problem.make_inputs(dims, value_seeds[0], device.torch_device)
            make_out = lambda: problem.make_outputs(dims, device.torch_device)  # noqa: E731
            records = {}
            for label, builder in (("baseline", base_builder), ("candidate", cand_builder)):
                bound = contract.bind(f"{label} (profiled)", builder, pristine, make_out, device)
                contract.run(bound, device, pristine)
                try:
                    for _ in range(opts.warmup_calls):
                        flusher.flush()
                        bound.launch()
                    device.sync()
                except BaseException as exc:
                    raise contract.CandidateError(f"{label}: launch raised {type(exc).__name__}: {exc}") from exc
                records[label] = profile_launches([_guarded(bound.launch, label)], device, flusher, opts.profile_calls)
                del bound
        except contract.CandidateError as exc:
            baseline_fault = str(exc).startswith("baseline")
            self.stage("signature", "ERROR" if baseline_fault else "FAIL", str(exc), t)
            self.stage("segment", "SKIPPED", "profiling failed", t)
            return
        except Exception as exc:  # profiler unavailable on this box
            reason = f"profiler unavailable: {type(exc).__name__}: {exc}"
            self.stage("signature", "SKIPPED", reason, t)
            self.stage("segment", "SKIPPED", reason, t)
            return
        fp = problem.segment.flush_pattern
        checks = [
            sig.check_signature(records["baseline"], base_arm.signature, f"baseline {base_arm.name}", fp),
            sig.check_signature(records["candidate"], cand_sig, f"candidate {cand_spec.label}", fp),
        ]
        segments = [
            score_segment(records["baseline"], problem.segment, f"baseline {base_arm.name}"),
            score_segment(records["candidate"], problem.segment, f"candidate {cand_spec.label}"),
        ]
        self.report.segment_speedup = segment_speedup(segments[0], segments[1])
        errors: list[str] = []
        for path, spec_, who in ((opts.rocprof_baseline_trace, base_arm.signature, f"baseline {base_arm.name}"),
                                 (opts.rocprof_trace, cand_sig, f"candidate {cand_spec.label}")):
            if not path:
                continue
            try:
                recs = from_rocprofv3_csv(path, fp)
            except ValueError as exc:
                errors.append(str(exc))
                continue
            checks.append(sig.check_signature(recs, spec_, who, fp))
            segments.append(score_segment(recs, problem.segment, who))
        self.report.signature, self.report.segment = checks, segments
        base_sig, base_seg = checks[0], segments[0]
        if base_sig.status == "FAIL" or base_seg.status == "FAIL":
            # the trusted baseline does not show its declared kernels: the names are not
            # observable here (CPU profiles show aten ops) or the problem is wrong; either
            # way nothing can be concluded about the candidate from this trace
            why = "; ".join(base_sig.failures + base_seg.failures)[:2000]
            if device.platform == "cpu":
                reason = f"the CPU profiler shows aten ops, not this problem's kernel names ({why})"
                self.stage("signature", "SKIPPED", reason, t)
                self.stage("segment", "SKIPPED", reason, t)
            else:
                reason = f"the baseline arm does not show its declared signature/segment: {why}"
                self.stage("signature", "ERROR", reason, t)
                self.stage("segment", "ERROR", reason, t)
            return
        self._stage_from(
            "signature", [c.status for c in checks], [f for c in checks for f in c.failures], errors, t,
            ok=f"required/forbidden kernels and launch counts hold for both arms ({len(checks)} traces)",
        )
        self._stage_from(
            "segment", [s.status for s in segments], [f for s in segments for f in s.failures], errors, t,
            ok="segment = every kernel of the call except the flush"
            + (f"; declared kernels {list(problem.segment.kernels)} all present and complete" if problem.segment.kernels else ""),
        )

    def _stage_from(self, name: str, statuses: list[str], failures: list[str], errors: list[str], t: float, ok: str) -> None:
        if "FAIL" in statuses:
            self.stage(name, "FAIL", "; ".join(failures)[:3000], t)
        elif errors:
            self.stage(name, "ERROR", "; ".join(errors)[:3000], t)
        else:
            self.stage(name, "PASS", ok, t)

    def _timing(self, problem, dims, device, flusher, rules, base_arm, base_builder, cand_builder, cand_spec,
                value_seeds, bandwidth, bw_source) -> None:
        from verifiers import bounds, contract
        from verifiers.timing import TimingSession, run_timing

        t = time.perf_counter()
        self.current = "timing"
        opts = self.options
        try:
            session = TimingSession(problem, dims, device, flusher, rules, opts.timing_config(), value_seeds)
        except (contract.ProblemError, Exception) as exc:
            self.stage("timing", "ERROR", f"timing setup: {type(exc).__name__}: {exc}", t)
            return
        result = run_timing(session, base_builder, cand_builder, base_arm.name, cand_spec.label, progress=self.progress.step)
        bound = bounds.physical_bound(
            problem, dims, opts.peak_tflops * 1e12 if opts.peak_tflops else None, bandwidth, bw_source, opts.bound_margin
        )
        if result.ab is not None and result.ab.median_b_ms is not None:
            bound = bounds.check(bound, result.ab.median_b_ms)
            if bound.status == "impossible" and flusher.nbytes < flusher.required_bytes:
                # caches were not flushed: a bandwidth bound from device memory does not hold
                self.flag("physical_bound", "warn", bound.message + " (flush below 2x LLC: not enforced)")
            elif bound.status == "impossible":
                result.failures.append(bound.message)
                result.status = "FAIL"
                result.reason = bound.message
                self.flag("physical_bound", "fail", bound.message)
            elif bound.status == "below_bound":
                self.flag("physical_bound", "warn", bound.message)
        result.bound = bound
        self.report.bound = bound
        self.report.timing = result
        for note in result.notes:
            self.flag("timing_note", "warn", note)
        self.stage("timing", result.status, result.reason, t)


def _guarded(launch, label: str):
    """The launch, with anything it raises turned into a CandidateError (not a profiler fault)."""
    from verifiers.contract import CandidateError

    def call() -> None:
        try:
            launch()
        except BaseException as exc:
            raise CandidateError(f"{label}: launch raised {type(exc).__name__}: {exc}") from exc

    return call


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m verifiers.worker", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="verify one shape and write a ShapeReport JSON")
    v.add_argument("--problem", required=True)
    v.add_argument("--candidate", required=True, help="FILE.py:FUNC, package.module:FUNC or arm:NAME")
    v.add_argument("--baseline", default=None, help="baseline arm (default: the problem's baseline for the platform)")
    v.add_argument("--shape", required=True)
    v.add_argument("--label", default=None, help="shape label in the report (default: --shape)")
    v.add_argument("--hidden", action="store_true", help="parity only; dims withheld from the report")
    v.add_argument("--options-json", default="{}")
    v.add_argument("--report-out", required=True)
    v.add_argument("--nonce-stdin", action="store_true", help="read the report nonce from the first stdin line")
    pr = sub.add_parser("profile", help="run flush+call iterations of one arm (for rocprofv3)")
    pr.add_argument("--problem", required=True)
    pr.add_argument("--candidate", default=None)
    pr.add_argument("--arm", default="candidate", help="candidate, baseline, or an arm name")
    pr.add_argument("--shape", required=True)
    pr.add_argument("--calls", type=int, default=20)
    pr.add_argument("--device", default="auto")
    return p.parse_args(argv)


def _profile_only(args: argparse.Namespace) -> int:
    from verifiers import contract
    from verifiers.candidate import load_candidate, parse_candidate
    from verifiers.device import Flusher, open_device
    from verifiers.problem import load_problem

    problem = load_problem(args.problem)
    dims = problem.parse_shape(args.shape)
    device = open_device(args.device)
    if args.arm == "candidate":
        if not args.candidate:
            raise SystemExit("--arm candidate needs --candidate")
        builder = load_candidate(parse_candidate(args.candidate), problem)
    elif args.arm == "baseline":
        builder = problem.resolve_builder(pick_baseline(problem, None, device.platform).build)
    else:
        builder = problem.resolve_builder(problem.arm(args.arm).build)
    pristine = problem.make_inputs(dims, 0, device.torch_device)
    bound = contract.bind(args.arm, builder, pristine, lambda: problem.make_outputs(dims, device.torch_device), device)
    flusher = Flusher(device)
    for _ in range(10):
        flusher.flush()
        bound.launch()
    device.sync()
    for _ in range(args.calls):
        flusher.flush()  # each flush kernel starts one iteration in the trace
        bound.launch()
        device.sync()
    print(f"profiled {args.calls} calls of {args.arm} at {args.shape}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.command == "profile":
        return _profile_only(args)
    nonce = sys.stdin.readline().strip() if args.nonce_stdin else ""
    out = Path(args.report_out)
    try:
        options = VerifyOptions.model_validate(json.loads(args.options_json))
    except Exception as exc:
        report = ShapeReport(shape=args.label or args.shape, nonce=nonce, verdict="ERROR")
        report.stages = {n: StageResult(name=n, status="SKIPPED", reason="invalid options") for n in STAGES}
        report.stages["load"] = StageResult(name="load", status="ERROR", reason=f"invalid options: {exc}")
        out.write_text(report.model_dump_json())
        return 2
    run = ShapeRun(args, options, nonce)
    report = run.run()
    out.write_text(report.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
