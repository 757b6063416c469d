"""rocprofv3 ``--output-format json`` (``<pid>_results.json``).

Layout (rocprofiler-sdk's JSON writer)::

    {"rocprofiler-sdk-tool": [{
        "metadata": {"pid": ..., ...},
        "agents": [{"id": {"handle": H}, "type": 2, "name": "gfx950", "product_name": "...", ...}],
        "kernel_symbols": [{"kernel_id": K, "kernel_name": ..., "formatted_kernel_name": ...,
                            "demangled_kernel_name": ..., "truncated_kernel_name": ...}],
        "buffer_records": {"kernel_dispatch": [{
            "kind": ..., "thread_id": T, "correlation_id": {"internal": C, "external": X},
            "start_timestamp": ns, "end_timestamp": ns,
            "dispatch_info": {"agent_id": {"handle": H}, "queue_id": {"handle": Q}, "kernel_id": K,
                              "dispatch_id": D, "private_segment_size": ..., "group_segment_size": ...,
                              "workgroup_size": {"x", "y", "z"}, "grid_size": {"x", "y", "z"}}}, ...],
            "memory_copy": [...], ...}}]}

``kernel_symbols`` may also be an object keyed by kernel id. A kernel's name is its
formatted name, else the demangled one, else the raw symbol. The file is streamed, never
parsed whole: records are read one by one as their text arrives (``read_rocprof_json``).
ROCm 7 writes the rocpd database by default, which is read row by row.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from trace_readers.errors import TraceReadError
from trace_readers.json_stream import JsonStreamError, stream_error, walk
from trace_readers.records import Columns, Resources, Trace
from trace_readers.source import READ_ERRORS, SizeLimitExceeded, Source, read_error

FORMAT = "rocprofv3_json"
TOOL_KEY = "rocprofiler-sdk-tool"
_GPU_AGENT_TYPE = 2  # rocprofiler_agent_type_t: CPU = 1, GPU = 2


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _handle(value: Any) -> Any:
    if isinstance(value, dict):
        return _int(value.get("handle"))
    return _int(value)


def _xyz(value: Any) -> tuple[int, int, int] | None:
    if isinstance(value, dict):
        dims = tuple(value.get(k) for k in ("x", "y", "z"))
        if all(type(d) is int and d >= 0 for d in dims):
            return dims  # type: ignore[return-value]
    return None


def _symbols(raw: Any) -> dict[int, str]:
    entries = raw.values() if isinstance(raw, dict) else raw if isinstance(raw, list) else []
    out: dict[int, str] = {}
    for s in entries:
        if not isinstance(s, dict) or _int(s.get("kernel_id")) is None:
            continue
        name = next((s[k] for k in ("formatted_kernel_name", "demangled_kernel_name", "kernel_name")
                     if isinstance(s.get(k), str) and s[k].strip()), None)
        if name is not None:
            out[s["kernel_id"]] = name.strip()
    return out


def _device_names(agents: Any, used: set) -> list[str]:
    names = []
    for a in agents if isinstance(agents, list) else []:
        if not isinstance(a, dict) or a.get("type") != _GPU_AGENT_TYPE:
            continue
        if used and _handle(a.get("id")) not in used:
            continue
        product, arch = a.get("product_name"), a.get("name")
        parts = [p.strip() for p in (product, arch) if isinstance(p, str) and p.strip()]
        if parts:
            names.append(parts[0] if len(parts) == 1 or parts[0] == parts[1] else f"{parts[0]} ({parts[1]})")
    return sorted(set(names))


class _Tool:
    """What one ``rocprofiler-sdk-tool`` entry said, gathered while its records stream past."""

    def __init__(self, index: int, first: int) -> None:
        self.index = index
        self.first = first  # position of its first dispatch in the columns
        self.symbols: Any = None
        self.agents: Any = None
        self.kernel_ids: list[int] = []


def _descend(path: tuple, seen: set) -> bool:
    """Step into the document down to each buffer_records array (their records stream one by
    one); everything else (metadata, agents, kernel_symbols) is small and decoded whole."""
    depth = len(path)
    if depth == 1:
        seen.add(path[0])
    return (depth == 0 or (depth == 1 and path[0] == TOOL_KEY) or depth == 2
            or (depth == 3 and path[2] == "buffer_records") or depth == 4)


def read_rocprof_json(source: Source) -> Trace:
    """Streamed (``json_stream.walk``): memory holds one chunk and the columns, never the
    document; kernel names are resolved once the tool's ``kernel_symbols`` have been read,
    wherever they come in the file."""
    label = source.label
    cols = Columns()
    skipped: Counter = Counter()
    tools: list[_Tool] = []
    resources: dict[tuple, Resources | None] = {}
    lanes: dict[tuple, tuple] = {}
    used_agents: set = set()
    keys: set = set()
    try:
        for path, value in walk(source.text_chunks(), lambda path: _descend(path, keys)):
            if not path or path[0] != TOOL_KEY:
                if not path:
                    raise TraceReadError(f"top-level JSON is a {type(value).__name__}", file=label,
                                         expected="a rocprofv3 results.json object")
                continue
            if len(path) == 1:
                raise TraceReadError(f"{TOOL_KEY!r} is a {type(value).__name__}", file=label, where=TOOL_KEY,
                                     expected="rocprofv3 --output-format json output (a list of tool entries)")
            t = path[1]
            where_tool = f"{TOOL_KEY}[{t}]"
            if not tools or tools[-1].index != t:
                tools.append(_Tool(t, len(cols)))
            tool = tools[-1]
            if len(path) == 2:
                raise TraceReadError(f"entry is a {type(value).__name__}", file=label, where=where_tool,
                                     expected="an object with agents, kernel_symbols and buffer_records")
            key = path[2]
            if len(path) == 3:
                if key == "kernel_symbols":
                    tool.symbols = value
                elif key == "agents":
                    tool.agents = value
                continue
            kind = path[3]
            if len(path) == 4:  # a buffer_records value that is not an array
                if kind == "kernel_dispatch" and value is not None:
                    raise TraceReadError("kernel_dispatch is not a list", file=label,
                                         where=f"{where_tool}.buffer_records.kernel_dispatch", expected="a list of records")
                continue
            if kind != "kernel_dispatch":
                skipped[kind] += 1
                continue
            _dispatch(value, f"{where_tool}.buffer_records.kernel_dispatch[{path[4]}]", label, tool, cols,
                      resources, lanes, used_agents)
    except JsonStreamError as exc:
        raise stream_error(exc, label, "a complete rocprofv3 results.json") from None
    except READ_ERRORS + (SizeLimitExceeded,) as exc:
        raise read_error(exc, label) from None
    if TOOL_KEY not in keys:
        raise TraceReadError(f"no {TOOL_KEY!r} list", file=label, where=TOOL_KEY,
                             expected="rocprofv3 --output-format json output")
    devices: list[str] = []
    for tool in tools:
        symbols = _symbols(tool.symbols)
        for j, kid in enumerate(tool.kernel_ids):
            name = symbols.get(kid)
            if name is None:
                raise TraceReadError(
                    f"kernel_id {kid} has no entry in kernel_symbols", file=label,
                    where=f"{TOOL_KEY}[{tool.index}].buffer_records.kernel_dispatch[{j}].dispatch_info.kernel_id",
                    expected="a kernel id listed in kernel_symbols")
            cols.name[tool.first + j] = name
        devices += _device_names(tool.agents, used_agents)
    if not len(cols):
        raise TraceReadError("no kernel dispatch records", file=label,
                             expected="a rocprofv3 run with --kernel-trace (buffer_records.kernel_dispatch)")
    return Trace(format=FORMAT, source=label, columns=cols, device_names=sorted(set(devices)), skipped=dict(skipped))


def _dispatch(rec: Any, where: str, label: str, tool: _Tool, cols: Columns, resources: dict, lanes: dict,
              used_agents: set) -> None:
    if not isinstance(rec, dict):
        raise TraceReadError(f"record is a {type(rec).__name__}", file=label, where=where,
                             expected="a kernel dispatch record object")
    info = rec.get("dispatch_info") if isinstance(rec.get("dispatch_info"), dict) else {}
    start, end = _int(rec.get("start_timestamp")), _int(rec.get("end_timestamp"))
    if start is None or end is None or start < 0 or end < start:
        raise TraceReadError(f"start_timestamp={str(rec.get('start_timestamp'))[:30]}, "
                             f"end_timestamp={str(rec.get('end_timestamp'))[:30]}", file=label, where=where,
                             expected="integer ns timestamps with end >= start")
    kid = _int(info.get("kernel_id"))
    if kid is None:
        raise TraceReadError(f"kernel_id {str(info.get('kernel_id'))[:30]}", file=label,
                             where=f"{where}.dispatch_info.kernel_id", expected="an integer kernel id")
    agent = _handle(info.get("agent_id"))
    used_agents.add(agent)
    key = (info.get("private_segment_size"), info.get("group_segment_size"), _xyz(info.get("workgroup_size")))
    try:
        res = resources[key]
    except KeyError:
        scratch, lds, wg = key
        values = {k: v for k, v in (("scratch_bytes", _int(scratch)), ("lds_bytes", _int(lds)),
                                    ("workgroup_size", wg)) if v is not None}
        res = resources[key] = Resources(**values) if values else None
    except TypeError:  # an unhashable size: no resources for this record
        res = None
    corr = rec.get("correlation_id")
    lane_key = (agent, _handle(info.get("queue_id")), _handle(rec.get("stream_id") or info.get("stream_id")))
    tool.kernel_ids.append(kid)
    cols.name.append("")  # resolved from kernel_symbols at the end
    cols.start_ns.append(start)
    cols.end_ns.append(end)
    cols.lane.append(lanes.setdefault(lane_key, lane_key))
    cols.correlation_id.append(_int(corr.get("internal")) if isinstance(corr, dict) else _int(corr))
    cols.dispatch_id.append(_int(info.get("dispatch_id")))
    cols.resources.append(res)
