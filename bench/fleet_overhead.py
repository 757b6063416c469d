"""The overhead of dispatching the CPU smoke re-verification of all cards to two local Ray
workers, against running it locally, side by side in one run.

    python bench/fleet_overhead.py [--out bench/results]

Local: ``SkillService.reverify`` with the CPU smoke settings (``fleet_task.cpu_smoke_settings``:
CPU arms, the smallest smoke shape, quick options, TRITON_INTERPRET=1, no gates), recorded in
a fresh SQLite ledger. Fleet: the same work through ``reverify_on_fleet`` on a loopback Ray
cluster (a head running nothing, two worker nodes of one CPU each, both advertising this box's
platform as ``fleet-node`` would), one task per card, recorded in another fresh ledger. The
machine has 2 cores, so the two workers share them with the driver. Writes
``fleet_overhead.json`` / ``.md`` under ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform as _platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.update({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0", "TRITON_INTERPRET": "1"})
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args()
    from ray.cluster_utils import Cluster

    from skill_server.fleet.node import node_resources
    from skill_server.fleet.task import cpu_smoke_settings
    from skill_server.ledger.models import PlatformInfo, normalise_platform
    from skill_server.service.facade import SkillService
    from verifiers.provenance import detect_platform

    tmp = Path(tempfile.mkdtemp(prefix="skill-fleet-bench-"))
    os.environ["SKILL_SERVER_STATE_DIR"] = str(tmp)
    local = SkillService(REPO / "skills", ledger_path=tmp / "local.sqlite")
    cards = [local.catalog.cards[c] for c in sorted(local.catalog.cards)]
    plat = normalise_platform(detect_platform())
    smoke = cpu_smoke_settings(cards)
    t0 = time.perf_counter()
    rep = local.reverify(gates=False, platform=PlatformInfo(**{**plat.model_dump(), "runtime": "cpu"}), **smoke)
    local_s = time.perf_counter() - t0
    load_local = round(os.getloadavg()[0], 2)
    local_status = {c.card_id: c.status for c in rep.cards}
    print("local", round(local_s, 1), local_status, flush=True)

    resources = node_resources(plat)
    t_cluster = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                            "object_store_memory": 80 * 1024 * 1024})
    for _ in range(2):
        cluster.add_node(num_cpus=1, resources=resources, object_store_memory=80 * 1024 * 1024)
    cluster.wait_for_nodes()
    cluster_s = time.perf_counter() - t_cluster
    try:
        fleet = SkillService(REPO / "skills", ledger_path=tmp / "fleet.sqlite")
        t0 = time.perf_counter()
        frep = fleet.reverify_on_fleet(cluster.address, gates=False, cpu_smoke=True)
        fleet_s = time.perf_counter() - t0
        load_fleet = round(os.getloadavg()[0], 2)
    finally:
        cluster.shutdown()
    fleet_status = {o.card_id: o.status for o in frep.outcomes}
    in_task = round(sum(o.seconds or 0 for o in frep.outcomes), 1)
    # the fleet's critical path: the busiest node's in-task seconds; the rest of its wall time is dispatch
    per_node: dict[str, float] = {}
    for o in frep.outcomes:
        per_node[o.node or "?"] = per_node.get(o.node or "?", 0.0) + (o.seconds or 0.0)
    dispatch_s = round(fleet_s - max(per_node.values(), default=0.0), 1)
    print("fleet", round(fleet_s, 1), fleet_status, flush=True)
    doc = {"command": "python bench/fleet_overhead.py", "date": datetime.now(UTC).isoformat(timespec="seconds"),
           "device": f"{_platform.machine()} CPU, {os.cpu_count()} cores (no GPU); Ray "
                     f"{__import__('ray').__version__}; 2 worker nodes x 1 CPU + a head running nothing",
           "load_average_1min": {"after_local": load_local, "after_fleet": load_fleet},
           "cards": len(cards), "local_seconds": round(local_s, 1), "fleet_seconds": round(fleet_s, 1),
           "overhead_seconds": round(fleet_s - local_s, 1), "fleet_in_task_seconds": in_task,
           "dispatch_overhead_seconds": dispatch_s,
           "cluster_start_seconds": round(cluster_s, 1), "same_statuses": local_status == fleet_status,
           "local_statuses": local_status, "fleet_outcomes": [o.model_dump(mode="json") for o in frep.outcomes]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fleet_overhead.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = ["# Fleet dispatch overhead: CPU smoke re-verification of every card", "",
             f"`{doc['command']}`, {doc['date']}, {doc['device']}.", "",
             "| run | wall s | note |", "|---|---|---|",
             f"| local (`reverify`, smoke settings) | {doc['local_seconds']} | {len(cards)} cards in turn |",
             f"| fleet (`reverify --ray`, 2 workers) | {doc['fleet_seconds']} | {len(cards)} tasks; "
             f"{in_task} s inside the tasks |",
             f"| difference (fleet - local) | {doc['overhead_seconds']} | goal <= 10 s (two workers run in parallel) |",
             f"| dispatch overhead | {dispatch_s} | fleet wall - the busiest node's in-task seconds |", "",
             f"Cluster start (not counted): {doc['cluster_start_seconds']} s. Same statuses local and fleet: "
             f"{doc['same_statuses']} (local {local_status}; fleet {fleet_status}). Load average (1 min) after "
             f"the local run {load_local}, after the fleet run {load_fleet} (the box is shared).", "",
             "| card | outcome | status | in the task s (node's clock) | node |", "|---|---|---|---|---|"]
    lines += [f"| {o['card_id']} | {o['outcome']} | {o['status']} | {round(o['seconds'] or 0, 1)} | {o.get('node') or ''} |"
              for o in doc["fleet_outcomes"]]
    (out / "fleet_overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
