"""The PostgreSQL ledger as a fleet uses it (a real server): two MCP servers on one
database, copies between backends, the shared signing key, and bad input (unreachable
server, wrong password, newer schema) refused in one line with nothing written.

The behaviours both backends share (validation, history, concurrency, kills, migrations)
run on both through the ``ledger_backend`` fixture (test_ledger_store, test_ledger_concurrency)."""
from __future__ import annotations

import json
import subprocess
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest
from ledger_support import BLOCKSCALE, GFX950, SKILLS, make_project, record, report_platform, shape_report, \
    verification_report
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_support import cli_command, free_port, subprocess_env, text

from skill_server.ledger.signing import create_key
from skill_server.ledger.results import SCHEMA_VERSION, Ledger, LedgerError, open_store, validate_record
from skill_server.ledger.backend_copy import copy_ledger
from skill_server.service.facade import ServiceError, SkillService


def _cli(*args: str, env: dict[str, str] | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([*cli_command(), *args], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(**(env or {})), cwd=cwd)


def _cli_here(capsys, monkeypatch, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The CLI in this process (as ``_cli`` runs it, without a Python start-up per call)."""
    from skill_server.cli.entry import main
    for name in ("SKILL_SERVER_TOKEN", "SKILL_SERVER_LEDGER"):
        monkeypatch.delenv(name, raising=False)
    with monkeypatch.context() as m:
        for name, value in (env or {}).items():
            m.setenv(name, value)
        capsys.readouterr()
        code = main(list(args))
        out = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out.out, out.err)


def _signed_report(svc: SkillService) -> dict:
    rows = [shape_report("4096x2048x7168", 1.3, baseline="ck_blockscale")]
    rep = verification_report(BLOCKSCALE, rows, candidate="arm:flydsl_4wave", **report_platform(GFX950))
    return json.loads(svc.signed_envelope(rep).model_dump_json())


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


# --------------------------------------------------------------------------- MCP fleet
def test_two_mcp_servers_on_one_database_see_each_others_records(pg_backend, tmp_path):
    """Two `skill-server serve` processes (real stdio clients) on one database: what one
    records, the other serves, with its evidence level."""
    env = subprocess_env(SKILL_SERVER_LEDGER=pg_backend.location, SKILL_SERVER_KEY=str(pg_backend.key_path))
    cmd = cli_command()

    def params(who: str) -> StdioServerParameters:
        return StdioServerParameters(command=cmd[0], args=[*cmd[1:], "serve", "--quiet", "--enable-write-tools"],
                                     env={**env, "SKILL_SERVER_USER": who}, cwd=str(tmp_path))

    async def run():
        with (tmp_path / "a.log").open("w") as la, (tmp_path / "b.log").open("w") as lb:
            async with Client(stdio_client(params("agent-a"), errlog=la)) as a, \
                    Client(stdio_client(params("agent-b"), errlog=lb)) as b:
                wrote_a = await a.call_tool("record_result", {"records": [record(recorded_by="agent-a")]})
                seen_by_b = await b.call_tool("get_validation_history", {"card_id": BLOCKSCALE})
                wrote_b = await b.call_tool("record_result", {"records": [record(recorded_by="agent-b",
                                                                                  shape="1024x1024x1024")]})
                seen_by_a = await a.call_tool("get_validation_history", {"card_id": BLOCKSCALE})
                return wrote_a, seen_by_b, wrote_b, seen_by_a

    wrote_a, seen_by_b, wrote_b, seen_by_a = anyio.run(run)
    assert not wrote_a.is_error and not wrote_b.is_error, (text(wrote_a), text(wrote_b))
    assert "***" in wrote_a.structured_content["ledger"] and pg_backend.location.split(":")[2].split("@")[0] \
        not in json.dumps(wrote_a.structured_content)  # the password is never shown
    assert [r["id"] for r in seen_by_b.structured_content["results"]] == wrote_a.structured_content["ids"]
    assert [r["id"] for r in seen_by_a.structured_content["results"]] == (wrote_b.structured_content["ids"]
                                                                          + wrote_a.structured_content["ids"])
    assert {r["level"] for r in seen_by_a.structured_content["results"]} == {"reported"}


# ------------------------------------------------------------------------------ copy
def test_a_copy_keeps_every_row_and_verified_rows_stay_verified_only_under_the_same_key(pg_backend, tmp_path,
                                                                                      monkeypatch):
    skills = make_project(tmp_path)
    sqlite_path = tmp_path / "var" / "ledger.sqlite"
    monkeypatch.setenv("SKILL_SERVER_KEY", str(tmp_path / "var" / "signing.key"))
    src = SkillService(skills, check_interval=0.0, ledger_path=sqlite_path)
    src.record_result(report=_signed_report(src))
    src.record_result([record(), record(shape="64x64x64")])
    before = [(r.id, r.uid, r.evidence.level) for r in src.ledger.history()]
    assert sorted(level for *_, level in before) == ["reported", "reported", "verified"]

    result = copy_ledger(open_store(sqlite_path), open_store(pg_backend.location))
    assert {t.table: t.rows for t in result.tables} | {"signing_keys": 1} == {
        "reports": 1, "results": 3, "result_arms": 6, "reverifications": 0, "signing_keys": 1}
    assert list(result.signed_by.values()) == [2]  # the report and its result
    assert "***" in result.target and pg_backend.location.split(":")[2].split("@")[0] not in result.target

    same_key = SkillService(skills, check_interval=0.0, ledger_path=pg_backend.location)  # the fleet uses that key
    assert [(r.id, r.uid, r.evidence.level) for r in same_key.ledger.history()] == before
    added = same_key.record_result([record(shape="128x128x128")])  # ids continue after the copied ones
    assert added.ids == [max(i for i, *_ in before) + 1]

    other = tmp_path / "other.key"
    create_key(other)
    foreign = Ledger(pg_backend.location, key_path=other)
    assert {r.evidence.level for r in foreign.history()} == {"reported"}  # another key never reads verified
    with pytest.raises(LedgerError, match="signed with the fleet key .* this server's key .* is another"):
        foreign.record([validate_record(record(), known_cards={BLOCKSCALE})])

    with pytest.raises(LedgerError, match=r"already holds 5 record\(s\): nothing copied; pass --replace"):
        copy_ledger(open_store(sqlite_path), open_store(pg_backend.location))
    back = tmp_path / "back.sqlite"
    again = _cli("ledger-copy", pg_backend.location, str(back))
    assert again.returncode == 0, again.stderr
    assert "***" in again.stdout and pg_backend.location.split(":")[2].split("@")[0] not in again.stdout + again.stderr
    assert [(r.id, r.evidence.level) for r in Ledger(back).history()] == [(i, lv) for i, _, lv in
                                                                          [(4, "", "reported"), *before]]
    replaced = copy_ledger(open_store(sqlite_path), open_store(back), replace=True)
    assert replaced.replaced and len(Ledger(back).history()) == 3


def test_a_copy_that_does_not_read_back_the_same_rolls_back_whole(pg_backend, tmp_path, monkeypatch):
    import skill_server.ledger.backend_copy as copy_mod

    src = tmp_path / "src.sqlite"
    monkeypatch.setenv("SKILL_SERVER_KEY", str(tmp_path / "src.key"))
    Ledger(src).record([validate_record(record(), known_cards={BLOCKSCALE})])
    real = copy_mod._digest
    monkeypatch.setattr(copy_mod, "_digest", lambda *a: (0, "x") if a[2] == "results" else real(*a))
    with pytest.raises(LedgerError, match="copy check failed on table results"):
        copy_ledger(open_store(src), open_store(pg_backend.location))
    assert pg_backend.raw("SELECT COUNT(*) FROM results") == [(0,)]


# ----------------------------------------------------------------- the fleet's key
def test_a_shared_ledger_never_makes_up_a_key_and_refuses_a_second_one(pg_backend, tmp_path, monkeypatch, capsys):
    skills = make_project(tmp_path)
    missing = tmp_path / "no-key-here" / "signing.key"
    monkeypatch.setenv("SKILL_SERVER_KEY", str(missing))
    svc = SkillService(skills, ledger_path=pg_backend.location)
    with pytest.raises(ServiceError, match=r"does not exist, and a shared ledger never gets a key made up by one "
                                           r"server: create the fleet's key once \(`skill-server ledger-key --create"):
        svc.record_result([record()])
    assert not missing.exists() and not missing.parent.exists()

    created = _cli_here(capsys, monkeypatch, "ledger-key", "--create", str(missing))
    assert created.returncode == 0 and "fingerprint" in created.stdout and missing.stat().st_mode & 0o777 == 0o600
    assert _cli_here(capsys, monkeypatch, "ledger-key", "--create", str(missing)).returncode == 2  # never replaced
    first = SkillService(skills, ledger_path=pg_backend.location)
    first.record_result([record()])
    assert pg_backend.raw("SELECT COUNT(*) FROM signing_keys") == [(1,)]

    rotated = tmp_path / "rotated.key"
    create_key(rotated)
    env = {"SKILL_SERVER_KEY": str(rotated), "SKILL_SERVER_LEDGER": pg_backend.location}
    shown = _cli_here(capsys, monkeypatch, "ledger-key", env=env)
    assert shown.returncode == 2 and "not registered" in shown.stderr
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(record()))
    refused = _cli_here(capsys, monkeypatch, "--skills-dir", str(skills), "record", str(rec), env=env)
    assert refused.returncode == 2 and "is another" in refused.stderr
    assert pg_backend.raw("SELECT COUNT(*) FROM results") == [(1,)]
    assert _cli_here(capsys, monkeypatch, "ledger-key", "--register", env=env).returncode == 0  # a deliberate rotation
    monkeypatch.setenv("SKILL_SERVER_KEY", str(rotated))
    SkillService(skills, ledger_path=pg_backend.location).record_result([record()])
    assert pg_backend.raw("SELECT COUNT(*) FROM results") == [(2,)]


# ------------------------------------------------------------------------- bad input
def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_an_unreachable_server_wrong_credentials_and_a_newer_schema_each_get_one_clear_line(pg_backend, tmp_path,
                                                                                           capsys, monkeypatch):
    """In this process (a Python start-up per call would cost most of the test), and once as
    a real process: its stderr is the one line, no traceback."""
    skills = make_project(tmp_path)
    password = urlsplit(pg_backend.location).password
    SkillService(skills, ledger_path=pg_backend.location).record_result([record()])
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(record(shape="32x32x32")))

    dead = _with_password(pg_backend.location, password).replace(f":{urlsplit(pg_backend.location).port}/",
                                                                  f":{free_port()}/")
    wrong = _with_password(pg_backend.location, "not-the-password")
    for url, needles in ((dead, ("cannot connect", "Connection refused", "check that the PostgreSQL server runs")),
                         (wrong, ("cannot connect", "password authentication failed", "check the user and password"))):
        for argv in (("record", str(rec)), ("history", BLOCKSCALE), ("reverify", "--card", BLOCKSCALE, "--no-gates",
                                                                      "--no-verifier")):
            line = _one_line_error(_cli_here(capsys, monkeypatch, "--skills-dir", str(skills), "--ledger", url, *argv),
                                   *needles)
            assert password not in line and "not-the-password" not in line and "***" in line
    line = _one_line_error(_cli("--skills-dir", str(skills), "--ledger", wrong, "record", str(rec)),
                           "password authentication failed")
    assert "not-the-password" not in line

    pg_backend.raw("INSERT INTO schema_version VALUES (?, 'later')", (SCHEMA_VERSION + 1,))
    for argv in (("record", str(rec)), ("history", BLOCKSCALE)):
        line = _one_line_error(_cli_here(capsys, monkeypatch, "--skills-dir", str(skills), "--ledger",
                                         pg_backend.location, *argv),
                               f"schema version {SCHEMA_VERSION + 1} is newer", "upgrade skill-server")
        assert password not in line
    assert pg_backend.raw("SELECT COUNT(*) FROM results") == [(1,)]  # nothing written by any of them
    copy = _cli_here(capsys, monkeypatch, "ledger-copy", pg_backend.location, str(tmp_path / "x.sqlite"))
    _one_line_error(copy, "is newer")
    assert not (tmp_path / "x.sqlite").exists() or Ledger(tmp_path / "x.sqlite").history() == []


def test_psycopg_is_imported_only_for_a_database_ledger():
    code = ("import sys; from skill_server.service.facade import SkillService; s = SkillService(); s.list_skills(); "
            "s.ledger.history(); print('psycopg' in sys.modules)")
    out = subprocess.run([__import__("sys").executable, "-c", code], capture_output=True, text=True,
                         env=subprocess_env(SKILL_SERVER_LEDGER=""), timeout=60)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("url, needle", [
    ("postgresql://skill@127.0.0.1:notaport/db", "not a valid PostgreSQL URL (Port could not be cast"),
    ("postgresql://[::1/db", "not a valid PostgreSQL URL (Invalid IPv6 URL)"),
    ("postgresql://skill@127.0.0.1:5432/db?sslmode=bogus", 'invalid sslmode value: "bogus"'),
], ids=["port", "ipv6", "option"])
def test_a_malformed_url_is_one_clear_line_before_any_connection(url, needle, tmp_path, capsys, monkeypatch):
    from skill_server.cli.entry import main
    create_key(tmp_path / "fleet.key")
    monkeypatch.setenv("SKILL_SERVER_KEY", str(tmp_path / "fleet.key"))
    monkeypatch.setenv("SKILL_SERVER_STATE_DIR", str(tmp_path / "state"))
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(record()))
    for argv in (("record", str(rec)), ("history", BLOCKSCALE)):
        code = main(["--skills-dir", str(SKILLS), "--ledger", url, *argv])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and needle in err and "Traceback" not in err, err


def test_the_password_is_never_shown_nor_located_by_masking(pg_backend):
    """A short password occurs inside ordinary words of the driver's message: masking each
    occurrence would show where, and so what, it is. The message is kept (the password is not
    a token of it); a driver message that does name it is withheld whole."""
    dead = _with_password(pg_backend.location, "e").replace(f":{urlsplit(pg_backend.location).port}/",
                                                             f":{free_port()}/")
    with pytest.raises(LedgerError) as refused:
        open_store(dead).key_ids()
    line = str(refused.value)
    assert "Connection refused" in line and "check that the PostgreSQL server runs" in line and ":***@" in line
    bad_escape = _with_password(pg_backend.location, "s3cr%zzet")
    with pytest.raises(LedgerError) as withheld:
        open_store(bad_escape).key_ids()
    assert "s3cr" not in str(withheld.value) and "withheld" in str(withheld.value), str(withheld.value)
