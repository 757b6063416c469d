"""Fixtures shared across modules: the ledger backends (SQLite file, real PostgreSQL).

``ledger_backend`` is parametrised over both backends, so one behavioural test runs
against each. PostgreSQL: the DSN in ``$SKILL_SERVER_TEST_PG_DSN`` (``.ci/run`` starts a
throw-away cluster and exports it), else a throw-away cluster these fixtures start
(``pg_cluster.py``) when the server binaries are installed, else those tests skip with
the reason, except where ``$SKILL_SERVER_TEST_REQUIRE_PG`` is set (CI), where they fail.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from ledger_backends import Backend, make_backend
from pg_cluster import DSN_ENV, REQUIRE_ENV, ThrowawayCluster, missing_reason, wait_ready


@pytest.fixture(autouse=True, scope="session")
def _fixtures_reach_their_arms():
    """The fixture candidates and problems take their targets from ``VERIFIER_TEST_*``
    variables; arms see only allow-listed variables (``verifiers.arms.env``), so the suite
    names that prefix as an operator would name one of theirs."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SKILL_SERVER_ARM_ENV", "VERIFIER_TEST_*")
    yield
    mp.undo()


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """A superuser DSN of a running PostgreSQL server (one per test session)."""
    dsn = os.environ.get(DSN_ENV)
    if dsn:
        wait_ready(dsn)
        yield dsn
        return
    why = missing_reason()
    if why is not None:
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"PostgreSQL is required here ({REQUIRE_ENV} is set) but {why}")
        pytest.skip(why)
    # a folder of its own under /tmp: pytest's tmp folders are private to this user, and
    # the server runs as another one when this is root
    cluster = ThrowawayCluster(Path(tempfile.mkdtemp(prefix="skill-pg-")))
    try:
        dsn = cluster.start()
        wait_ready(dsn)
        yield dsn
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_backend(request, tmp_path, monkeypatch) -> Backend:
    """A fresh, empty ledger location on each backend, with a provisioned signing key
    (``$SKILL_SERVER_KEY``, which child processes inherit)."""
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgresql" else None
    backend = make_backend(request.param, tmp_path, dsn)
    monkeypatch.setenv("SKILL_SERVER_KEY", str(backend.key_path))
    yield backend
    backend.drop()


@pytest.fixture
def pg_backend(pg_dsn, tmp_path, monkeypatch) -> Backend:
    backend = make_backend("postgresql", tmp_path, pg_dsn)
    monkeypatch.setenv("SKILL_SERVER_KEY", str(backend.key_path))
    yield backend
    backend.drop()
