"""A real local Ray cluster on loopback for the fleet tests: a head that runs nothing and
two worker nodes advertising different platforms (each its own raylet, as on two boxes),
built with Ray's own multi-node harness (``ray.cluster_utils.Cluster``).

Every address is 127.0.0.1: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray use the
loopback address for its nodes instead of the machine's network interface; usage stats
are off (nothing leaves the machine).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
GFX950_NODE = {"gpu_gen:gfx950": 1, "gpu_vendor:amd": 1}
H200_NODE = {"gpu_gen:sm_90": 1, "gpu_vendor:nvidia": 1}


def start_cluster():
    """(cluster, gfx950 node, sm_90 node). Node death is noticed within about two seconds."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 * 1024 * 1024,
        "_system_config": {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                           "health_check_failure_threshold": 3}})
    amd = cluster.add_node(resources=GFX950_NODE, **NODE)
    nvidia = cluster.add_node(resources=H200_NODE, **NODE)
    cluster.wait_for_nodes()
    addresses = {n.node_ip_address for n in (cluster.head_node, amd, nvidia)}
    if addresses != {"127.0.0.1"}:
        cluster.shutdown()
        raise RuntimeError(f"the test cluster must stay on loopback, its nodes are at {sorted(addresses)}: "
                           "set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before Ray is first imported")
    return cluster, amd, nvidia


def raylet_pid(node) -> int:  # noqa: ANN001 - ray._private.node.Node
    from ray._private import ray_constants

    return node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid


def task_process_on(node, name: str = "reverify ", timeout: float = 120.0) -> int:  # noqa: ANN001
    """The pid of the worker process of ``node`` executing ``name`` (Ray titles a busy
    worker ``ray::<task name>``; fleet tasks are named "reverify CARD @ PLATFORM"), once it runs."""
    parent = raylet_pid(node)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if cmd.startswith(f"ray::{name}") and ppid == parent:
                return int(proc.name)
        time.sleep(0.2)
    raise TimeoutError(f"no worker of raylet {parent} ran {name} within {timeout}s")


def env_for_driver(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SKILL_SERVER_TOKEN"}
    env.update(RAY_ENV)
    env.update(extra)
    return env
