"""What fleet re-verification sends, gets back and reports (pure data).

A node advertises its platform as Ray custom resources (``fleet_node``):
``gpu_gen:<generation>`` and ``gpu_vendor:<amd|nvidia|cpu>``, one unit each, so a node runs
one re-verification at a time (timings on a shared GPU are noise). A task asks for one
unit of ``gpu_gen:<generation>``; Ray places it on a node that offers it.
"""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from skill_server.ledger.models import PlatformInfo
from skill_server.reverify.models import CardReverification, short

GEN_PREFIX = "gpu_gen:"
VENDOR_PREFIX = "gpu_vendor:"
VENDOR_RUNTIME = {"amd": "rocm", "nvidia": "cuda", "cpu": "cpu"}
RUNTIME_VENDOR = {v: k for k, v in VENDOR_RUNTIME.items()}


class FleetTarget(BaseModel):
    """A platform some node of the cluster offers."""

    model_config = ConfigDict(frozen=True)

    generation: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,40}$")
    vendor: Literal["amd", "nvidia", "cpu"]

    @property
    def resource(self) -> str:
        return GEN_PREFIX + self.generation

    @property
    def runtime(self) -> str:
        return VENDOR_RUNTIME[self.vendor]

    @property
    def key(self) -> str:
        return f"{self.runtime}/{self.generation}"


class FleetOptions(BaseModel):
    """How each task runs (sent to the nodes as JSON)."""

    gates: bool = True
    verifier: bool = True
    cpu_smoke: bool = Field(False, description="CPU problems: the CPU arms, each problem's smallest smoke shape, quick "
                                               "options, TRITON_INTERPRET=1 (plumbing, not speed)")
    recorded_by: str = "reverify (fleet)"
    git_rev: str | None = None


class NodeRun(BaseModel):
    """What a node sends back for one (card, platform) task. The driver trusts none of it
    blindly: the report is re-bound to the driver's own card and the records re-derived."""

    card_id: str
    target: FleetTarget
    card_digest: str = Field(description="sha256 of the node's SKILL.md: the node runs the same card")
    node_id: str
    hostname: str
    platform: PlatformInfo
    result: CardReverification
    report_json: str | None = None
    seconds: float


Outcome = Literal["done", "lost", "rejected"]


class FleetOutcome(BaseModel):
    card_id: str
    target: FleetTarget
    outcome: Outcome = Field(description="done: ran and recorded; lost: the node died or the task could not finish "
                                         "(recorded as not re-verified); rejected: the node's answer was refused")
    status: str
    reason: str
    node: str | None = Field(None, description="host (node id prefix) the task ran on")
    measured_on: str | None = Field(None, description="platform key the node measured on")
    report_id: str | None = None
    attempts_note: str | None = None
    seconds: float | None = None


class FleetRun(BaseModel):
    address: str
    started_at: datetime
    finished_at: datetime
    targets: list[FleetTarget]
    outcomes: list[FleetOutcome]
    ledger: str | None = None

    @property
    def findings(self) -> list[FleetOutcome]:
        """What a scheduled run should alert on: a drift, a failure, a lost or refused task."""
        return [o for o in self.outcomes if o.outcome != "done" or o.status in ("FAILED", "DRIFTED")]

    def table(self) -> str:
        rows = [("card", "platform", "outcome", "status", "node", "measured on", "reason")]
        rows += [(o.card_id, o.target.key, o.outcome, o.status, o.node or "-", o.measured_on or "-", short(o.reason, 80))
                 for o in sorted(self.outcomes, key=lambda o: (o.card_id, o.target.key))]
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
        return "\n".join("  ".join(f"{c:<{widths[i]}}" for i, c in enumerate(r[:6])) + "  " + r[6] for r in rows)


class FleetProgress(BaseModel):
    done: int
    total: int
    card_id: str
    target: str
    event: Literal["submitted", "done", "lost", "rejected"]
    message: str
