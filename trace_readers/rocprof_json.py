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
formatted name, else the demangled one, else the raw symbol. The file is parsed whole
(bounded by the size limit); ROCm 7 writes the rocpd database by default, which is read
row by row instead.
"""
from __future__ import annotations

import json
from collections import Counter
from typing import Any

from trace_readers.errors import TraceReadError
from trace_readers.records import KERNEL_DISPATCH, Columns, KernelDispatch, Resources, Trace
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


def read_rocprof_json(source: Source) -> Trace:
    label = source.label
    try:
        text = "".join(source.text_chunks())
    except READ_ERRORS + (SizeLimitExceeded,) as exc:
        raise read_error(exc, label) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.msg.startswith("Unterminated") or not text[exc.pos:].strip()
        raise TraceReadError(f"invalid JSON: {exc.msg}" + ("; the file looks truncated" if truncated else ""),
                             file=label, line=exc.lineno, where=f"column {exc.colno}",
                             expected="a complete rocprofv3 results.json") from None
    except RecursionError:
        raise TraceReadError("JSON nested too deeply", file=label, expected="a rocprofv3 results.json") from None
    del text
    tools = doc.get(TOOL_KEY) if isinstance(doc, dict) else None
    if not isinstance(tools, list):
        raise TraceReadError(f"no {TOOL_KEY!r} list", file=label, where=TOOL_KEY,
                             expected="rocprofv3 --output-format json output")
    dispatches: list[KernelDispatch] = []
    skipped: Counter = Counter()
    used_agents: set = set()
    devices: list[str] = []
    resources: dict[tuple, Resources | None] = {}
    lanes: dict[tuple, tuple] = {}
    for t, tool in enumerate(tools):
        where_tool = f"{TOOL_KEY}[{t}]"
        if not isinstance(tool, dict):
            raise TraceReadError(f"entry is a {type(tool).__name__}", file=label, where=where_tool,
                                 expected="an object with agents, kernel_symbols and buffer_records")
        symbols = _symbols(tool.get("kernel_symbols"))
        records = tool.get("buffer_records") if isinstance(tool.get("buffer_records"), dict) else {}
        for kind, value in records.items():
            if kind != "kernel_dispatch" and isinstance(value, list) and value:
                skipped[kind] += len(value)
        rows = records.get("kernel_dispatch", [])
        if not isinstance(rows, list):
            raise TraceReadError("kernel_dispatch is not a list", file=label,
                                 where=f"{where_tool}.buffer_records.kernel_dispatch", expected="a list of records")
        for i, rec in enumerate(rows):
            where = f"{where_tool}.buffer_records.kernel_dispatch[{i}]"
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
            name = symbols.get(kid) if kid is not None else None
            if name is None:
                raise TraceReadError(f"kernel_id {kid} has no entry in kernel_symbols", file=label,
                                     where=f"{where}.dispatch_info.kernel_id", expected="a kernel id listed in kernel_symbols")
            agent = _handle(info.get("agent_id"))
            used_agents.add(agent)
            key = (info.get("private_segment_size"), info.get("group_segment_size"), _xyz(info.get("workgroup_size")))
            if key not in resources:
                scratch, lds, wg = key
                values = {k: v for k, v in (("scratch_bytes", _int(scratch)), ("lds_bytes", _int(lds)),
                                            ("workgroup_size", wg)) if v is not None}
                resources[key] = Resources(**values) if values else None
            corr = rec.get("correlation_id")
            lane_key = (agent, _handle(info.get("queue_id")), _handle(rec.get("stream_id") or info.get("stream_id")))
            lane = lanes.setdefault(lane_key, lane_key)
            dispatches.append(KernelDispatch(
                name, start, end, len(dispatches), lane,
                _int(corr.get("internal")) if isinstance(corr, dict) else _int(corr),
                _int(info.get("dispatch_id")), KERNEL_DISPATCH, resources[key], None))
        devices += _device_names(tool.get("agents"), used_agents)
    if not dispatches:
        raise TraceReadError("no kernel dispatch records", file=label,
                             expected="a rocprofv3 run with --kernel-trace (buffer_records.kernel_dispatch)")
    return Trace(format=FORMAT, source=label, columns=Columns.of(dispatches), _records=dispatches, device_names=sorted(set(devices)),
                 skipped=dict(skipped))
