"""Prerequisite checks on this box: package versions and the capability probes (card code in
``kernels/<card>/probes.py``), run for real against the installed FlyDSL (0.5.0 ships no kernels)."""
from __future__ import annotations

import importlib
from contextlib import contextmanager
import json

import pytest
from ledger_support import BLOCKSCALE, CPU, MOE, MXFP8, REPO, SKILLS

from skill_server.cards.schema import Prerequisite
from skill_server.cards.catalog import Catalog
from skill_kernels.probe_common import flydsl_checkout_kernels, flydsl_sources, search_flydsl
from skill_server.ledger.results import PlatformInfo
from skill_server.reverify.probes import ProbeContext, card_probes, check_prerequisite
from skill_server.service.facade import SkillService
from verifiers.gfx950.env import toolchain_problem
from verifiers.gfx950.gates import TargetGates

flydsl_version, _ = flydsl_sources()
needs_flydsl = pytest.mark.skipif(flydsl_version is None, reason="flydsl not installed")


@pytest.fixture(scope="module")
def catalog():
    return Catalog.load(SKILLS)


def ctx(catalog, card_id, reports=()):
    return ProbeContext(project_root=REPO, card_id=card_id, gate_reports=list(reports))


def probes(catalog, card_id):
    return card_probes(REPO, catalog.get(card_id).card)


def prereq(catalog, card_id, name):
    return next(p for p in catalog.get(card_id).card.prerequisites if p.name == name)


@needs_flydsl
def test_the_installed_flydsl_has_no_block_scale_core_and_the_fallback_is_named(catalog):
    p = prereq(catalog, BLOCKSCALE, "flydsl_software_blockscale_core")
    check = check_prerequisite(p, ctx(catalog, BLOCKSCALE), probes(catalog, BLOCKSCALE))
    assert check.met is False
    assert f"no block-scale software-promote GEMM in flydsl {flydsl_version}" in check.detail
    assert "kernels/flydsl_fp8_blockscale_gemm/flydsl_gemm.py (4-wave)" in check.detail
    assert check.detail.endswith("kernels/flydsl_fp8_blockscale_gemm/flydsl_8wave.py (8-wave cluster) (present)")
    assert check.fallback_present is True


@needs_flydsl
def test_the_installed_flydsl_has_no_moe_fp8_partial_store(catalog):
    p = prereq(catalog, MOE, "flydsl_moe_fp8_partial_store")
    check = check_prerequisite(p, ctx(catalog, MOE), probes(catalog, MOE))
    assert check.met is False and "cshuffle_pf8" in check.detail and check.fallback_present is True


@needs_flydsl
def test_a_flydsl_checkout_on_the_path_with_a_block_scale_gemm_is_found(catalog, tmp_path, monkeypatch):
    pkg = tmp_path / "checkout" / "kernels"
    (pkg / "gemm").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "gemm" / "__init__.py").write_text("")
    (pkg / "gemm" / "fp8_gemm_blockscale_preshuffle.py").write_text(
        "import flydsl\n\ndef compile_fp8_blockscale_gemm(): ...\n")
    with fresh_kernels_import(monkeypatch, tmp_path / "checkout"):
        res = probes(catalog, BLOCKSCALE)["flydsl_software_blockscale_core"](ctx(catalog, BLOCKSCALE))
    # found, but a file name is no proof of a software promote (upstream's newer mode is E8M0)
    assert res["met"] is None and any("fp8_gemm_blockscale_preshuffle.py" in e for e in res["evidence"])
    assert "check it for E8M0 before use" in res["detail"]


@needs_flydsl
def test_a_package_called_kernels_that_is_not_flydsls_is_not_searched(catalog, tmp_path, monkeypatch):
    pkg = tmp_path / "other" / "kernels"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "fp8_gemm_blockscale_preshuffle.py").write_text("import torch\n")  # a name that would match
    with fresh_kernels_import(monkeypatch, tmp_path / "other"):
        res = probes(catalog, BLOCKSCALE)["flydsl_software_blockscale_core"](ctx(catalog, BLOCKSCALE))
        assert not any(str(pkg) in e for e in res["evidence"]), res
        assert flydsl_checkout_kernels(REPO) == []


@contextmanager
def fresh_kernels_import(monkeypatch, root):
    """``kernels`` importable from ``root`` for the block; whatever a probe imported under
    that name is dropped afterwards (a stale ``sys.modules`` entry would make every later
    probe see this test's folder)."""
    import sys

    saved = {k: v for k, v in sys.modules.items() if k == "kernels" or k.startswith("kernels.")}
    for k in saved:
        del sys.modules[k]
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        for k in [k for k in sys.modules if k == "kernels" or k.startswith("kernels.")]:
            del sys.modules[k]
        sys.modules.update(saved)
        importlib.invalidate_caches()


def test_the_projects_own_kernels_folder_is_not_mistaken_for_a_flydsl_checkout(monkeypatch):
    import importlib.util
    import sys

    monkeypatch.syspath_prepend(str(REPO))  # from the repo root `kernels` resolves to our own folder
    monkeypatch.delitem(sys.modules, "kernels", raising=False)
    importlib.invalidate_caches()
    spec = importlib.util.find_spec("kernels")
    assert spec is not None and str(REPO / "kernels") in list(spec.submodule_search_locations)
    _, _, hits = search_flydsl(REPO, path_regex=r"flydsl_fp8_blockscale_gemm", text_regex=None)
    assert not any(str(REPO / "kernels") in h for h in hits)


needs_toolchain = pytest.mark.skipif(toolchain_problem() is not None, reason="FlyDSL / ld.lld for gfx950 not installed")


FLYDSL_ARM = {BLOCKSCALE: "flydsl_recipe", MXFP8: "flydsl_8wave", MOE: "flydsl_fp8"}  # the cards' rocm reference arms
# the MoE capability is the fused GEMM's, the mxfp8 one the 8-wave recipe kernel's: their gates must pass
GATE_TARGET = {MOE: "gemm_cshuffle_pf8_n7168_k2048", MXFP8: "8w_bm256_bn256_k2048"}


def emulated_run(card_id, parity_ok=True, platform="gfx950-emulated", device="gfx950 emulator on CPU (test)"):
    """A verifier report of the card's reference arm as the verifier writes it (the real
    emulated runs are in tests/test_emulator_verifier.py and tests/test_reverify_emulated.py)."""
    from ledger_support import shape_report, verification_report

    props = {"gcnArchName": "gfx950:sramecc+:xnack-"} if platform == "rocm" else {"emulated_arch": "gfx950"}
    rep = verification_report(card_id, [shape_report("64x256x128", None, parity_ok=parity_ok)], platform=platform,
                              device=device, props=props, candidate=f"arm:{FLYDSL_ARM[card_id]}")
    from verifiers.report import aggregate_stages

    rep.stages = aggregate_stages(rep.shape_reports)
    return rep


def scaled_gates(folder, status="PASS", target="8w_bm256_bn256_k2048"):
    return [TargetGates(folder=folder, target=target, status=status, mfma={"v_mfma_scale_f32_16x16x128_f8f6f4": 32})]


@needs_toolchain
def test_the_scaled_mfma_capability_needs_the_reference_kernel_to_pass_gates_and_emulated_parity(catalog):
    p = prereq(catalog, MXFP8, "gfx950_scaled_mfma")
    pr = probes(catalog, MXFP8)
    alone = check_prerequisite(p, ctx(catalog, MXFP8), pr)  # toolchain and op, nothing run
    assert alone.met is False and "gates did not run" in alone.detail and "emulated parity (arm:flydsl_8wave) did not run" in alone.detail
    gated = check_prerequisite(p, ctx(catalog, MXFP8, scaled_gates(MXFP8)), pr)
    assert gated.met is False and "emulated parity (arm:flydsl_8wave) did not run" in gated.detail
    both = ProbeContext(project_root=REPO, card_id=MXFP8, gate_reports=scaled_gates(MXFP8),
                        verifier_reports=[emulated_run(MXFP8)])
    check = check_prerequisite(p, both, pr)
    assert check.met is True and "parity on gfx950-emulated (64x256x128" in check.detail
    assert "(arm:flydsl_8wave)" in check.detail
    assert "target 8w_bm256_bn256_k2048: 32 v_mfma_scale instruction(s) in the compiled gfx950 ISA" in check.evidence
    wrong = both.model_copy(update={"verifier_reports": [emulated_run(MXFP8, parity_ok=False)]})
    check = check_prerequisite(p, wrong, pr)
    assert check.met is False and "emulated parity does not hold" in check.detail
    failing_gates = both.model_copy(update={"gate_reports": scaled_gates(MXFP8, "FAIL")})
    check = check_prerequisite(p, failing_gates, pr)
    assert check.met is False and "static gfx950 gates fail (8w_bm256_bn256_k2048)" in check.detail


@needs_toolchain
def test_the_scaled_mfma_capability_is_the_8wave_recipe_kernels_not_a_siblings(catalog):
    """The capability is met because the recipe's kernel (8 waves, permlane16_swap + ds_bpermute
    stores) runs: the 4-wave kernel or the direct-store ablation passing, or only the 4-wave
    kernel's gate target passing, is no evidence."""
    p, pr = prereq(catalog, MXFP8, "gfx950_scaled_mfma"), probes(catalog, MXFP8)
    for arm in ("flydsl_4wave", "flydsl_8wave_direct", "flydsl_8wave_bn256"):
        run = emulated_run(MXFP8)
        run.candidate = f"arm:{arm}"
        c = ProbeContext(project_root=REPO, card_id=MXFP8, gate_reports=scaled_gates(MXFP8), verifier_reports=[run])
        check = check_prerequisite(p, c, pr)
        assert check.met is False and "arm:flydsl_8wave" in check.detail, (arm, check.detail)
    four_wave_gate = ProbeContext(project_root=REPO, card_id=MXFP8, gate_reports=scaled_gates(MXFP8, target="bm128_bn128_k2048"),
                                  verifier_reports=[emulated_run(MXFP8)])
    check = check_prerequisite(p, four_wave_gate, pr)
    assert check.met is False and "no gate target matching" in check.detail


@needs_toolchain
@pytest.mark.parametrize(("card", "name"), [(BLOCKSCALE, "flydsl_software_blockscale_core"),
                                            (MOE, "flydsl_moe_fp8_partial_store")])
def test_the_projects_reference_kernel_satisfies_the_capability_with_gates_and_emulated_parity(catalog, card, name):
    p, pr = prereq(catalog, card, name), probes(catalog, card)
    gates = [TargetGates(folder=card, target=GATE_TARGET.get(card, "t0"), status="PASS")]
    met = ProbeContext(project_root=REPO, card_id=card, gate_reports=gates, verifier_reports=[emulated_run(card)])
    check = check_prerequisite(p, met, pr)
    assert check.met is True and f"the project's reference kernel (arm:{FLYDSL_ARM[card]})" in check.detail
    assert "not an MI355X run" in check.detail
    # a report of another card, or one of a candidate file, is no evidence for this card
    other = emulated_run(MXFP8 if card != MXFP8 else BLOCKSCALE)
    foreign = met.model_copy(update={"verifier_reports": [other]})
    assert check_prerequisite(p, foreign, pr).met is False
    for candidate in ("my_rewrite.py:build", "arm:torch_dequant", "arm:triton_bf16"):  # only the FlyDSL arms count
        rewrite = emulated_run(card)
        rewrite.candidate = candidate
        assert check_prerequisite(p, met.model_copy(update={"verifier_reports": [rewrite]}), pr).met is False


@needs_toolchain
def test_only_the_fused_flydsl_gemm_meets_the_moe_stage2_gemm_capability(catalog):
    """"A FlyDSL stage-2 MoE GEMM whose epilogue stores fp8 partials": the FlyDSL reduce behind
    a Triton GEMM, or the standalone FlyDSL store pass, each passing its gates and emulated
    parity, are no evidence for it; only the fused GEMM's arm with its gemm_cshuffle_pf8 gate."""
    from skill_kernels.flydsl_prefill_moe_stage2_fp8partial.probes import fused_arm_runs_the_flydsl_gemm

    p, pr = prereq(catalog, MOE, "flydsl_moe_fp8_partial_store"), probes(catalog, MOE)
    assert fused_arm_runs_the_flydsl_gemm()
    store_and_reduce_gates = [TargetGates(folder=MOE, target=t, status="PASS")
                              for t in ("reduce_infp8_k8_n7168", "store_pf8_n2880_f32acc")]
    fused_gate = [TargetGates(folder=MOE, target="gemm_cshuffle_pf8_n7168_k2048", status="PASS")]
    for arm in ("flydsl_fp8_epilogue", "flydsl_reduce_fp8"):  # the standalone store pass; the reduce alone
        run = emulated_run(MOE)
        run.candidate = f"arm:{arm}"
        c = ProbeContext(project_root=REPO, card_id=MOE, gate_reports=store_and_reduce_gates + fused_gate,
                         verifier_reports=[run])
        check = check_prerequisite(p, c, pr)
        assert check.met is False and "arm:flydsl_fp8" in check.detail, (arm, check.detail)
    # the fused arm's parity without the fused GEMM's gate is not enough either
    c = ProbeContext(project_root=REPO, card_id=MOE, gate_reports=store_and_reduce_gates,
                     verifier_reports=[emulated_run(MOE)])
    check = check_prerequisite(p, c, pr)
    assert check.met is False and "gemm_cshuffle_pf8" in check.detail
    c = c.model_copy(update={"gate_reports": store_and_reduce_gates + fused_gate})
    assert check_prerequisite(p, c, pr).met is True


@needs_toolchain
def test_a_real_gfx950_device_passing_parity_satisfies_the_capability_without_emulation(catalog):
    p, pr = prereq(catalog, BLOCKSCALE, "flydsl_software_blockscale_core"), probes(catalog, BLOCKSCALE)
    hw = emulated_run(BLOCKSCALE, platform="rocm", device="AMD Instinct MI355X")
    check = check_prerequisite(p, ProbeContext(project_root=REPO, card_id=BLOCKSCALE, verifier_reports=[hw]), pr)
    assert check.met is True and "passed parity on this gfx950 device (AMD Instinct MI355X)" in check.detail
    mi300 = emulated_run(BLOCKSCALE, platform="rocm", device="AMD Instinct MI300X")
    mi300.provenance.device_properties = {"gcnArchName": "gfx942:sramecc+:xnack-"}
    check = check_prerequisite(p, ProbeContext(project_root=REPO, card_id=BLOCKSCALE, verifier_reports=[mi300]), pr)
    assert check.met is False


@pytest.mark.parametrize(("card", "name"), [(BLOCKSCALE, "flydsl_software_blockscale_core"),
                                            (MOE, "flydsl_moe_fp8_partial_store"), (MXFP8, "gfx950_scaled_mfma")])
def test_a_box_without_a_linker_says_exactly_what_is_missing(catalog, monkeypatch, tmp_path, card, name):
    """No ld.lld anywhere: every capability names the places looked at and how to fix it,
    whatever gate reports or emulated runs a context carries."""
    monkeypatch.setenv("SKILL_SERVER_LD_LLD", str(tmp_path / "no-ld.lld"))
    gates = [TargetGates(folder=card, target="t0", status="PASS")]
    c = ProbeContext(project_root=REPO, card_id=card, gate_reports=gates, verifier_reports=[emulated_run(card)])
    check = check_prerequisite(prereq(catalog, card, name), c, probes(catalog, card))
    if check.met is not False:  # a FlyDSL checkout with such a kernel on the path (not this box)
        pytest.skip(check.detail)
    assert f"SKILL_SERVER_LD_LLD={str(tmp_path / 'no-ld.lld')!r} is not an executable file" in check.detail


def test_the_scaled_mfma_capability_is_absent_without_the_toolchain(catalog, monkeypatch):
    import verifiers.gfx950.env as env

    monkeypatch.setattr(env, "toolchain_problem", lambda: "no ld.lld for gfx950 found")
    check = check_prerequisite(prereq(catalog, MXFP8, "gfx950_scaled_mfma"), ctx(catalog, MXFP8),
                               probes(catalog, MXFP8))
    assert check.met is False and "cannot compile for gfx950 here: no ld.lld" in check.detail


@pytest.mark.parametrize(("name", "spec", "met"), [
    ("pydantic", ">=2.0", True),
    ("pydantic", ">=99", False),
    ("pydantic", "<2,>=1", False),
    ("surely-not-installed-pkg", ">=1", False),
    ("pydantic", "about two", None),
])
def test_package_prerequisites_compare_the_installed_version(catalog, name, spec, met):
    check = check_prerequisite(Prerequisite(kind="package", name=name, version=spec), ctx(catalog, BLOCKSCALE), {})
    assert check.met is met, check.detail


def test_a_probe_that_raises_is_reported_not_fatal(catalog):
    def boom(_ctx):
        raise RuntimeError("probe bug")

    p = Prerequisite(kind="capability", name="x")
    check = check_prerequisite(p, ctx(catalog, BLOCKSCALE), {"x": boom})
    assert check.met is None and "probe x raised RuntimeError: probe bug" in check.detail


@needs_flydsl
def test_reverify_on_this_cpu_box_reports_what_holds_here(tmp_path):
    svc = SkillService(SKILLS, ledger_path=tmp_path / "l.sqlite")
    report = svc.reverify(platform=PlatformInfo(**CPU), gates=False, recorded_by="tester")
    status = {c.card_id: c.status for c in report.cards}
    # without the gates (and so without the gfx950-emulated runs) nothing shows that the
    # project's reference kernels run: every capability reads missing, and says why
    assert status == {BLOCKSCALE: "PREREQUISITE_MISSING", MOE: "PREREQUISITE_MISSING", MXFP8: "PREREQUISITE_MISSING"}
    if toolchain_problem() is None:
        details = [p.detail for c in report.cards for p in c.prerequisites if p.kind == "capability"]
        assert all("gates did not run in this run" in d for d in details), details
    latest = svc.ledger.latest_statuses()
    assert {cid: rows[0].status for cid, rows in latest.items()} == status
    assert svc.get_recipe(BLOCKSCALE).reverification.claims_current is None


@needs_flydsl
def test_cli_reverify_shows_progress_on_stderr_and_a_table(tmp_path, capsys):
    from skill_server.cli.entry import main
    code = main(["reverify", "--card", MOE, "--no-gates", "--ledger", str(tmp_path / "l.sqlite")])
    out = capsys.readouterr()
    assert code == 0
    assert f"[1/1] {MOE}: prerequisites" in out.err and "done: PREREQUISITE_MISSING" in out.err
    assert "status" in out.out and "PREREQUISITE_MISSING" in out.out and "flydsl_moe_fp8_partial_store" in out.out
    code = main(["reverify", "--card", MOE, "--no-gates", "--quiet", "--no-record", "--json",
                 "--ledger", str(tmp_path / "l.sqlite")])
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert code == 0 and out.err == "" and data["ledger"] is None and data["cards"][0]["card_id"] == MOE


def test_every_capability_a_card_needs_has_a_probe_in_its_own_kernels_folder(catalog):
    for parsed in catalog.cards.values():
        found = card_probes(REPO, parsed.card)
        for p in parsed.card.prerequisites:
            if p.kind == "capability":
                assert p.name in found, f"{parsed.card.id}: no probe for {p.name} in kernels/<card>/probes.py"


def test_a_new_cards_probe_is_found_by_convention_without_a_server_change(tmp_path):
    """A throw-away project with a card whose capability probe exists only in its own
    kernels folder: re-verification runs that probe (and a missing one counts as missing)."""
    from ledger_support import make_project

    skills = make_project(tmp_path, cards=(MOE,))
    probe_file = tmp_path / "kernels" / MOE / "probes.py"
    probe_file.write_text("def probe(ctx):\n    return {'met': True, 'detail': f'probed {ctx.capability} in {ctx.card_id}'}\n"
                          "PROBES = {'flydsl_moe_fp8_partial_store': probe}\n")
    svc = SkillService(skills, ledger_path=tmp_path / "l.sqlite")
    card = svc.reverify(card_id=MOE, platform=PlatformInfo(**CPU), gates=False, record=False).cards[0]
    check = next(p for p in card.prerequisites if p.name == "flydsl_moe_fp8_partial_store")
    assert check.met is True and check.detail == f"probed flydsl_moe_fp8_partial_store in {MOE}"
    probe_file.write_text("PROBES = {}\n")
    svc = SkillService(skills, ledger_path=tmp_path / "l.sqlite")
    check = next(p for p in svc.reverify(card_id=MOE, platform=PlatformInfo(**CPU), gates=False, record=False)
                 .cards[0].prerequisites if p.name == "flydsl_moe_fp8_partial_store")
    assert check.met is None and f"kernels/{MOE}/probes.py" in check.detail
    probe_file.write_text("import no_such_module_here\n")
    svc = SkillService(skills, ledger_path=tmp_path / "l.sqlite")
    check = next(p for p in svc.reverify(card_id=MOE, platform=PlatformInfo(**CPU), gates=False, record=False)
                 .cards[0].prerequisites if p.name == "flydsl_moe_fp8_partial_store")
    assert check.met is None and "cannot load (ModuleNotFoundError" in check.detail
