"""What --ledger may point at by mistake (SQLite side): a file that is not a database,
another program's SQLite database, a folder. Each read and write through the CLI ends in
one line on stderr naming the path and what to do, exit 2, no traceback, and the file is
left exactly as it was (no ledger tables added to someone else's database)."""
from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from ledger_support import BLOCKSCALE, SKILLS, record

from skill_server.cli.entry import main
def _junk(path: Path) -> Path:
    path.write_bytes(b"not a database, just notes\n" * 200)
    return path


def _foreign(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    return path


def _folder(path: Path) -> Path:
    path.mkdir()
    (path / "keep.txt").write_text("x")
    return path


def _fingerprint(path: Path) -> str:
    if path.is_dir():
        return ",".join(sorted(p.name for p in path.iterdir()))
    return hashlib.sha256(path.read_bytes()).hexdigest()


CASES = [(_junk, "not a skill-server ledger file"), (_foreign, "a SQLite database of something else (tables: customers)"),
         (_folder, "is a folder, not a ledger file")]


@pytest.mark.parametrize("make, needle", CASES, ids=["junk", "foreign", "folder"])
def test_a_ledger_path_that_is_not_a_ledger_is_one_clear_line_and_stays_untouched(make, needle, tmp_path, capsys,
                                                                                   monkeypatch):
    monkeypatch.setenv("SKILL_SERVER_STATE_DIR", str(tmp_path / "state"))
    target = make(tmp_path / "ledger.sqlite")
    before = _fingerprint(target)
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(record()))
    commands = [("record", str(rec)), ("history", BLOCKSCALE), ("ledger-copy", str(target), str(tmp_path / "c.sqlite"))]
    if make is _folder:
        commands = commands[:1]  # a folder reads as an empty ledger (nothing there yet); writing is refused
    for argv in commands:
        code = main(["--skills-dir", str(SKILLS), "--ledger", str(target), *argv])
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and str(target) in lines[0], (argv, err)
    assert _fingerprint(target) == before
    assert not (tmp_path / "c.sqlite").exists()
    if make is _foreign:
        names = {r[0] for r in sqlite3.connect(target).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert names == {"customers"}
