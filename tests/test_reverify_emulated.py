"""Re-verification on a box with no AMD GPU: the card's FlyDSL reference arm runs on the
gfx950 emulator through the verifier and is recorded as its own evidence, under the platform
``cpu/gfx950-emulated`` (never an MI355X result), and the card's capability reads met because
the project's own kernel passed its gates and its emulated parity. Everything real: the
gates' FlyDSL compiles, the judge and arm processes, the emulator, a SQLite ledger."""
from __future__ import annotations

import json

import pytest
from ledger_support import CPU, MOE, SKILLS

from skill_server.ledger.results import PlatformInfo
from skill_server.service.facade import SkillService
from tests.emulator_support import require_flydsl_toolchain, require_llvm

pytestmark = [pytest.mark.slow, pytest.mark.flydsl]


def test_reverify_without_an_amd_gpu_records_emulated_parity_as_its_own_evidence(tmp_path):
    require_llvm()
    require_flydsl_toolchain()
    svc = SkillService(SKILLS, ledger_path=tmp_path / "l.sqlite")
    events = []
    report = svc.reverify(card_id=MOE, platform=PlatformInfo(**CPU), recorded_by="tester", progress=events.append)
    box, emu = report.cards
    assert box.platform == "cpu/x86_64" and emu.platform == "cpu/gfx950-emulated"

    # the emulated run: the card's ROCm reference arm, parity held, nothing timed or compared
    stages = {s.name: s for s in emu.stages}
    assert stages["verifier"].status == "PASS", stages["verifier"].reason
    assert stages["verifier"].reason.startswith("gfx950-emulated (CPU, parity only, not timed): parity held")
    assert "flydsl_fp8 vs triton_bf16" in stages["verifier"].reason
    assert stages["claims"].status == "NOT_APPLICABLE" and "recorded, not compared" in stages["claims"].reason
    assert emu.status == "NOT_APPLICABLE_HERE" and emu.shapes[0].verdict == "INCONCLUSIVE"
    assert any(e.stage == "emulated" for e in events)

    # the box itself: the capability is met by the project's kernel (gates + emulated parity)
    assert box.status == "NOT_APPLICABLE_HERE", box.reason
    (cap,) = [p for p in box.prerequisites if p.kind == "capability"]
    assert cap.met is True and "parity on gfx950-emulated" in cap.detail and "not an MI355X run" in cap.detail
    assert any("gate target" in e for e in cap.evidence) and any("gfx950-emulated" in e for e in cap.evidence)

    # recorded: a verified status per platform, the emulated one with its own signed report
    latest = {s.platform: s for s in svc.ledger.latest_statuses()[MOE]}
    assert set(latest) == {"cpu/x86_64", "cpu/gfx950-emulated"}
    assert latest["cpu/gfx950-emulated"].status == "NOT_APPLICABLE_HERE"
    stored = svc.ledger.report(emu.report_id)
    assert stored is not None and stored.evidence.level == "verified" and stored.verdict == "INCONCLUSIVE"
    prov = json.loads(stored.report_json)["provenance"]
    assert prov["platform"] == "gfx950-emulated" and "MI355" not in prov["device_name"]
    assert box.report_id is None  # no GPU here: the box's own verifier did not run
    # no result row claims a speed, and none is keyed as gfx950 hardware
    assert all(r.platform.runtime != "rocm" for r in svc.ledger.history(card_id=MOE))
