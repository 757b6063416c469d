"""Which MoE stage each dispatch ran, from its place in one MoE layer's launch sequence.

One MoE layer launches, in order: sort/align -> stage-1 GEMM -> activation (often fused
into the stage-1 GEMM) -> stage-2 GEMM -> top-k reduce. Kernel roles come from the
vocabulary (``kernel_roles``, matched on the kernel name, else its launching op's name);
the sequences are the readers' ``ordered_runs`` (a torch scope instance, or a lane's run
of kernels between idle gaps). Within a layer (from a sort to the next reduce or sort):

- a GEMM whose kernel or launching op names its stage keeps it (``moe_stage_names``);
- two MoE GEMMs: the first is stage 1, the second stage 2;
- otherwise one activation splits them: GEMMs before it are stage 1, after it stage 2;
- otherwise the stage stays unknown, with the reason (the card then abstains);
- a top-k reduce belongs to stage 2.

Nothing here matches a kernel-name family in code: adding a name is a vocabulary edit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from trace_readers import Trace, ordered_runs
from trace_readers.kernel_names import short_name
from trace_readers.records import KernelDispatch

from skill_server.vocabulary import Vocabulary

_ORDINAL = {1: "1st", 2: "2nd"}


@dataclass
class _Layer:
    opener: str | None = None  # short name of the sort kernel that opened it
    gemms: list[tuple[KernelDispatch, str | None, str]] = field(default_factory=list)  # (dispatch, stated stage, name)
    activations: list[int] = field(default_factory=list)  # number of GEMMs seen before each activation
    reduces: list[KernelDispatch] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.gemms or self.reduces)


def _names(d: KernelDispatch) -> tuple[str, str | None]:
    op = d.launch.op.name if d.launch is not None and d.launch.op is not None else None
    return short_name(d.name), op


def infer_stages(trace: Trace, vocab: Vocabulary) -> tuple[list[str | None], list[str | None]]:
    """Per dispatch (by ``order``): its MoE stage, or None, and the basis for it."""
    n = len(trace.dispatches)
    stages: list[str | None] = [None] * n
    bases: list[str | None] = [None] * n
    if not vocab.kernel_roles or n == 0:
        return stages, bases
    roles: dict[tuple[str, str | None], str | None] = {}

    def role_of(d: KernelDispatch) -> tuple[str | None, str, str | None]:
        kernel, op = _names(d)
        key = (d.name, op)
        if key not in roles:
            roles[key] = vocab.kernel_role(kernel) or vocab.kernel_role(op)
        return roles[key], kernel, op

    if not any(role_of(d)[0] == "moe_gemm" for d in trace.dispatches):
        return stages, bases
    for run in ordered_runs(trace):
        layer = _Layer()
        for d in run:
            role, kernel, op = role_of(d)
            if role == "moe_sort":
                if not layer.empty():
                    _settle(layer, stages, bases)
                layer = _Layer(opener=kernel)
            elif role == "moe_gemm":
                stated = vocab.moe_stage_in(kernel, op)
                layer.gemms.append((d, stated, kernel if stated is None or vocab.moe_stage_in(kernel) else op or kernel))
            elif role == "moe_activation" and layer.gemms:
                layer.activations.append(len(layer.gemms))
            elif role == "topk_reduce":
                layer.reduces.append(d)
                _settle(layer, stages, bases)
                layer = _Layer()
        if not layer.empty():
            _settle(layer, stages, bases)
    return stages, bases


def _settle(layer: _Layer, stages: list[str | None], bases: list[str | None]) -> None:
    gemms = layer.gemms
    opened = f" (layer opened by {layer.opener})" if layer.opener else ""
    split = None
    if len(gemms) == 2:
        split = 1
        how = "{nth} MoE GEMM of its layer{opened}: stage 1 runs before stage 2"
    elif len(layer.activations) == 1:
        split = layer.activations[0]
        how = "{side} the layer's activation kernel{opened}"
    for pos, (d, stated, named_by) in enumerate(gemms):
        if stated is not None:
            stages[d.order], bases[d.order] = stated, f"named in {named_by!r}"
        elif split is not None and (len(gemms) == 2 or 0 < split < len(gemms) or len(gemms) == 1):
            stage = "stage1" if pos < split else "stage2"
            stages[d.order] = stage
            bases[d.order] = "launch sequence: " + how.format(
                nth=_ORDINAL.get(pos + 1, f"{pos + 1}th"), opened=opened,
                side="before" if stage == "stage1" else "after")
        else:
            bases[d.order] = (
                f"launch sequence: the layer{opened} has {len(gemms)} MoE GEMM launch(es) and "
                f"{len(layer.activations)} activation kernel(s) between them, which does not tell the stages apart")
    for r in layer.reduces:  # a top-k reduce sums the stage-2 partials, whatever came before it
        stages[r.order], bases[r.order] = "stage2", "a top-k reduce ends stage 2 of its MoE layer"
