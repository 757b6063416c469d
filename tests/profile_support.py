"""Builders for profile tests: rocpd databases, rocprofv3 CSV text, device kernels on real CPU traces.

``rocpd_database`` writes the tables of rocprofiler-sdk's rocpd schema 3.0.x (the columns
its ``rocpd_tables.sql`` declares for the tables a kernel reader touches), each under the
per-run suffix ``_<uuid>`` with the unsuffixed view rocprofv3 creates beside it.
"""
from __future__ import annotations

import copy
import sqlite3
from dataclasses import dataclass
from pathlib import Path

UUID = "0000019a3f2e7c1d"
GUID = "3f2e7c1d-0000-7000-8000-00000000beef"

# table -> column definitions (rocpd 3.0.x)
ROCPD_TABLES: dict[str, str] = {
    "rocpd_metadata": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "tag" TEXT NOT NULL, "value" TEXT NOT NULL',
    "rocpd_string": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "string" TEXT NOT NULL UNIQUE',
    "rocpd_info_node": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "hash" BIGINT NOT NULL UNIQUE, '
                       '"machine_id" TEXT NOT NULL UNIQUE, "system_name" TEXT, "hostname" TEXT, "release" TEXT, '
                       '"version" TEXT, "hardware_name" TEXT, "domain_name" TEXT',
    "rocpd_info_process": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                          '"ppid" INTEGER, "pid" INTEGER NOT NULL, "init" BIGINT, "fini" BIGINT, "start" BIGINT, '
                          '"end" BIGINT, "command" TEXT, "environment" JSONB DEFAULT "{}" NOT NULL, '
                          '"extdata" JSONB DEFAULT "{}" NOT NULL',
    "rocpd_info_thread": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                         '"ppid" INTEGER, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL, "name" TEXT, '
                         '"start" BIGINT, "end" BIGINT, "extdata" JSONB DEFAULT "{}" NOT NULL',
    "rocpd_info_agent": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                        '"pid" INTEGER NOT NULL, "type" TEXT CHECK ("type" IN (\'CPU\', \'GPU\', \'NIC\')), '
                        '"absolute_index" INTEGER, "logical_index" INTEGER, "type_index" INTEGER, "uuid" INTEGER, '
                        '"name" TEXT, "model_name" TEXT, "vendor_name" TEXT, "product_name" TEXT, "user_name" TEXT, '
                        '"extdata" JSONB DEFAULT "{}" NOT NULL',
    "rocpd_info_queue": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                        '"pid" INTEGER NOT NULL, "name" TEXT, "extdata" JSONB DEFAULT "{}" NOT NULL',
    "rocpd_info_stream": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                         '"pid" INTEGER NOT NULL, "name" TEXT, "extdata" JSONB DEFAULT "{}" NOT NULL',
    "rocpd_info_code_object": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                              '"pid" INTEGER NOT NULL, "agent_id" INTEGER, "uri" TEXT, "load_base" BIGINT, '
                              '"load_size" BIGINT, "load_delta" BIGINT, "storage_type" TEXT, '
                              '"extdata" JSONB DEFAULT "{}" NOT NULL',
    "rocpd_info_kernel_symbol": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                                '"pid" INTEGER NOT NULL, "code_object_id" INTEGER NOT NULL, "kernel_name" TEXT, '
                                '"display_name" TEXT, "kernel_object" INTEGER, "kernarg_segment_size" INTEGER, '
                                '"kernarg_segment_alignment" INTEGER, "group_segment_size" INTEGER, '
                                '"private_segment_size" INTEGER, "sgpr_count" INTEGER, "arch_vgpr_count" INTEGER, '
                                '"accum_vgpr_count" INTEGER, "extdata" JSONB DEFAULT "{}" NOT NULL',
    "rocpd_event": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "category_id" INTEGER, '
                   '"stack_id" INTEGER, "parent_stack_id" INTEGER, "correlation_id" INTEGER, '
                   '"call_stack" JSONB DEFAULT "{}" NOT NULL, "line_info" JSONB DEFAULT "{}" NOT NULL, '
                   '"extdata" JSONB DEFAULT "{}" NOT NULL',
    "rocpd_kernel_dispatch": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                             '"pid" INTEGER NOT NULL, "tid" INTEGER, "agent_id" INTEGER NOT NULL, '
                             '"kernel_id" INTEGER NOT NULL, "dispatch_id" INTEGER NOT NULL, "queue_id" INTEGER NOT NULL, '
                             '"stream_id" INTEGER NOT NULL, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, '
                             '"private_segment_size" INTEGER, "group_segment_size" INTEGER, '
                             '"workgroup_size_x" INTEGER NOT NULL, "workgroup_size_y" INTEGER NOT NULL, '
                             '"workgroup_size_z" INTEGER NOT NULL, "grid_size_x" INTEGER NOT NULL, '
                             '"grid_size_y" INTEGER NOT NULL, "grid_size_z" INTEGER NOT NULL, "region_name_id" INTEGER, '
                             '"event_id" INTEGER, "graph_exec_id" INTEGER, "graph_node_id" INTEGER, '
                             '"extdata" JSONB DEFAULT "{}" NOT NULL',
    "rocpd_memory_copy": '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, '
                         '"pid" INTEGER NOT NULL, "tid" INTEGER, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, '
                         '"name_id" INTEGER NOT NULL, "dst_agent_id" INTEGER, "dst_address" INTEGER, '
                         '"src_agent_id" INTEGER, "src_address" INTEGER, "size" INTEGER NOT NULL, "queue_id" INTEGER, '
                         '"stream_id" INTEGER, "region_name_id" INTEGER, "event_id" INTEGER, '
                         '"extdata" JSONB DEFAULT "{}" NOT NULL',
}


@dataclass
class Dispatch:
    kernel: str
    start: int
    end: int
    queue: int = 1
    stream: int = 1
    agent: int = 2
    correlation: int | None = None
    vgpr: int = 128
    lds: int = 0


def rocpd_database(path: Path, dispatches: list[Dispatch], *, version: str = "3.0.3",
                   product: str = "AMD Instinct MI355X", arch: str = "gfx950", copies: int = 1) -> Path:
    """A rocpd database as rocprofv3 writes it for a --kernel-trace run."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=OFF")  # a throw-away test file: no fsync per statement
    con.execute("PRAGMA synchronous=OFF")
    for table, columns in ROCPD_TABLES.items():
        con.execute(f'CREATE TABLE "{table}_{UUID}" ({columns})')
        con.execute(f'CREATE VIEW "{table}" AS SELECT * FROM "{table}_{UUID}"')
    t = lambda name: f'"{name}_{UUID}"'  # noqa: E731
    for tag, value in (("schema_version", version), ("uuid", UUID), ("guid", GUID)):
        con.execute(f"INSERT INTO {t('rocpd_metadata')} (tag, value) VALUES (?, ?)", (tag, value))
    con.execute(f"INSERT INTO {t('rocpd_info_node')} (guid, hash, machine_id, hostname) VALUES (?, 1, 'm0', 'box')", (GUID,))
    con.execute(f"INSERT INTO {t('rocpd_info_process')} (guid, nid, pid, command) VALUES (?, 1, 4242, 'python')", (GUID,))
    con.execute(f"INSERT INTO {t('rocpd_info_thread')} (guid, nid, pid, tid) VALUES (?, 1, 1, 4242)", (GUID,))
    con.execute(f"INSERT INTO {t('rocpd_info_agent')} (guid, nid, pid, type, absolute_index, name, product_name) "
                "VALUES (?, 1, 1, 'CPU', 0, 'AMD EPYC', 'AMD EPYC')", (GUID,))
    con.execute(f"INSERT INTO {t('rocpd_info_agent')} (guid, nid, pid, type, absolute_index, name, product_name) "
                "VALUES (?, 1, 1, 'GPU', 1, ?, ?)", (GUID, arch, product))
    con.execute(f"INSERT INTO {t('rocpd_info_queue')} (guid, nid, pid, name) VALUES (?, 1, 1, 'q0'), (?, 1, 1, 'q1')",
                (GUID, GUID))
    con.execute(f"INSERT INTO {t('rocpd_info_stream')} (guid, nid, pid, name) VALUES (?, 1, 1, 's0'), (?, 1, 1, 's1')",
                (GUID, GUID))
    con.execute(f"INSERT INTO {t('rocpd_info_code_object')} (guid, nid, pid, agent_id, uri) VALUES (?, 1, 1, 2, 'file://x')",
                (GUID,))
    symbols: dict[str, int] = {}
    for i, d in enumerate(dispatches, start=1):
        if d.kernel not in symbols:
            cur = con.execute(
                f"INSERT INTO {t('rocpd_info_kernel_symbol')} (guid, nid, pid, code_object_id, kernel_name, display_name, "
                "sgpr_count, arch_vgpr_count, accum_vgpr_count, group_segment_size, private_segment_size) "
                "VALUES (?, 1, 1, 1, ?, ?, 64, ?, 0, ?, 0)", (GUID, "_Z" + d.kernel, d.kernel, d.vgpr, d.lds))
            symbols[d.kernel] = cur.lastrowid
        ev = con.execute(f"INSERT INTO {t('rocpd_event')} (guid, correlation_id) VALUES (?, ?)",
                         (GUID, d.correlation if d.correlation is not None else i)).lastrowid
        con.execute(
            f"INSERT INTO {t('rocpd_kernel_dispatch')} (guid, nid, pid, tid, agent_id, kernel_id, dispatch_id, queue_id, "
            "stream_id, start, \"end\", private_segment_size, group_segment_size, workgroup_size_x, workgroup_size_y, "
            "workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, event_id) "
            "VALUES (?, 1, 1, 1, ?, ?, ?, ?, ?, ?, ?, 0, ?, 256, 1, 1, 65536, 1, 1, ?)",
            (GUID, d.agent, symbols[d.kernel], i, d.queue, d.stream, d.start, d.end, d.lds, ev))
    name_id = con.execute(f"INSERT INTO {t('rocpd_string')} (guid, string) VALUES (?, 'MEMORY_COPY_HOST_TO_DEVICE')",
                          (GUID,)).lastrowid
    for _ in range(copies):
        con.execute(f"INSERT INTO {t('rocpd_memory_copy')} (guid, nid, pid, start, \"end\", name_id, size) "
                    "VALUES (?, 1, 1, 1, 2, ?, 4096)", (GUID, name_id))
    con.commit()
    con.close()
    return path


# ---- rocprofv3 kernel_trace.csv (ROCm 7 columns) ----------------------------------------------

ROCM7_COLUMNS = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
                 "Correlation_Id", "Start_Timestamp", "End_Timestamp", "Private_Segment_Size", "Group_Segment_Size",
                 "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y",
                 "Grid_Size_Z", "Arch_VGPR_Count", "Accum_VGPR_Count", "SGPR_Count", "LDS_Block_Size"]


def kernel_trace_csv(kernels: list[tuple[str, int]], *, gap_ns: int = 2_000, start: int = 10**12,
                     queue: int = 1, first_dispatch: int = 1) -> str:
    """One queue's dispatches in launch order: (kernel name, duration ns), ``gap_ns`` apart."""
    lines = [",".join(f'"{c}"' for c in ROCM7_COLUMNS)]
    t = start
    for i, (name, dur) in enumerate(kernels, start=first_dispatch):
        quoted = '"' + name.replace('"', '""') + '"'
        lines.append(f'"KERNEL_DISPATCH","Agent 4",{queue},{queue},3071,{i},{i},{quoted},{i},{t},{t + dur},'
                     "0,0,256,1,1,65536,1,1,128,0,64,0")
        t += dur + gap_ns
    return "\r\n".join(lines) + "\r\n"


# ---- device kernels on a real CPU trace ----------------------------------------------------------

def graft_kernels(doc: dict, launches: list[tuple[int, str]], device: str | None = "NVIDIA H200",
                  runtime: str = "cudaLaunchKernel") -> dict:
    """Launch ``(External id of a real CPU op, kernel name)`` pairs, in order, the way Kineto
    records them on CUDA and ROCm: a runtime call inside the op (same External id,
    a correlation id) and the kernel on stream 7 with that External id and correlation."""
    doc = copy.deepcopy(doc)
    ops = {e["args"]["External id"]: e for e in doc["traceEvents"]
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    gpu_ts = max(e["ts"] + e.get("dur", 0) for e in doc["traceEvents"] if isinstance(e.get("ts"), (int, float)))
    for n, (ext, kernel) in enumerate(launches):
        op = ops[ext]
        corr = 7000 + n
        launch_ts = op["ts"] + op["dur"] * (0.2 + 0.6 * (n % 5) / 5)
        doc["traceEvents"] += [
            {"ph": "X", "cat": "cuda_runtime", "name": runtime, "pid": op["pid"], "tid": op["tid"],
             "ts": launch_ts, "dur": 0.01, "args": {"External id": ext, "cbid": 211, "correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": gpu_ts + 20 * n, "dur": 10.0 + n,
             "args": {"External id": ext, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": corr,
                      "registers per thread": 128, "shared memory": 16384, "grid": [64, 1, 1], "block": [128, 1, 1]}},
        ]
    if device is not None:
        doc["deviceProperties"] = [{"id": 0, "name": device, "computeMajor": 9, "computeMinor": 0}]
    return doc


def cpu_ops(doc: dict, name: str) -> list[dict]:
    """The real trace's cpu_op events of one op, in time order."""
    return sorted((e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e.get("name") == name),
                  key=lambda e: e["ts"])
