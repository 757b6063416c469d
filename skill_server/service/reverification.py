"""Re-verification: check each card's claims on this box, or on a Ray fleet, and record a
signed status per card and platform."""
from __future__ import annotations

from skill_server import is_embedded
from skill_server.fleet.dispatch import FleetError, run_fleet
from skill_server.fleet.models import FleetRun
from skill_server.ledger.models import default_recorder, normalise_platform
from skill_server.reverify.run import Reverifier, ReverifyRun, now
from skill_server.reverify.stages import default_gate_runner, default_verifier_runner
from skill_server.service.errors import ServiceError
from skill_server.service.evidence import EvidenceService
from skill_server.service.workspace import Workspace
from verifiers.provenance import detect_platform, read_git_revision


class ReverifyService:
    def __init__(self, ws: Workspace, evidence: EvidenceService):
        self.ws = ws
        self.evidence = evidence

    def reverify(self, card_id: str | None = None, progress=None, *, gates: bool = True, verifier: bool = True,
                 record: bool = True, recorded_by: str | None = None, platform=None, probes=None,
                 gate_runner=None, verifier_runner=None, emulate: bool | None = None, **smoke) -> ReverifyRun:
        """Re-check each card (or one) on this box; record a signed status per card and
        platform, with the verifier's report and results.

        ``progress`` receives ``ReverifyProgress`` events. ``platform``, ``probes``,
        ``gate_runner`` and ``verifier_runner`` replace the box's own (tests, or a caller
        that already knows the platform); ``smoke`` passes ``shapes_override`` /
        ``verifier_on_cpu`` / ``verifier_options`` to the ``Reverifier``. ``emulate``: also run
        the cards' FlyDSL reference arms on gfx950-emulated (recorded under that platform);
        default: with the gates (both are the gfx950 compile work) and the verifier's own runner,
        on a box with no AMD GPU."""
        cards = self.ws.cards(card_id)
        if record:
            self.ws.writable()
        try:
            plat = normalise_platform(platform or detect_platform())
        except ValueError as exc:
            raise ServiceError(f"platform: {exc}") from None
        rev = None if is_embedded(self.ws.project_root) else read_git_revision(self.ws.project_root).text
        who = recorded_by or default_recorder("reverify")
        rv = Reverifier(project_root=self.ws.project_root, platform=plat, recorded_by=who, git_rev=rev,
                        probes=dict(probes) if probes is not None else None,
                        gate_runner=(gate_runner or default_gate_runner) if gates else None,
                        verifier_runner=(verifier_runner or default_verifier_runner) if verifier else None,
                        emulated_runner=default_verifier_runner if (
                            emulate if emulate is not None else gates and verifier and verifier_runner is None
                            and plat.runtime != "rocm") else None,
                        **smoke)
        started = now()
        outcomes = []
        for run in rv.run(cards, progress):
            outcomes.append(run.result)
            self.evidence.record_card_run(run, run.platform or plat, who, rev, record=record)
        return ReverifyRun(platform=plat, git_rev=rev, started_at=started, finished_at=now(), cards=outcomes,
                              ledger=self.ws.ledger.store.location if record else None)

    def reverify_on_fleet(self, address: str, card_id: str | None = None, progress=None, *, gates: bool = True,
                          verifier: bool = True, record: bool = True, recorded_by: str | None = None,
                          cpu_smoke: bool = False, platforms: list[str] | None = None,
                          task_timeout_s: float | None = None) -> FleetRun:
        """Re-verify on a Ray cluster: one task per (card, platform the cluster offers), run
        on a node advertising that platform; every outcome recorded here (``fleet.py``)."""
        if record:
            self.ws.writable()
        cards = self.ws.cards(card_id)
        try:
            return run_fleet(self.evidence, address, cards, progress=progress, gates=gates, verifier=verifier,
                             record=record,
                             recorded_by=recorded_by or default_recorder("reverify --ray"), cpu_smoke=cpu_smoke,
                             platforms=platforms, task_timeout_s=task_timeout_s)
        except FleetError as exc:
            raise ServiceError(str(exc)) from None
