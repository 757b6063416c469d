"""The stage-2 segment as one launch: the down-projection GEMM (and, in the epilogue
ablation, a separate store kernel), then the top-k reduce.

``Stage2Launch`` is what every arm's ``build`` returns: a zero-argument callable that
runs its kernels in order on the current stream and writes ``outputs["out"]``, plus the
evidence a verifier or a test wants without a profiler: the kernel names in launch
order, the producer's and the reducer's scale, and the partial workspace.

On CPU (Triton's interpreter) each kernel call runs inside
``torch.profiler.record_function(<kernel name>)``, so a torch.profiler trace of a CPU
run shows the same names the device trace shows on a GPU. On a GPU nothing wraps the
launches (no host-side annotation in the timed path).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch


@dataclass
class Stage2Launch:
    steps: Sequence[tuple[str, Callable[[], None]]]  # (kernel name, launch) in order
    partial: "torch.Tensor"
    producer_scale: float | None
    reducer_scale: float | None
    annotate: bool = False

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.steps)

    def __call__(self) -> None:
        if self.annotate:
            import torch

            for name, step in self.steps:
                with torch.profiler.record_function(name):
                    step()
        else:
            for _, step in self.steps:
                step()
