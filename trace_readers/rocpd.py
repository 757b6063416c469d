"""rocpd: the SQLite database rocprofv3 writes by default from ROCm 7 (``<pid>_results.db``).

Schema as rocprofiler-sdk documents it (``rocprofiler-sdk-rocpd``, versions 3.0.x):
every table is written with a per-run suffix (``rocpd_kernel_dispatch_<uuid>``) and
exposed through a view without it. This reader uses the views:

- ``rocpd_metadata(tag, value)``: ``tag = 'schema_version'`` holds e.g. ``3.0.2``;
- ``rocpd_kernel_dispatch(id, guid, nid, pid, tid, agent_id, kernel_id, dispatch_id,
  queue_id, stream_id, start, end, private_segment_size, group_segment_size,
  workgroup_size_x/y/z, grid_size_x/y/z, region_name_id, event_id, ...)``, ns timestamps;
- ``rocpd_info_kernel_symbol(id, guid, kernel_name, display_name, sgpr_count,
  arch_vgpr_count, accum_vgpr_count, ...)`` for names and registers;
- ``rocpd_event(id, guid, correlation_id, ...)`` for the correlation id;
- ``rocpd_info_agent(id, guid, type, name, product_name, ...)`` for the device.

Schema major version 4 moved timestamps to a separate table; it and anything else
outside 3.x is refused with its version and the converter to run, never guessed at.
The database is opened read-only (``mode=ro``, ``immutable=1``); content given as bytes
(stdin, gzip) is deserialised into memory.
"""
from __future__ import annotations

import sqlite3
import urllib.parse
from collections import Counter

from trace_readers.errors import TraceReadError
from trace_readers.records import KERNEL_DISPATCH, Columns, KernelDispatch, Resources, Trace
from trace_readers.source import CONVERT_HINT, Source

FORMAT = "rocpd"
SUPPORTED_MAJOR = 3
_DISPATCHES = """
SELECT K.id, K.start, K."end", K.agent_id, K.queue_id, K.stream_id, K.dispatch_id, E.correlation_id,
       S.display_name, S.kernel_name, K.private_segment_size, K.group_segment_size,
       S.arch_vgpr_count, S.accum_vgpr_count, S.sgpr_count,
       K.workgroup_size_x, K.workgroup_size_y, K.workgroup_size_z
FROM rocpd_kernel_dispatch K
LEFT JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
LEFT JOIN rocpd_event E ON E.id = K.event_id AND E.guid = K.guid
ORDER BY K.start, K.id
"""
_AGENTS = "SELECT id, name, product_name FROM rocpd_info_agent WHERE type = 'GPU'"


def _connect(source: Source) -> sqlite3.Connection:
    if source.sqlite_path is not None:
        uri = "file:" + urllib.parse.quote(str(source.sqlite_path.resolve())) + "?mode=ro&immutable=1"
        return sqlite3.connect(uri, uri=True)
    con = sqlite3.connect(":memory:")
    con.deserialize(source.sqlite_bytes or b"")
    return con


def _objects(con: sqlite3.Connection) -> set[str]:
    return {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _schema_version(con: sqlite3.Connection, label: str, objects: set[str]) -> str:
    if "rocpd_metadata" not in objects:
        shown = ", ".join(sorted(objects)[:8]) or "none"
        hint = "; an Nsight Systems export? " if any(o.startswith(("CUPTI", "NVTX", "TARGET_INFO")) for o in objects) else "; "
        raise TraceReadError(f"a SQLite database but not a rocpd one (no rocpd_metadata; tables: {shown}){hint}"
                             "pass a rocprofv3 results.db, kernel_trace.csv or a torch trace", file=label)
    versions = sorted({str(row[0]) for row in con.execute(
        "SELECT value FROM rocpd_metadata WHERE tag = 'schema_version'")})
    if len(versions) != 1:
        raise TraceReadError(f"rocpd database with {'no' if not versions else 'several'} schema_version entries "
                             f"({', '.join(versions) or 'none'})", file=label, where="rocpd_metadata",
                             expected="exactly one schema_version tag")
    return versions[0]


def _major(version: str) -> int | None:
    head = version.strip().split(".", 1)[0]
    return int(head) if head.isdigit() else None


def read_rocpd(source: Source) -> Trace:
    label = source.label
    try:
        con = _connect(source)
    except (sqlite3.Error, OverflowError) as exc:
        raise TraceReadError(f"cannot open the SQLite database: {exc}", file=label) from None
    try:
        return _read(con, label)
    except sqlite3.Error as exc:
        raise TraceReadError(f"unreadable rocpd database ({exc}); the file may be truncated or damaged",
                             file=label, expected=f"a complete rocprofv3 results.db, or {CONVERT_HINT}") from None
    finally:
        con.close()


def _read(con: sqlite3.Connection, label: str) -> Trace:
    objects = _objects(con)
    version = _schema_version(con, label, objects)
    if _major(version) != SUPPORTED_MAJOR:
        raise TraceReadError(
            f"unsupported rocpd schema version {version} (this reader knows {SUPPORTED_MAJOR}.x); {CONVERT_HINT}",
            file=label, where="rocpd_metadata.schema_version", expected=f"schema version {SUPPORTED_MAJOR}.x",
        )
    missing = [v for v in ("rocpd_kernel_dispatch", "rocpd_info_kernel_symbol", "rocpd_event") if v not in objects]
    if missing:
        raise TraceReadError(f"rocpd database without {', '.join(missing)}", file=label,
                             expected=f"the rocpd {version} views written by rocprofv3")
    dispatches: list[KernelDispatch] = []
    names: dict[str, str] = {}
    resources: dict[tuple, Resources | None] = {}
    used_agents: set = set()
    lanes: dict[tuple, tuple] = {}
    for row in con.execute(_DISPATCHES):
        (rid, start, end, agent, queue, stream, dispatch_id, corr, display, symbol, scratch, lds,
         vgpr, agpr, sgpr, wx, wy, wz) = row
        where = f"rocpd_kernel_dispatch id {rid}"
        if type(start) is not int or type(end) is not int or start < 0 or end < start:
            raise TraceReadError(f"start={str(start)[:30]}, end={str(end)[:30]}", file=label, where=where,
                                 expected="integer ns timestamps with end >= start")
        raw = display if isinstance(display, str) and display.strip() else symbol
        if not isinstance(raw, str) or not raw.strip():
            raise TraceReadError("the dispatch's kernel has no name (kernel_id not in rocpd_info_kernel_symbol)",
                                 file=label, where=where, expected="a kernel symbol for every dispatch")
        name = names.get(raw)
        if name is None:
            name = names[raw] = raw.strip()
        key = (scratch, lds, vgpr, agpr, sgpr, wx, wy, wz)
        res = resources.get(key, False)
        if res is False:
            ints = [v if type(v) is int and v >= 0 else None for v in key]
            values = dict(zip(("scratch_bytes", "lds_bytes", "vgpr_count", "accum_vgpr_count", "sgpr_count"), ints[:5]))
            if all(v is not None for v in ints[5:8]):
                values["workgroup_size"] = tuple(ints[5:8])
            values = {k: v for k, v in values.items() if v is not None}
            res = resources[key] = Resources(**values) if values else None
        used_agents.add(agent)
        lane = lanes.setdefault((agent, queue, stream), (agent, queue, stream))
        dispatches.append(KernelDispatch(name, start, end, len(dispatches), lane, corr if type(corr) is int else None,
                                         dispatch_id if type(dispatch_id) is int else None, KERNEL_DISPATCH, res, None))
    if not dispatches:
        raise TraceReadError("no kernel dispatches in the database", file=label,
                             expected="a rocprofv3 run with --kernel-trace (or --sys-trace)")
    devices = []
    if "rocpd_info_agent" in objects:
        for aid, arch, product in con.execute(_AGENTS):
            if aid in used_agents:
                parts = [p.strip() for p in (product, arch) if isinstance(p, str) and p.strip()]
                if parts:
                    devices.append(parts[0] if len(parts) == 1 or parts[0] == parts[1] else f"{parts[0]} ({parts[1]})")
    skipped: Counter = Counter()
    if "rocpd_memory_copy" in objects:
        n = con.execute("SELECT COUNT(*) FROM rocpd_memory_copy").fetchone()[0]
        if n:
            skipped["MEMORY_COPY"] = n
    return Trace(format=FORMAT, source=label, columns=Columns.of(dispatches), _records=dispatches, device_names=sorted(set(devices)),
                 skipped=dict(skipped), notes=[f"rocpd schema version {version}"])
