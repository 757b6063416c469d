"""Parse gfx950 ISA (``22_final_isa.s``) and LLVM IR (``21_llvm_ir.ll``) text.

Pure functions over strings: no FlyDSL, no files. What they extract:

- ``parse_resources(isa)``: the ``.amdhsa_*`` directives (vgpr, agpr, accum_offset,
  sgpr, scratch and LDS bytes) plus the spill counts from the metadata block.
- ``instructions(isa)`` / ``histogram(isa)``: instruction lines and mnemonic counts.
- ``mfma_kinds(isa)``: which MFMA mnemonics occur and how often.
- ``scaled_mfma_calls(ir)``: each ``llvm.amdgcn.mfma.scale.*`` call with its two scale
  operands classified as pinned-to-1.0 (E8M0 0x7F in every byte the op_sel picks, i.e.
  i32 0x7F7F7F7F = 2139062143), another constant, or a real (non-constant) value.
- ``scratch_instructions(isa)``: ``scratch_*`` / ``buffer_* ... offen`` spill traffic lines.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict


class KernelResources(BaseModel):
    """Resource figures of one compiled kernel (from the ISA directives / metadata)."""

    model_config = ConfigDict(frozen=True)

    kernel: str
    vgpr: int  # architected VGPRs used (.vgpr_count, or accum_offset when absent)
    agpr: int  # AccVGPRs used (.agpr_count)
    accum_offset: int  # .amdhsa_accum_offset: first AGPR index in the unified file
    next_free_vgpr: int  # .amdhsa_next_free_vgpr (unified file: accum_offset + agpr)
    sgpr: int  # .amdhsa_next_free_sgpr
    scratch_bytes: int  # .amdhsa_private_segment_fixed_size (non-zero: spills / stack)
    lds_bytes: int  # .amdhsa_group_segment_fixed_size (static LDS per workgroup)
    vgpr_spill: int = 0  # .vgpr_spill_count
    sgpr_spill: int = 0  # .sgpr_spill_count
    workgroup_size: int | None = None  # threads per workgroup (.max_flat_workgroup_size)
    wavefront_size: int = 64


class ScaledMfmaCall(BaseModel):
    """One ``llvm.amdgcn.mfma.scale.*`` call in the LLVM IR."""

    model_config = ConfigDict(frozen=True)

    line: str
    scale_a: str  # operand text as written in the IR
    scale_b: str
    scale_a_kind: str  # 'pinned' | 'constant' | 'real'
    scale_b_kind: str


class KernelArtifacts(BaseModel):
    """What one compiled kernel leaves behind: its ISA, its LLVM IR and resources."""

    kernel: str
    isa: str
    llvm_ir: str = ""
    resources: KernelResources
    #: file name (in the artifacts dir) of the linked code object holding this kernel, and
    #: of the host launch module (FlyDSL's lowered launcher, code object blob stripped):
    #: what the emulator runs. Empty for artifacts compiled before these were kept.
    code_object_file: str = ""
    host_ir_file: str = ""


class ScaledMfmaSummary(BaseModel):
    """All scaled-MFMA calls of one kernel's IR, classified."""

    calls: list[ScaledMfmaCall] = []

    @property
    def unscaled(self) -> list[ScaledMfmaCall]:
        """Both scale operands the constant 0: LLVM selects the plain (unscaled) MFMA."""
        return [c for c in self.calls if c.scale_a_kind == "zero" and c.scale_b_kind == "zero"]

    @property
    def scaled(self) -> list[ScaledMfmaCall]:
        return [c for c in self.calls if not (c.scale_a_kind == "zero" and c.scale_b_kind == "zero")]


class PromoteSummary(BaseModel):
    """How the fp8 MFMA results of one kernel reach fp32 arithmetic (from the IR)."""

    fp8_mfma: int  # fp8 / f8f6f4 MFMA calls in the IR
    chain_starts: int  # of those, calls whose accumulator input is constant zero
    promoted_chains: int  # chains whose result flows into an fp32 fmul / fma
    max_chain: int  # longest run of MFMAs accumulating into one another (inf -> 10**9)
    unpromoted: list[str] = []  # sample MFMA lines whose result never meets an fp32 multiply
    isa_fma_values: int = 0  # fp32 values produced by v_fma_f32 / v_fmac_f32 / v_pk_fma_f32 (x2)
    isa_fp8_mfma: int = 0


# --------------------------------------------------------------------------- ISA text

_COMMENT = re.compile(r"\s*(;|//).*$")
_LABEL = re.compile(r"^([A-Za-z_.$][\w.$]*):")
_KERNEL_BLOCK = re.compile(r"^\s*\.amdhsa_kernel\s+(\S+)\s*$(.*?)^\s*\.end_amdhsa_kernel", re.M | re.S)
_DIRECTIVE = re.compile(r"^\s*\.(amdhsa_\w+)\s+(\S+)", re.M)
_SET = re.compile(r"^\s*\.set\s+\.L(?P<k>[\w.$]+)\.(?P<f>\w+),\s*(?P<v>-?\d+)\s*$", re.M)
_METADATA = re.compile(r"^\s*\.amdgpu_metadata\s*$(.*?)^\s*\.end_amdgpu_metadata", re.M | re.S)

FP8_MFMA = re.compile(r"^v_mfma_(scale_)?f32_\d+x\d+x\d+_(f8f6f4|fp8_fp8|fp8_bf8|bf8_fp8|bf8_bf8)\b")
SCALED_MFMA = re.compile(r"^v_mfma_scale_")
SCRATCH = re.compile(r"^scratch_(load|store)|^buffer_(load|store)_\w+.*\boffen\b.*\bs\[0:3\]")
E8M0_ONE = 0x7F


def kernel_names(isa: str) -> list[str]:
    """Kernel symbols, in order, from the ``.amdhsa_kernel`` blocks."""
    return [m.group(1) for m in _KERNEL_BLOCK.finditer(isa)]


def kernel_body(isa: str, kernel: str) -> str:
    """Text from the kernel's label to its ``.Lfunc_end`` label (the instructions)."""
    start = re.search(rf"^{re.escape(kernel)}:", isa, re.M)
    if not start:
        return ""
    end = re.search(r"^\.Lfunc_end\d+:", isa[start.end():], re.M)
    return isa[start.start(): start.end() + end.start()] if end else isa[start.start():]


def instructions(text: str) -> list[tuple[int, str]]:
    """``(line number, instruction)`` for every instruction line (comments, labels and
    directives dropped). Line numbers are 1-based within ``text``."""
    out = []
    for i, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw).strip()
        if not line or line.startswith(".") or _LABEL.match(line):
            continue
        out.append((i, line))
    return out


def mnemonic(instruction: str) -> str:
    return instruction.split(None, 1)[0]


def histogram(text: str) -> Counter:
    """Mnemonic -> count over the instruction lines of ``text``."""
    return Counter(mnemonic(ins) for _, ins in instructions(text))


def mfma_kinds(text: str) -> dict[str, int]:
    """MFMA / SMFMAC mnemonics and their counts."""
    return {k: v for k, v in sorted(histogram(text).items()) if k.startswith(("v_mfma", "v_smfmac"))}


def scratch_instructions(text: str) -> list[str]:
    """Spill / stack traffic lines (``scratch_*``, or private-buffer ``buffer_*`` on s[0:3])."""
    return [f"{n}: {ins}" for n, ins in instructions(text) if SCRATCH.search(ins)]


def grep(text: str, pattern: str) -> list[str]:
    """Instruction lines (``n: text``) where ``pattern`` (regex) is found."""
    rx = re.compile(pattern)
    return [f"{n}: {ins}" for n, ins in instructions(text) if rx.search(ins)]


def isa_fma_values(text: str) -> int:
    """fp32 values written by fused multiply-adds (the promote's accumulate step)."""
    h = histogram(text)
    single = sum(v for k, v in h.items() if re.match(r"^v_(fma|fmac|fmamk|fmaak)_f32", k))
    packed = sum(v for k, v in h.items() if k.startswith("v_pk_fma_f32"))
    return single + 2 * packed


def _metadata_kernels(isa: str) -> dict[str, dict]:
    m = _METADATA.search(isa)
    if not m:
        return {}
    import yaml

    try:
        doc = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError:
        return {}
    return {k.get(".name", ""): k for k in doc.get("amdhsa.kernels", []) or [] if isinstance(k, dict)}


def parse_resources(isa: str, kernel: str | None = None) -> KernelResources:
    """Resource figures of ``kernel`` (default: the first kernel of the ISA).

    Raises ValueError when the ISA has no ``.amdhsa_kernel`` block for it.
    """
    blocks = {m.group(1): m.group(2) for m in _KERNEL_BLOCK.finditer(isa)}
    if not blocks:
        raise ValueError("no .amdhsa_kernel block in the ISA (not a final gfx9 code-object assembly?)")
    name = kernel or next(iter(blocks))
    if name not in blocks:
        raise ValueError(f"kernel {name!r} not in the ISA; kernels: {sorted(blocks)}")
    d = {k: int(v, 0) for k, v in _DIRECTIVE.findall(blocks[name]) if re.fullmatch(r"-?(0x)?[0-9a-fA-F]+", v)}
    sets = {m.group("f"): int(m.group("v")) for m in _SET.finditer(isa) if m.group("k") == name}
    meta = _metadata_kernels(isa).get(name, {})
    next_free = d.get("amdhsa_next_free_vgpr", 0)
    accum_offset = d.get("amdhsa_accum_offset", next_free)
    agpr = int(meta.get(".agpr_count", sets.get("num_agpr", 0)))
    vgpr = int(sets.get("num_vgpr", accum_offset if agpr else next_free))
    wg = meta.get(".reqd_workgroup_size")
    wg_size = None
    if isinstance(wg, list) and wg:
        wg_size = 1
        for x in wg:
            wg_size *= int(x)
    elif meta.get(".max_flat_workgroup_size"):
        wg_size = int(meta[".max_flat_workgroup_size"])
    return KernelResources(
        kernel=name,
        vgpr=vgpr,
        agpr=agpr,
        accum_offset=accum_offset,
        next_free_vgpr=next_free,
        sgpr=d.get("amdhsa_next_free_sgpr", 0),
        scratch_bytes=d.get("amdhsa_private_segment_fixed_size", 0),
        lds_bytes=d.get("amdhsa_group_segment_fixed_size", 0),
        vgpr_spill=int(meta.get(".vgpr_spill_count", 0)),
        sgpr_spill=int(meta.get(".sgpr_spill_count", 0)),
        workgroup_size=wg_size,
        wavefront_size=int(meta.get(".wavefront_size", 64)),
    )


# --------------------------------------------------------------------------- LLVM IR text

_IR_DEF = re.compile(r"^\s*(%[-\w.$]+)\s*=\s*(.*)$")
_IR_VALUE = re.compile(r"%[-\w.$]+")
_IR_DEFINE = re.compile(r"^define\b[^@]*@\"?([-\w.$]+)\"?\(", re.M)
_MFMA_CALL = re.compile(r"call\s+<\d+\s+x\s+float>\s+@llvm\.amdgcn\.mfma\.([\w.]+?)\(")
_FP8_INTRINSIC = re.compile(r"f8f6f4|fp8|bf8")
_TRANSPARENT = re.compile(r"^(shufflevector|extractelement|insertelement|bitcast|phi|freeze|select)\b")
_FP32_MUL = re.compile(
    r"^(fmul\b|call\b.*@llvm\.(fma|fmuladd)\.(v\d+)?f32\b|call\b.*@llvm\.amdgcn\.fmul_legacy)"
)


def ir_function(ir: str, kernel: str) -> str:
    """The ``define ... @kernel(...) { ... }`` text of one function ('' when absent)."""
    starts = [(m.start(), m.group(1)) for m in _IR_DEFINE.finditer(ir)]
    for i, (pos, name) in enumerate(starts):
        if name == kernel:
            end = starts[i + 1][0] if i + 1 < len(starts) else len(ir)
            return ir[pos:end]
    return ""


def split_call_args(text: str) -> list[str]:
    """Top-level comma split of a call's argument list (text after the opening paren)."""
    args, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        args.append("".join(cur).strip())
    return args


def _arg_value(arg: str) -> str:
    """``i32 2139062143`` -> ``2139062143``; ``<4 x float> %x`` -> ``%x``."""
    return arg.split()[-1] if arg else arg


def _scale_kind(value: str, opsel: int) -> str:
    if value.startswith("%"):
        return "real"
    try:
        v = int(value, 0)
    except ValueError:
        return "real"  # an expression we do not fold: treat as not provably constant
    if v == 0:
        return "zero"
    return "pinned" if ((v >> (8 * (opsel & 3))) & 0xFF) == E8M0_ONE else "constant"


def scaled_mfma_calls(ir: str) -> ScaledMfmaSummary:
    """Every ``llvm.amdgcn.mfma.scale.*`` call with its scale operands classified:
    'zero' (constant 0; both zero == the unscaled instruction), 'pinned' (the E8M0 byte
    that op_sel picks is 0x7F = 1.0), 'constant' (another fixed power of two), 'real'."""
    calls = []
    for line in ir.splitlines():
        m = _MFMA_CALL.search(line)
        if not m or not m.group(1).startswith("scale."):
            continue
        args = split_call_args(line[m.end():])
        if len(args) < 9:
            continue
        opsel_a, scale_a, opsel_b, scale_b = (_arg_value(a) for a in args[5:9])
        try:
            oa, ob = int(opsel_a, 0), int(opsel_b, 0)
        except ValueError:
            oa = ob = 0
        calls.append(
            ScaledMfmaCall(
                line=line.strip(),
                scale_a=scale_a,
                scale_b=scale_b,
                scale_a_kind=_scale_kind(scale_a, oa),
                scale_b_kind=_scale_kind(scale_b, ob),
            )
        )
    return ScaledMfmaSummary(calls=calls)


def _is_zero_constant(value: str) -> bool:
    return value in ("zeroinitializer",) or bool(re.fullmatch(r"<(\s*float\s+0\.0+e\+00\s*,?)+>", value))


def promote_summary(ir: str, isa: str = "") -> PromoteSummary:  # noqa: C901 - one SSA walk
    """Trace each fp8 MFMA result through shuffles / extracts / bitcasts / phis:

    * a result that feeds another MFMA's accumulator extends that MFMA's chain;
    * a result that reaches ``fmul`` / ``llvm.fma`` / ``llvm.fmuladd`` on f32 is promoted.

    A software block-scale promote shows every chain starting from a zero accumulator,
    short chains (one MFMA per 128-K block for 16x16x128) and every chain promoted. A GEMM
    that scales only in the epilogue shows one long chain per output tile (often through a
    loop phi, which counts as unbounded).
    """
    defs: dict[str, str] = {}
    users: dict[str, list[str]] = {}
    mfma: dict[str, list[str]] = {}  # result -> call args
    for line in ir.splitlines():
        m = _IR_DEF.match(line)
        if not m:
            continue
        name, rhs = m.group(1), m.group(2)
        defs[name] = rhs
        for v in set(_IR_VALUE.findall(rhs)):
            users.setdefault(v, []).append(name)
        c = _MFMA_CALL.search(rhs)
        if c and _FP8_INTRINSIC.search(c.group(1)):
            mfma[name] = split_call_args(rhs[c.end():])

    def origins(value: str, seen: set[str]) -> tuple[set[str], bool]:
        """MFMA results that reach ``value`` backwards through transparent ops; and
        whether a loop phi was crossed (an accumulator carried across iterations)."""
        if value in mfma:
            return {value}, False
        rhs = defs.get(value)
        if rhs is None or value in seen or not _TRANSPARENT.match(rhs):
            return set(), False
        seen.add(value)
        found, via_phi = set(), rhs.startswith("phi")
        for v in _IR_VALUE.findall(rhs):
            f, p = origins(v, seen)
            found |= f
            via_phi |= p and bool(f)
        return found, via_phi and bool(found)

    depth: dict[str, int] = {}
    unbounded = 10**9

    def chain_depth(name: str, stack: set[str]) -> int:
        if name in depth:
            return depth[name]
        if name in stack:
            return unbounded
        acc = _arg_value(mfma[name][2]) if len(mfma[name]) > 2 else ""
        if not acc.startswith("%") and (_is_zero_constant(acc) or acc in ("0", "0.0")):
            d = 1
        elif not acc.startswith("%"):
            d = 1
        else:
            preds, via_phi = origins(acc, set())
            if via_phi:
                d = unbounded
            elif preds:
                d = 1 + max(chain_depth(p, stack | {name}) for p in preds)
            else:
                # accumulator from a non-MFMA value (a phi of the loop-carried acc, a load):
                # not a zero start, so not a per-block partial
                d = unbounded
        depth[name] = d
        return d

    def reaches_mul(value: str, seen: set[str]) -> bool:
        for u in users.get(value, []):
            if u in seen:
                continue
            seen.add(u)
            rhs = defs[u]
            if _FP32_MUL.match(rhs):
                return True
            if _TRANSPARENT.match(rhs) and reaches_mul(u, seen):
                return True
        return False

    # chain ends: MFMA results not used as another fp8 MFMA's accumulator
    feeds_mfma: set[str] = set()
    for name, args in mfma.items():
        if len(args) > 2 and _arg_value(args[2]).startswith("%"):
            preds, _ = origins(_arg_value(args[2]), set())
            feeds_mfma |= preds
    ends = [n for n in mfma if n not in feeds_mfma]
    promoted = [n for n in ends if reaches_mul(n, set())]
    unpromoted = [f"{n} = {defs[n][:160]}" for n in ends if n not in promoted][:5]
    max_chain = max((chain_depth(n, set()) for n in mfma), default=0)
    starts = sum(1 for n in mfma if chain_depth(n, set()) == 1)
    return PromoteSummary(
        fp8_mfma=len(mfma),
        chain_starts=starts,
        promoted_chains=len(promoted),
        max_chain=max_chain,
        unpromoted=unpromoted,
        isa_fma_values=isa_fma_values(isa) if isa else 0,
        isa_fp8_mfma=sum(1 for _, ins in instructions(isa) if FP8_MFMA.match(ins)) if isa else 0,
    )


class ClusterSummary(BaseModel):
    """Where the fp32 promote sits relative to the fp8 MFMAs of each K iteration (ISA)."""

    fp8_mfma: int  # fp8 MFMA instructions in program order
    per_iteration: int  # MFMAs one K iteration issues (the group size)
    iterations: int  # complete groups
    interleaved: list[str] = []  # "iteration i: <promote line> between MFMA a and b" samples
    interleaved_count: int = 0


#: fp32 arithmetic a software promote is made of (partial * s_b, then fma with s_a)
PROMOTE_OP = re.compile(r"^v_(pk_)?(fma|fmac|fmamk|fmaak|mul)_f32\b")


def promote_clusters(text: str, per_iteration: int) -> ClusterSummary:
    """Split the fp8 MFMAs (program order) into K iterations of ``per_iteration`` each and
    list every fp32 promote instruction that lies between the first and the last MFMA of
    one iteration. A ``cluster`` schedule has none; promoting each quadrant right after its
    own MFMAs puts them between MFMAs of the same iteration. A count that is not a multiple
    of ``per_iteration`` is reported as such (the grouping would be meaningless)."""
    ins = instructions(text)
    mfma_idx = [i for i, (_, line) in enumerate(ins) if FP8_MFMA.match(line)]
    iterations = len(mfma_idx) // per_iteration if per_iteration > 0 else 0
    found = []
    for it in range(iterations):
        lo, hi = mfma_idx[it * per_iteration], mfma_idx[(it + 1) * per_iteration - 1]
        for i in range(lo + 1, hi):
            n, line = ins[i]
            if PROMOTE_OP.match(line):
                found.append(f"iteration {it}: {n}: {line}")
    return ClusterSummary(fp8_mfma=len(mfma_idx), per_iteration=per_iteration, iterations=iterations,
                          interleaved=found[:8], interleaved_count=len(found))


def first(items: Iterable[str], n: int = 8) -> list[str]:
    """At most ``n`` items (evidence lists stay short)."""
    out = []
    for i, x in enumerate(items):
        if i >= n:
            break
        out.append(x)
    return out
