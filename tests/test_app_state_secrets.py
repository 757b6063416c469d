"""The application, not the verifier, decides where its state lives, and tells the verifier's
arm sandbox to keep arms out of it (``skill_server.locations``, ``skill_server.card_verifier``
-> ``verifiers.arms.sandbox.protect``).

A real verification: the candidate (tests/fixtures/candidates/escape_attempts.py, copied beside
the state folder) tries to read the signing key. The state folder lies inside the candidate's
own folder, which its arm may read, so only the application's registration keeps the key out:
the same verification through the verifier alone (no application) reads it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from verifier_support import FIXTURES, PARITY_ONLY, PROBLEM_FILE

from skill_server.card_verifier import run_card_verifier
from skill_server.cards.schema import VerifierBinding
from verifiers.api import verify
from verifiers.arms import sandbox
from verifiers.options import VerifyOptions

REPO = Path(__file__).resolve().parent.parent


def _state_beside_a_candidate(root: Path) -> tuple[Path, Path, bytes]:
    """(candidate file, state folder, key): the state folder inside the candidate's folder."""
    folder = root / "proj"
    state = folder / "state"
    state.mkdir(parents=True)
    key = os.urandom(32)
    (state / "signing.key").write_bytes(key)
    shutil.copy(FIXTURES / "candidates" / "escape_attempts.py", folder / "cand.py")
    return folder / "cand.py", state, key


@pytest.mark.skipif(not sandbox.support().active, reason=f"no Landlock here: {sandbox.support().reason}")
def test_an_arm_cannot_read_a_custom_state_folder_the_application_set(tmp_path, monkeypatch):
    options = VerifyOptions(**PARITY_ONLY)
    # the control: the verifier alone knows nothing of this state folder, and the arm reads the key
    cand, state, key = _state_beside_a_candidate(tmp_path / "alone")
    monkeypatch.setenv("VERIFIER_TEST_STATE", str(state))
    alone = verify(PROBLEM_FILE, f"{cand}:read_key", shapes=["32x32x32"], options=options)
    assert f"ESCAPED: read_key: {key.hex()[:12]}" in alone.model_dump_json(), alone.summary()

    # the application, its state folder set by the operator
    cand, state, key = _state_beside_a_candidate(tmp_path / "app")
    monkeypatch.setenv("SKILL_SERVER_STATE_DIR", str(state))
    monkeypatch.setenv("VERIFIER_TEST_STATE", str(state))
    report = run_card_verifier(VerifierBinding(problem=PROBLEM_FILE), f"{cand}:read_key", shapes=["32x32x32"],
                               options=options)
    shape = report.shape_reports[0]
    assert key.hex()[:12] not in report.model_dump_json()
    assert "read_key: refused" in shape.log_tail, shape.log_tail
    assert shape.stages["parity"].status == "PASS", shape.stages
    assert str(state.resolve()) in sandbox.secret_paths()


def test_the_verifier_imports_nothing_of_the_application_and_names_no_state_folder(tmp_path):
    """The verifier's modules load no ``skill_server`` module (also checked on the source by
    tests/test_architecture.py), and its secrets are its own cache only: a state folder set in
    the environment is the application's to register."""
    code = ("import json, sys; import verifiers.api, verifiers.arms.sandbox as s, verifiers.locations as l;"
            "import verifiers.judge.process, verifiers.launch.runner, verifiers.gfx950.compile;"
            "print(json.dumps([sorted(m for m in sys.modules if m.split('.')[0] == 'skill_server'),"
            " s.secret_paths(), hasattr(l, 'state_dir')]))")
    env = {**os.environ, "PYTHONPATH": str(REPO), "SKILL_SERVER_STATE_DIR": str(tmp_path / "state"),
           "SKILL_SERVER_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded, secrets, decides_state = json.loads(out.stdout.splitlines()[-1])
    assert loaded == [] and not decides_state
    assert secrets == [str((tmp_path / "cache").resolve())]
