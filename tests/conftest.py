"""Fixtures shared across modules: the ledger backends (SQLite file, real PostgreSQL).

``ledger_backend`` is parametrised over both backends, so one behavioural test runs
against each. PostgreSQL: the DSN in ``$SKILL_SERVER_TEST_PG_DSN`` (``.ci/run`` starts a
throw-away cluster and exports it), else a throw-away cluster these fixtures start
(``pg_cluster.py``) when the server binaries are installed, else those tests skip with
the reason, except where ``$SKILL_SERVER_TEST_REQUIRE_PG`` is set (CI), where they fail.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import box_share
import process_owner
import pytest
from ledger_backends import Backend, make_backend
from pg_cluster import DSN_ENV, REQUIRE_ENV, ThrowawayCluster, missing_reason, wait_ready

process_owner.mark_this_session()  # before any test starts a process (tests/process_owner.py)


# ----------------------------------------------------------------- two workers on one box
def _box_folder(config) -> str:
    """On the controller: one folder for the workers of this run (locks, groups)."""
    if not hasattr(config, "_box_share_folder"):
        config._box_share_folder = tempfile.mkdtemp(prefix="skill-tests-box-")
    return config._box_share_folder


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput["box_share_folder"] = _box_folder(node.config)


def pytest_unconfigure(config):
    folder = getattr(config, "_box_share_folder", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


# Modules that compile FlyDSL kernels into the shared compile cache run on one worker: two
# workers compiling one target at once do the work twice, and one may replace the cache entry
# the other is reading its code object from.
GFX950_COMPILES = {"test_emulator_flydsl", "test_emulator_verifier", "test_emulator_lockstep", "test_gfx950_gates",
                   "test_moe_flydsl_gates", "test_mxfp8_flydsl", "test_recipe_dispatch", "test_reverify_emulated"}
RAY = {"test_fleet", "test_fleet_ray"}  # one local Ray cluster at a time


def _work_unit(item) -> str | None:
    """The xdist group an item runs in (None: any worker, on its own)."""
    if _alone(item):
        return "alone"  # one after the other on one worker: the other worker waits once, not per test
    module = item.module.__name__.rpartition(".")[2]
    if module in GFX950_COMPILES:
        return "gfx950-compile"
    if module in RAY:
        return "ray"
    defs = [d for ds in item._fixtureinfo.name2fixturedefs.values() for d in ds]
    if any(d.scope in ("module", "class") for d in defs):
        return module  # its module-scoped fixture runs once, not once per worker
    return None


def pytest_collection_modifyitems(config, items):
    """On an xdist worker (``make test``): hand out the modules with slow tests first, so that
    no long test starts last while the other worker idles (the Makefile keeps this order:
    --no-loadscope-reorder), and tell the controller's scheduler which tests run together."""
    if not hasattr(config, "workerinput"):
        return
    # whole modules move (a module split in two would set its module-scoped fixtures up twice)
    slow = {item.module.__name__ for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.module.__name__ not in slow)  # stable: collection order otherwise
    groups = {item.nodeid: g for item in items if (g := _work_unit(item)) is not None}
    box_share.write_groups(Path(config.workerinput["box_share_folder"]), groups)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the groups above. (xdist's own loadgroup reads ``xdist_group``
    marks into node ids, which pytest 9 no longer lets a plugin rewrite: its groups are lost.)"""
    if config.getoption("dist") != "loadgroup":
        return None
    return box_share.grouped_scheduler(config, log, Path(_box_folder(config)))


_BOX: list[box_share.BoxShare] = []


def _alone(item) -> bool:
    return item is not None and item.get_closest_marker("alone") is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """On an xdist worker: an ``alone`` test runs while no other worker runs a test (tests/box_share.py)."""
    folder = getattr(item.config, "workerinput", {}).get("box_share_folder")
    if folder is None:  # one process runs the whole session: nothing runs beside a test
        return (yield)
    if not _BOX:
        _BOX.append(box_share.BoxShare(Path(folder)))
    with _BOX[0].test(_alone(item), _alone(nextitem)):
        return (yield)


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

