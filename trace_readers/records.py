"""What every reader returns: typed per-dispatch records and the trace that holds them.

Records are slotted dataclasses, not pydantic models: a 1 M-row kernel trace makes a
million of them, and validation per row would cost more than the parsing. Values are
checked by the readers before a record is built; the boundary models live with the
callers (``skill_server.profiles.models``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KERNEL_DISPATCH = "KERNEL_DISPATCH"


@dataclass(frozen=True, slots=True, eq=False)
class Resources:
    """Per-kernel resources a format records (one interned instance per distinct set, so
    identity is equality: hashing by ``id`` keeps a million look-ups in C)."""

    vgpr_count: int | None = None  # arch VGPRs per work-item (rocprofv3)
    accum_vgpr_count: int | None = None  # AccVGPRs (rocprofv3)
    sgpr_count: int | None = None  # SGPRs per wave (rocprofv3)
    registers_per_thread: int | None = None  # CUDA torch traces
    scratch_bytes: int | None = None  # private/scratch bytes per work-item; >0 often means spills
    lds_bytes: int | None = None  # LDS / shared memory bytes per workgroup
    workgroup_size: tuple[int, int, int] | None = None


@dataclass(frozen=True, slots=True, eq=False)
class OpCall:
    """A CPU op as torch.profiler recorded it with ``record_shapes=True`` (interned)."""

    name: str
    input_dims: Any = None  # list per argument; [] for scalars; nested lists for TensorList
    input_types: Any = None  # e.g. "c10::Float8_e4m3fn", "float", "TensorList", "Scalar"
    concrete_inputs: Any = None  # scalar arguments as text, e.g. "[4]" for a ScalarList


@dataclass(frozen=True, slots=True, eq=False)
class LaunchContext:
    """Where a kernel was launched from (torch traces): shared by every dispatch from the
    same op and scope instance."""

    op: OpCall | None  # the innermost CPU op active at the launch (never ProfilerStep#N)
    scope: int | None  # segment scope instance (an event index), see torch_trace
    scope_name: str | None
    ranges: tuple[str, ...] = ()  # record_function names around the launch, outermost first


@dataclass(slots=True)
class KernelDispatch:
    """One kernel launch.

    ``lane`` = (agent, queue, stream) as the format records them (rocprofv3 Agent_Id,
    Queue_Id, Stream_Id; a torch trace's device pid, None, stream tid): where dispatches
    are serialised. One tuple object per distinct lane. ``order`` is the position in the
    input, the tie-breaker for equal start times."""

    name: str
    start_ns: int
    end_ns: int
    order: int = 0
    lane: tuple[Any, Any, Any] = (None, None, None)
    correlation_id: int | None = None
    dispatch_id: int | None = None
    kind: str = KERNEL_DISPATCH
    resources: Resources | None = None
    launch: LaunchContext | None = None

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def agent(self) -> Any:
        return self.lane[0]

    @property
    def queue(self) -> Any:
        return self.lane[1]

    @property
    def stream(self) -> Any:
        return self.lane[2]


@dataclass(frozen=True, slots=True)
class CpuEvent:
    """A host-side event of a torch trace, kept when ``read_trace(..., detail=True)`` asks:
    ``cat`` is ``cpu_op`` / ``user_annotation`` (``record_function``) / a runtime category /
    ``python_function`` (nn.Module scopes only); ``parent`` is the index (in
    ``Trace.cpu_events``) of the innermost event on the same thread enclosing it."""

    name: str
    cat: str
    thread: tuple[Any, Any]  # (pid, tid)
    start_ns: int
    end_ns: int
    parent: int | None


@dataclass(frozen=True, slots=True)
class DeviceRange:
    """A ``record_function`` range as the device timeline shows it (``gpu_user_annotation``)."""

    name: str
    start_ns: int
    end_ns: int
    lane: tuple[Any, Any, Any]


@dataclass(slots=True)
class KernelTotals:
    """One kernel's totals, for formats that are aggregated already (kernel_stats.csv)."""

    name: str
    calls: int
    total_ns: int
    min_ns: int | None = None
    max_ns: int | None = None


@dataclass
class Columns:
    """Dispatches stored column-wise: one list per field, index = position in the input.

    A 1 M-row kernel trace is a million records; building a million objects costs more
    than parsing the rows, and aggregation reads a few fields of each. Readers fill these
    lists; ``Trace.dispatches`` turns them into ``KernelDispatch`` records on first use."""

    name: list[str] = field(default_factory=list)
    start_ns: list[int] = field(default_factory=list)
    end_ns: list[int] = field(default_factory=list)
    lane: list[tuple] = field(default_factory=list)
    correlation_id: list[int | None] = field(default_factory=list)
    dispatch_id: list[int | None] = field(default_factory=list)
    resources: list[Resources | None] = field(default_factory=list)
    launch: list[LaunchContext | None] | None = None  # None: the format records no launch context
    kind: list[str] | None = None  # None: every row a KERNEL_DISPATCH (only detail reads add others)

    def __len__(self) -> int:
        return len(self.name)

    def append(self, d: KernelDispatch) -> None:
        self.name.append(d.name)
        self.start_ns.append(d.start_ns)
        self.end_ns.append(d.end_ns)
        self.lane.append(d.lane)
        self.correlation_id.append(d.correlation_id)
        self.dispatch_id.append(d.dispatch_id)
        self.resources.append(d.resources)
        if d.launch is not None and self.launch is None:
            self.launch = [None] * (len(self.name) - 1)
        if self.launch is not None:
            self.launch.append(d.launch)
        if d.kind != KERNEL_DISPATCH and self.kind is None:
            self.kind = [KERNEL_DISPATCH] * (len(self.name) - 1)
        if self.kind is not None:
            self.kind.append(d.kind)

    @classmethod
    def of(cls, dispatches: list[KernelDispatch]) -> "Columns":
        cols = cls()
        for d in dispatches:
            cols.append(d)
        return cols


@dataclass
class Trace:
    """A read input: dispatches (or totals) plus what the format says about itself.

    ``columns`` holds the dispatches (empty for kernel_stats.csv, which has ``totals``);
    ``dispatches`` gives them as records. ``segment_rule`` names how scope segments are
    formed when the format has scopes (torch traces)."""

    format: str
    source: str
    columns: Columns = field(default_factory=Columns)
    totals: list[KernelTotals] = field(default_factory=list)
    device_names: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    segment_rule: str = "none"
    cpu_events: list[CpuEvent] | None = None  # torch traces read with detail=True
    device_ranges: list[DeviceRange] | None = None  # likewise
    _records: list[KernelDispatch] | None = field(default=None, repr=False)
    cache: dict = field(default_factory=dict, repr=False)  # derived views (lanes) computed once

    @property
    def dispatches(self) -> list[KernelDispatch]:
        """Every dispatch as a ``KernelDispatch``, in input order (built once, on first use)."""
        if self._records is None:
            c = self.columns
            launch = c.launch if c.launch is not None else [None] * len(c)
            kinds = c.kind if c.kind is not None else [KERNEL_DISPATCH] * len(c)
            self._records = [
                KernelDispatch(n, s, e, i, ln, corr, disp, kind, res, lc)
                for i, (n, s, e, ln, corr, disp, kind, res, lc) in enumerate(
                    zip(c.name, c.start_ns, c.end_ns, c.lane, c.correlation_id, c.dispatch_id, kinds, c.resources,
                        launch))
            ]
        return self._records
