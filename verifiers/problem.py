"""The problem protocol: what a card's ``verifier`` binding points at.

A card names a problem (``verifier.problem: <folder>``); the problem lives beside the
card's kernels as ``kernels/<folder>/problem.py`` and exposes ``PROBLEM: Problem``.
The problem owns everything that is specific to one operator: how to draw inputs for a
shape and seed (in the layouts the card prescribes), the immutable oracle, the parity
rule, the arms it can run per platform, the runtime signatures of each arm, and the
kernels that make up the scored segment. The verifier owns everything generic.

The candidate contract (also what every arm's builder follows)::

    def build(inputs: dict[str, Tensor], outputs: dict[str, Tensor]) -> Callable[[], None]

``build`` receives the problem's input tensors and preallocated output tensors, does all
compilation and preparation once (untimed), and returns a zero-argument ``launch``
callable (timed) that writes every output in place on the current stream. ``launch``
must not allocate its outputs anew, must not modify the inputs, and must leave no work
outside the current stream. The judge writes fresh values into every non-static input
before every timed call and checks that call's output on sampled elements; the optional
hooks ``refresh_inputs`` and ``oracle_at`` make that cheap for large problems, and
``kernel_name_check`` states a rule over an arm's kernel names that a regex cannot.

This module imports nothing heavy: torch is only named in type hints.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from verifiers import card_folder

from verifiers.shape_text import parse_shape_text

if TYPE_CHECKING:  # pragma: no cover
    import torch

Tensors = dict[str, "torch.Tensor"]
Launch = Callable[[], None]
Builder = Callable[[Tensors, Tensors], Launch]
Dims = dict[str, int]

PLATFORMS = ("cuda", "rocm", "cpu")
#: the verifier platform that runs FlyDSL arms' gfx950 code objects on CPU through the
#: gfx950 emulator (``verifiers/gfx950/emulator``): parity only, never a timing
EMULATED_PLATFORM = "gfx950-emulated"


@dataclass(frozen=True)
class ParitySpec:
    """How candidate outputs are compared with the oracle.

    strict: every compared output must satisfy allclose(rtol, atol) with at most
      ``max_mismatch`` elements out of tolerance (0 by default), plus the cosine and
      relative-L2 floors when given. NaN/Inf always fails.
    relaxed: the candidate is compared with the oracle like the baseline arm is, and
      must stay within bounds *relative to the baseline arm's own figures*
      (``max_cosine_drop``, ``max_rel_l2_ratio``, ``max_abs_ratio``) and within the
      absolute bounds when given (``min_cosine``, ``max_rel_l2``, ``max_abs``).
    """

    mode: Literal["strict", "relaxed"]
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatch: int = 0
    min_cosine: float | None = None
    max_rel_l2: float | None = None
    max_abs: float | None = None
    # relaxed mode, relative to the baseline arm (both measured against the oracle)
    max_cosine_drop: float | None = None
    max_rel_l2_ratio: float | None = None
    max_abs_ratio: float | None = None
    seeds: tuple[int, ...] = (0, 1, 2, 3)
    # the oracle output must have at least this spread (std) or the check is
    # meaningless (degenerate outputs sit inside atol)
    min_oracle_std: float = 1e-6
    # two runs of the same arm on the same inputs must agree bitwise unless the problem
    # declares a tolerance here (kernels with nondeterministic atomics / split-K)
    determinism_atol: float = 0.0
    determinism_rtol: float = 0.0


@dataclass(frozen=True)
class SignatureSpec:
    """Runtime signature of one arm, read off the profiled device kernels.

    ``required``: regexes that must each match at least one kernel name.
    ``forbidden``: regexes that must match no kernel name.
    ``launches_per_iter``: expected number of kernel launches per call (None: any).
    """

    required: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    launches_per_iter: int | None = None


@dataclass(frozen=True)
class ArmSpec:
    """One runnable implementation of the problem.

    ``build`` is ``"module:function"``; a bare module name is resolved inside the
    problem's own package (``skill_kernels.<folder>.<module>``), a dotted one as is.
    A builder callable is accepted too (problems loaded from a file path, tests).
    ``platforms``: where it can run (subset of cuda, rocm, cpu).
    ``prepare``: optional ``"module:function"`` called as ``fn(shapes, progress)`` (the shape
    dicts to be verified, a ``progress(str)`` callback) in the judge before the arm is loaded,
    outside every time limit: one-off builds that take minutes (aiter's CK JIT modules), which
    must not run inside a timed arm. It returns what it prepared, one line per item (or None).
    """

    name: str
    build: str | Builder
    role: Literal["baseline", "reference", "ablation"]
    description: str
    platforms: tuple[str, ...] = PLATFORMS
    signature: SignatureSpec = field(default_factory=SignatureSpec)
    prepare: str | Callable[..., Any] | None = None


@dataclass(frozen=True)
class SegmentSpec:
    """The kernels that make up the scored segment.

    ``kernels``: regexes naming each kernel the segment must contain (e.g. the stage-2
    GEMM and the top-k reduce). The segment score is the sum of *all* device kernels
    in the timed window except the flush; a declared filter that misses a kernel the
    trace shows is a failure.
    """

    kernels: tuple[str, ...] = ()
    flush_pattern: str = r"flush|fill_|FillFunctor|memset"


@dataclass(frozen=True)
class EmulationSpec:
    """How the problem runs on the ``gfx950-emulated`` platform (parity only, on CPU).

    ``shapes`` / ``hidden_shapes``: emulation-sized shapes (the emulator runs a few
    seconds per launch); a problem arm is emulated at a shape when
    ``kernels/<folder>/gfx950_targets.py`` declares an ``EmulatedArm`` for it there.
    ``baseline``: a CPU-runnable arm standing in for the baseline in the relative parity
    rules. ``seeds`` and ``perturbations`` (names of the problem's) make the lean parity
    plan: every case costs two emulated launches of the candidate.
    """

    shapes: tuple[Mapping[str, int], ...]
    baseline: str
    hidden_shapes: tuple[Mapping[str, int], ...] = ()
    seeds: tuple[int, ...] = (0,)
    perturbations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Problem:
    card_id: str
    name: str
    dim_names: tuple[str, ...]
    shapes: tuple[Mapping[str, int], ...]
    make_inputs: Callable[[Dims, int, Any], Tensors]
    make_outputs: Callable[[Dims, Any], Tensors]
    oracle: Callable[[Tensors, Dims], Tensors]
    parity: ParitySpec
    arms: Mapping[str, ArmSpec]
    segment: SegmentSpec = field(default_factory=SegmentSpec)
    # named input perturbations for parity (e.g. scales x3, x0.01, sign flip); each
    # returns new tensors and must keep the inputs valid for the problem
    perturbations: Mapping[str, Callable[[Tensors], Tensors]] = field(default_factory=dict)
    # physical bounds used to flag impossible speedups
    flops: Callable[[Dims], float] | None = None
    min_bytes: Callable[[Dims], float] | None = None
    # smallest shapes that still exercise every code path, for CPU tests
    smoke_shapes: tuple[Mapping[str, int], ...] = ()
    # runtime signature a candidate rewrite must show (e.g. the optimised kernel's name);
    # the verifier also forbids the baseline arm's required kernels in the candidate
    candidate_signature: SignatureSpec = field(default_factory=SignatureSpec)
    # shapes checked for parity but never shown to the candidate author
    hidden_shapes: tuple[Mapping[str, int], ...] = ()
    # the hidden shapes on the CPU platform, when the GPU-sized ones would take minutes per
    # call there (``for_platform``); CPU-sized, still exercising the tails and odd tile counts
    cpu_hidden_shapes: tuple[Mapping[str, int], ...] = ()
    # inputs that ``build`` may preprocess (e.g. pre-shuffled weights): the judge writes
    # fresh values into every *other* input before every timed and profiled call and
    # checks that call's outputs, so ``launch`` must read those at call time
    static_inputs: tuple[str, ...] = ()
    # -- per-call checking (optional hooks; the fallbacks are always correct, only slower)
    # write fresh, valid values into the non-static inputs in place, drawn from ``seed``
    # (the judge's secret per-call seed); default: ``make_inputs(dims, seed)`` copied in
    refresh_inputs: Callable[[Tensors, Dims, int], None] | None = None
    # the inputs ``refresh_inputs`` writes (None: possibly every non-static one). The judge stages
    # a private copy of only these per call; the other non-static inputs are still written into
    # the arm's buffers and checked every call, from the set's own values (a MoE card's weights:
    # 7 GiB a copy at its DeepSeek shape). Checked once per shape: a write elsewhere is ERROR.
    refreshed_inputs: tuple[str, ...] | None = None
    # the oracle at a few output elements: ``{output: flat indices (int64)}`` ->
    # ``{output: float64 values}``; for a GEMM one element is one dot product.
    # Default: the full oracle, gathered at the indices
    oracle_at: Callable[[Tensors, Dims, Mapping[str, Any]], Tensors] | None = None
    # cross-kernel rules a regex cannot state, run on each arm's profiled kernel names
    # (e.g. one scale tag on every fp8 producer and reducer); returns the failures
    kernel_name_check: Callable[[Sequence[str]], list[str]] | None = None
    # the gfx950-emulated platform: emulation-sized shapes, CPU baseline, lean parity plan
    emulation: EmulationSpec | None = None

    def parse_shape(self, text: str) -> Dims:
        """Parse ``MxNxK`` (positional over ``dim_names``) or ``name=v,name=v``."""
        return parse_shape(text, self.dim_names)

    def arm(self, name: str) -> ArmSpec:
        try:
            return self.arms[name]
        except KeyError:
            raise KeyError(
                f"problem {self.name!r} has no arm {name!r}; available: {sorted(self.arms)}"
            ) from None

    def resolve_builder(self, spec: str | Builder) -> Builder:
        """Import ``module:function``; bare modules resolve inside this problem's package."""
        if callable(spec):
            return spec
        return resolve_callable(spec, package=card_folder.module_name(self.name))


def for_platform(problem: Problem, platform: str) -> Problem:
    """The problem as a platform runs it: on ``gfx950-emulated`` its emulation-sized shapes
    (visible and hidden), its lean seeds and perturbations; on ``cpu`` its ``cpu_hidden_shapes``
    when it declares them (GPU-sized hidden shapes take minutes per call there: Triton's
    interpreter, fp8 emulated in software); elsewhere the problem itself. Raises ValueError when the problem declares no
    emulation."""
    if platform == "cpu" and problem.cpu_hidden_shapes:
        return replace(problem, hidden_shapes=tuple(problem.cpu_hidden_shapes))
    if platform != EMULATED_PLATFORM:
        return problem
    emu = problem.emulation
    if emu is None:
        raise ValueError(f"problem {problem.name!r} declares no emulation (Problem.emulation): it cannot run on "
                         f"{EMULATED_PLATFORM}")
    unknown = [p for p in emu.perturbations if p not in problem.perturbations]
    if unknown:
        raise ValueError(f"problem {problem.name!r}: emulation perturbations {unknown} are not among the "
                         f"problem's {sorted(problem.perturbations)}")
    return replace(problem, shapes=tuple(emu.shapes), hidden_shapes=tuple(emu.hidden_shapes),
                   parity=replace(problem.parity, seeds=tuple(emu.seeds)),
                   perturbations={k: problem.perturbations[k] for k in emu.perturbations})


def parse_shape(text: str, dim_names: tuple[str, ...]) -> Dims:
    """Shape text over ``dim_names`` through the project's one parser (``shape_text``):
    ``24x96x64x8x2`` positionally or ``M=24,N=96,...`` by name; a ShapeTextError (a
    ValueError) names the expected form."""
    return parse_shape_text(text, dim_names)


def resolve_callable(spec: str, package: str | None = None) -> Callable[..., Any]:
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise ValueError(f"{spec!r}: expected 'module:function'")
    if "." not in module_name and package:
        module_name = f"{package}.{module_name}"
    module = importlib.import_module(module_name)
    try:
        return getattr(module, func_name)
    except AttributeError:
        raise AttributeError(f"{module_name} has no attribute {func_name!r} (from {spec!r})") from None


def is_problem_path(name: str) -> bool:
    """A problem given as a file (``path/to/problem.py``) rather than a kernels folder name."""
    return name.endswith(".py") or "/" in name or os.sep in name


def load_problem(name: str) -> Problem:
    """Load ``kernels/<name>/problem.py`` (or a problem file path) and return its ``PROBLEM``."""
    if is_problem_path(name):
        return _load_problem_file(Path(name))
    module = importlib.import_module(card_folder.module_name(name, card_folder.PROBLEM))
    problem = getattr(module, "PROBLEM", None)
    if not isinstance(problem, Problem):
        raise TypeError(f"kernels/{name}/problem.py must define PROBLEM: verifiers.problem.Problem")
    return problem


def _load_problem_file(path: Path) -> Problem:
    path = path.expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(f"problem file {path} does not exist")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    module_name = f"_verifier_problem_{path.stem}_{digest}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import problem file {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    problem = getattr(module, "PROBLEM", None)
    if not isinstance(problem, Problem):
        raise TypeError(f"{path} must define PROBLEM: verifiers.problem.Problem")
    return problem
