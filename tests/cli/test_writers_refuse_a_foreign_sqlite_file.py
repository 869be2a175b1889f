"""Commands that write the ledger (``run``, ``up``, ``exec``, ``trigger``, ``prune``,
``doctor --repair``, ``mission start``) refuse a SQLite database that is someone else's: one
``error:`` line, exit 2, the file byte for byte as it was. Only an empty or new file becomes
a ledger."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger, NotALedger
from tests.kit.cli import wk


def _foreign(tmp_path: Path) -> Path:
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE foo (x)")
    conn.execute("INSERT INTO foo VALUES (1)")
    conn.commit()
    conn.close()
    return db


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _specs(tmp_path: Path) -> Path:
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "a.toml").write_text('[[job]]\nname = "a"\ncommand = "true"\nevery = "1h"\n')
    return specs


def _line(db: Path) -> str:
    return (f"error: {db}: not a Watchkeeper ledger: a SQLite database of something else (tables 'foo');"
            " only an empty or new file becomes a ledger")


@pytest.mark.parametrize("command", ["run", "up"])
def test_runner_commands_refuse_a_foreign_database(tmp_path: Path, command: str):
    db = _foreign(tmp_path)
    before = _digest(db)
    specs = _specs(tmp_path)
    # A real process: a runner that wrongly accepted the file would run until the timeout.
    proc = subprocess.run([sys.executable, "-m", "console.cli", command, str(specs), "--ledger", str(db)],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == _line(db)
    assert _digest(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs", "other.db"]  # no -wal, -shm, artifacts


@pytest.mark.parametrize("args", [["trigger", "a"], ["prune", "--max-age", "1d"], ["doctor", "--repair"],
                                  ["sweep"], ["mission", "start", "g", "--worker", "w", "--coordinator", "scripted"]],
                         ids=lambda a: " ".join(a[:2]))
def test_other_writers_refuse_a_foreign_database(tmp_path: Path, args: list[str]):
    db = _foreign(tmp_path)
    before = _digest(db)
    res = CliRunner().invoke(cli, [*args, "--ledger", str(db)])
    assert res.exit_code == 2, res.output
    assert _line(db) in res.stderr.splitlines()
    assert _digest(db) == before


def test_exec_does_not_make_a_foreign_database_a_ledger(tmp_path: Path):
    # exec fails open (the wrapped command still runs, issue 18); what it must never do is
    # write Watchkeeper's tables into the file.
    db = _foreign(tmp_path)
    before = _digest(db)
    # The real command, not CliRunner: failing open, exec replaces its own process with the
    # wrapped command (os.execvpe), which would replace the test's.
    res = wk("exec", "--job", "x", "--ledger", str(db), "--", "sh", "-c", "exit 7", cwd=tmp_path)
    assert res.returncode == 7  # the command ran and its status passed through
    assert "not a Watchkeeper ledger: a SQLite database of something else" in res.stderr
    assert _digest(db) == before
    assert {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")} == {"foo"}


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_only_an_empty_or_new_file_becomes_a_ledger(tmp_path: Path, make: str):
    db = tmp_path / "wk.db"
    if make == "empty":
        db.write_bytes(b"")
    res = CliRunner().invoke(cli, ["exec", "--job", "x", "--ledger", str(db), "--", "true"])
    assert res.exit_code == 0, res.output
    with Ledger(db, read_only=True) as led:
        assert led.scalar("SELECT COUNT(*) FROM runs WHERE job = 'x'") == 1


def test_a_ledger_reopens_and_a_foreign_file_raises_before_any_write(tmp_path: Path):
    Ledger(tmp_path / "wk.db").close()
    Ledger(tmp_path / "wk.db").close()  # a ledger is not "foreign" to itself
    db = _foreign(tmp_path)
    before = _digest(db)
    with pytest.raises(NotALedger):
        Ledger(db)
    with pytest.raises(NotALedger):
        Ledger(db, read_only=True)
    assert _digest(db) == before
