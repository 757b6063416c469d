"""Which MoE stage each dispatch ran, from its place in one MoE layer's launch sequence.

One MoE layer launches, in order: sort/align -> stage-1 GEMM -> activation (often fused
into the stage-1 GEMM) -> stage-2 GEMM -> top-k reduce. Kernel roles come from the
vocabulary (``kernel_roles``, matched on the kernel name, else its launching op's name);
the sequences are the readers' ``sequences`` (a torch scope instance, or a lane's run
of kernels between idle gaps). Within a layer (from a sort to the next reduce or sort):

- a GEMM whose kernel or launching op names its stage keeps it (``moe_stage_names``);
- two MoE GEMMs: the first is stage 1, the second stage 2;
- otherwise one activation splits them: GEMMs before it are stage 1, after it stage 2;
- otherwise the stage stays unknown, with the reason (the card then abstains);
- a top-k reduce belongs to stage 2.

Nothing here matches a kernel-name family in code: adding a name is a vocabulary edit.
"""
from __future__ import annotations

import re
from functools import lru_cache

from trace_readers import Trace
from trace_readers.aggregate import sequences
from trace_readers.kernel_names import short_name

from skill_server.cards.vocabulary import Vocabulary

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
    # Each role-bearing (kernel, op) becomes one character, so a launch sequence is a string:
    # a regex cuts it into layers (a cut before every sort, after every reduce) and each
    # distinct layer string is worked out once (a model repeats the same layer thousands of times).
    # A dispatch that starts a new launch sequence gets its "starting" character (offset by
    # the number of role keys), before which the regex always cuts: whatever layer was open ends there.
    import numpy as np

    with_role = [key for key, r in roles.items() if r[0] is not None]
    width = len(with_role)
    code_of = dict.fromkeys(roles, ord("."))  # kernels with no MoE role all read as "."
    role_of: dict[str, tuple] = {".": (None,) * 5, ",": (None,) * 5}
    for k, key in enumerate(with_role):
        code_of[key] = 0x100 + k
        role_of[chr(0x100 + k)] = role_of[chr(0x100 + width + k)] = roles[key]
    opens = "".join(ch for ch, r in role_of.items() if r[0] == "moe_sort") + f",{chr(0x100 + width)}-{chr(0xFF + 2 * width)}"
    closes = "".join(ch for ch, r in role_of.items() if r[0] == "topk_reduce")
    layer_re = re.compile(f"[{opens}]?[^{opens}{closes}]*" + (f"[{closes}]?" if closes else ""))
    codes = np.fromiter(map(code_of.__getitem__, keys), dtype=np.uint32, count=n)
    starting = np.where(codes == ord("."), np.uint32(ord(",")), codes + np.uint32(width))
    placements = _Placements(role_of)
    at, new_run = sequences(trace)  # every launch sequence back to back, each run's start marked
    seq = np.where(new_run, starting[at], codes[at])
    placements.add(at, layer_re.findall(seq.astype("<u4").tobytes().decode("utf-32-le")))
    return placements.result(n)


class _Placements:
    """The (stage, basis) of every placed dispatch, gathered per lane with numpy: each
    distinct layer string is worked out once (``_place``) and its placements are repeated at
    every offset where the string occurs."""

    def __init__(self, role_of: dict) -> None:
        import numpy as np

        self.np = np
        self.role_of = role_of
        self.code_of: dict[str, int] = {}  # layer string -> its code
        self.offsets: list[list[int]] = []  # per code: offsets of its placed dispatches
        self.results: list[list[int]] = []  # per code: their (stage, basis) indexes
        self.outcomes: dict[tuple, int] = {(None, None): 0}
        self.placed_at: list = []  # per lane: (dispatch indexes, outcome indexes)

    def _learn(self, layer: str) -> None:
        self.code_of[layer] = len(self.offsets)
        placed = _place(layer, self.role_of)
        self.offsets.append([off for off, _, _ in placed])
        self.results.append([self.outcomes.setdefault((st, why), len(self.outcomes)) for _, st, why in placed])

    def add(self, idx, layers: list[str]) -> None:
        """``idx``: the sequence's dispatch indexes (numpy); ``layers``: its layer strings, in order."""
        np = self.np
        for layer in set(layers).difference(self.code_of):
            self._learn(layer)
        codes = np.fromiter(map(self.code_of.__getitem__, layers), dtype=np.int64, count=len(layers))
        lengths = np.fromiter(map(len, layers), dtype=np.int64, count=len(layers))
        bases = np.cumsum(lengths) - lengths
        sizes = np.array(list(map(len, self.offsets)), dtype=np.int64)
        table_start = np.cumsum(sizes) - sizes
        flat_offsets = np.array([o for offs in self.offsets for o in offs] or [0], dtype=np.int64)
        flat_results = np.array([r for res in self.results for r in res] or [0], dtype=np.int64)
        counts = sizes[codes]
        total = int(counts.sum())
        if not total:
            return
        first = np.cumsum(counts) - counts
        within = np.arange(total) - np.repeat(first, counts)
        at = np.repeat(table_start[codes], counts) + within
        positions = np.repeat(bases, counts) + flat_offsets[at]
        self.placed_at.append((idx[positions], flat_results[at]))

    def result(self, n: int) -> tuple[list[str | None], list[str | None]]:
        np = self.np
        outcome = np.zeros(n, dtype=np.int64)
        for where, what in self.placed_at:
            outcome[where] = what
        table = sorted(self.outcomes, key=self.outcomes.__getitem__)
        picked = outcome.tolist()
        return (list(map([st for st, _ in table].__getitem__, picked)),
                list(map([why for _, why in table].__getitem__, picked)))


def _place(text: str, role_of: dict) -> list[tuple[int, str | None, str | None]]:
    """(offset, stage, basis) for the GEMMs and reduces of one layer string (offsets into it)."""
    stages: dict[int, str | None] = {}
    bases: dict[int, str | None] = {}
    layer = _Layer()
    for off, ch in enumerate(text):
        role, kernel, _op, stated, named_by = role_of[ch]
        if role == "moe_sort":
            if not layer.empty():
                _settle(layer, stages, bases)
            layer = _Layer(opener=kernel)
        elif role == "moe_gemm":
            layer.gemms.append((off, stated, named_by))
        elif role == "moe_activation" and layer.gemms:
            layer.activations.append(len(layer.gemms))
        elif role == "topk_reduce":
            layer.reduces.append(off)
            _settle(layer, stages, bases)
            layer = _Layer()
    if not layer.empty():
        _settle(layer, stages, bases)
    return [(off, stages.get(off), bases.get(off)) for off in sorted(set(stages) | set(bases))]


def _settle(layer: _Layer, stages: dict[int, str | None], bases: dict[int, str | None]) -> None:
    gemms = layer.gemms
    opened = f" (layer opened by {layer.opener})" if layer.opener else ""
    split = None
    if len(gemms) == 2:
        split = 1
        how = "{nth} MoE GEMM of its layer{opened}: stage 1 runs before stage 2"
    elif len(layer.activations) == 1:
        split = layer.activations[0]
        how = "{side} the layer's activation kernel{opened}"
    elif len(gemms) == 1 and layer.opener is None and gemms[0][0] + 1 in layer.reduces:
        # a run cut by an idle gap: one GEMM right before a top-k reduce, which sums stage-2
        # outputs (with a sort before it too, the layer could be a one-kernel MoE: left open)
        split = 0
        how = "the MoE GEMM directly before its layer's top-k reduce, which sums the stage-2 outputs"
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
