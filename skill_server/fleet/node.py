"""A fleet node: what this box advertises to Ray, and the ``ray start`` line that does it.

The platform comes from the project's own detector (``verifiers.provenance.detect_platform``):
``gpu_gen:<generation>`` (gfx950, sm_90, ... ; on a CPU box the machine arch) and
``gpu_vendor:<amd|nvidia|cpu>``, one unit each: a node runs one re-verification at a time.
"""
from __future__ import annotations

import json
import shutil
import sys

from skill_server.fleet.models import GEN_PREFIX, RUNTIME_VENDOR, VENDOR_PREFIX
from skill_server.ledger.models import PlatformInfo


def node_resources(platform: PlatformInfo) -> dict[str, float]:
    if not platform.generation:
        raise ValueError(f"the platform of this box has no generation ({platform.device}): pass --generation")
    return {GEN_PREFIX + platform.generation: 1.0, VENDOR_PREFIX + RUNTIME_VENDOR[platform.runtime]: 1.0}


def ray_start_command(resources: dict[str, float], *, head: bool, address: str | None, port: int | None,
                      num_cpus: int | None, node_ip: str | None, extra: list[str]) -> list[str]:
    ray = shutil.which("ray") or f"{sys.executable} -m ray.scripts.scripts"
    argv = ray.split() + ["start"]
    if head:
        argv += ["--head", f"--port={port or 6379}", "--include-dashboard=false", "--disable-usage-stats"]
    else:
        argv += [f"--address={address}"]
    if node_ip:
        argv.append(f"--node-ip-address={node_ip}")
    if num_cpus is not None:
        argv.append(f"--num-cpus={num_cpus}")
    argv.append("--resources=" + json.dumps(resources, sort_keys=True, separators=(",", ":")))
    return argv + list(extra)
