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


@dataclass(frozen=True, slots=True)
class Resources:
    """Per-kernel resources a format records (one interned instance per distinct set)."""

    vgpr_count: int | None = None  # arch VGPRs per work-item (rocprofv3)
    accum_vgpr_count: int | None = None  # AccVGPRs (rocprofv3)
    sgpr_count: int | None = None  # SGPRs per wave (rocprofv3)
    registers_per_thread: int | None = None  # CUDA torch traces
    scratch_bytes: int | None = None  # private/scratch bytes per work-item; >0 often means spills
    lds_bytes: int | None = None  # LDS / shared memory bytes per workgroup
    workgroup_size: tuple[int, int, int] | None = None
    grid_size: tuple[int, int, int] | None = None


@dataclass(frozen=True, slots=True)
class OpCall:
    """A CPU op as torch.profiler recorded it with ``record_shapes=True`` (interned)."""

    name: str
    input_dims: Any = None  # list per argument; [] for scalars; nested lists for TensorList
    input_types: Any = None  # e.g. "c10::Float8_e4m3fn", "float", "TensorList", "Scalar"
    concrete_inputs: Any = None  # scalar arguments as text, e.g. "[4]" for a ScalarList


@dataclass(frozen=True, slots=True)
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

    ``agent`` / ``queue`` / ``stream`` are what the format records (rocprofv3 Agent_Id,
    Queue_Id, Stream_Id; a torch trace's device pid and stream tid). ``order`` is the
    position in the input, the tie-breaker for equal start times."""

    name: str
    start_ns: int
    end_ns: int
    order: int = 0
    agent: Any = None
    queue: Any = None
    stream: Any = None
    correlation_id: int | None = None
    dispatch_id: int | None = None
    kind: str = KERNEL_DISPATCH
    resources: Resources | None = None
    launch: LaunchContext | None = None

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def lane(self) -> tuple[Any, Any, Any]:
        """Where dispatches are serialised: (agent, queue, stream)."""
        return (self.agent, self.queue, self.stream)


@dataclass(slots=True)
class KernelTotals:
    """One kernel's totals, for formats that are aggregated already (kernel_stats.csv)."""

    name: str
    calls: int
    total_ns: int
    min_ns: int | None = None
    max_ns: int | None = None


@dataclass
class Trace:
    """A read input: dispatches (or totals) plus what the format says about itself.

    ``ordered`` is False for formats without a dispatch order (kernel_stats.csv);
    ``segment_rule`` names how ``aggregate`` forms segments for it."""

    format: str
    source: str
    dispatches: list[KernelDispatch] = field(default_factory=list)
    totals: list[KernelTotals] = field(default_factory=list)
    device_names: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    segment_rule: str = "none"
