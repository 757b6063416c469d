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

from functools import lru_cache
from itertools import compress

from trace_readers import Trace
from trace_readers.aggregate import run_ids
from trace_readers.kernel_names import short_name

from skill_server.vocabulary import Vocabulary

_ORDINAL = {1: "1st", 2: "2nd"}


class _Layer:
    """One MoE layer being read: what opened it, its GEMMs, activations and reduces."""

    __slots__ = ("opener", "gemms", "activations", "reduces")

    def __init__(self, opener: str | None = None) -> None:
        self.opener = opener  # short name of the sort kernel that opened it
        self.gemms: list[tuple[int, str | None, str]] = []  # (dispatch, stated stage, named by)
        self.activations: list[int] = []  # number of GEMMs seen before each activation
        self.reduces: list[int] = []

    def empty(self) -> bool:
        return not (self.gemms or self.reduces)


def infer_stages(trace: Trace, vocab: Vocabulary) -> tuple[list[str | None], list[str | None]]:
    """Per dispatch (by index): its MoE stage, or None, and the basis for it."""
    c = trace.columns
    n = len(c)
    stages: list[str | None] = [None] * n
    bases: list[str | None] = [None] * n
    if not vocab.kernel_roles or n == 0:
        return stages, bases
    ops = [lc.op.name if lc is not None and lc.op is not None else None for lc in c.launch] \
        if c.launch is not None else None
    keys = list(zip(c.name, ops)) if ops is not None else c.name
    # one role per distinct (kernel, op): a trace repeats a few names a million times
    roles: dict = {}
    for key in dict.fromkeys(keys):
        name, op = key if ops is not None else (key, None)
        kernel = short_name(name)
        stated = vocab.moe_stage_in(kernel, op)
        named_by = kernel if stated is None or vocab.moe_stage_in(kernel) else op or kernel
        roles[key] = (vocab.kernel_role(kernel) or vocab.kernel_role(op), kernel, op, stated, named_by)
    if not any(r[0] == "moe_gemm" for r in roles.values()):
        return stages, bases
    with_role = {key for key, r in roles.items() if r[0] is not None}
    for idx, runs in run_ids(trace):
        layer, run = _Layer(), None
        for p in compress(range(len(idx)), map(with_role.__contains__, map(keys.__getitem__, idx))):
            i = idx[p]
            if runs[p] != run:  # a new launch sequence: whatever layer was open ends here
                if not layer.empty():
                    _settle(layer, stages, bases)
                layer, run = _Layer(), runs[p]
            role, kernel, op, stated, named_by = roles[keys[i]]
            if role == "moe_sort":
                if not layer.empty():
                    _settle(layer, stages, bases)
                layer = _Layer(opener=kernel)
            elif role == "moe_gemm":
                layer.gemms.append((i, stated, named_by))
            elif role == "moe_activation" and layer.gemms:
                layer.activations.append(len(layer.gemms))
            elif role == "topk_reduce":
                layer.reduces.append(i)
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
    for pos, (i, stated, named_by) in enumerate(gemms):
        if stated is not None:
            stages[i], bases[i] = stated, _basis("named", named_by)
        elif split is not None and (len(gemms) == 2 or 0 < split < len(gemms) or len(gemms) == 1):
            stage = "stage1" if pos < split else "stage2"
            stages[i] = stage
            bases[i] = _basis(how, pos, opened, stage)
        else:
            bases[i] = _basis("ambiguous", len(gemms), opened, len(layer.activations))
    for r in layer.reduces:  # a top-k reduce sums the stage-2 partials, whatever came before it
        stages[r], bases[r] = "stage2", "a top-k reduce ends stage 2 of its MoE layer"


@lru_cache(maxsize=4096)
def _basis(how: str, *args) -> str:
    """One text per distinct basis (a trace has a few, repeated for every layer)."""
    if how == "named":
        return f"named in {args[0]!r}"
    if how == "ambiguous":
        gemms, opened, acts = args
        return (f"launch sequence: the layer{opened} has {gemms} MoE GEMM launch(es) and {acts} activation "
                "kernel(s) between them, which does not tell the stages apart")
    pos, opened, stage = args
    return "launch sequence: " + how.format(nth=_ORDINAL.get(pos + 1, f"{pos + 1}th"), opened=opened,
                                            side="before" if stage == "stage1" else "after")
