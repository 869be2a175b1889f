"""The CLI on a ledger that is not a happy one (a text file, a newer schema, read-only
media), out-of-range numbers and odd arguments: one clear ``error:`` line, never a
traceback, and the README's exit codes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import console.cli.common as cli_common
from console.cli.main import cli
from console.cli.runs import _safe
from core.ledger.connection import SCHEMA_VERSION, Ledger

# Every command that opens the ledger; none of them may loop on a bad ledger.
COMMANDS = [["runs"], ["show", "1"], ["jobs"], ["trigger", "x"], ["escalations"], ["tail"], ["report"],
            ["ack", "1"], ["snooze", "1", "--for", "1h"], ["resolve", "1"], ["status"], ["doctor"],
            ["doctor", "--repair"], ["sweep"], ["console", "--read-only"], ["console"]]


def _invoke(args: list[str]):
    res = CliRunner().invoke(cli, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    return res


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_text_file_as_ledger(tmp_path: Path, args: list[str]):
    db = tmp_path / "notes.db"
    db.write_text("these are my notes, not a database\n" * 100)
    res = _invoke([*args, "--ledger", str(db)])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == f"error: {db}: not a Watchkeeper ledger (file is not a database)"
    assert db.read_text().startswith("these are my notes")  # untouched


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_newer_schema(tmp_path: Path, args: list[str]):
    db = tmp_path / "new.db"
    Ledger(db).close()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    res = _invoke([*args, "--ledger", str(db)])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == f"error: {db}: written by a newer Watchkeeper (schema 99 > {SCHEMA_VERSION})"


def test_plain_sqlite_database_without_schema_is_not_a_ledger(tmp_path: Path):
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    res = _invoke(["runs", "--ledger", str(db)])
    assert res.exit_code == 2 and "not a Watchkeeper ledger" in res.stderr


READ_ONLY = [["runs"], ["show", "1"], ["jobs"], ["escalations"], ["report"], ["status"], ["doctor"],
             ["console", "--read-only"]]


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a))
def test_read_only_commands_open_the_ledger_read_only(tmp_path: Path, monkeypatch, args: list[str]):
    db = tmp_path / "l.db"
    Ledger(db).close()
    modes: list[bool] = []

    class Spy(Ledger):
        def __init__(self, path, **kw):
            modes.append(bool(kw.get("read_only")))
            super().__init__(path, **kw)

    monkeypatch.setattr(cli_common, "Ledger", Spy)
    if args[0] == "console":
        monkeypatch.setattr("console.cli.console._app", lambda *a, **kw: type("A", (), {"run": lambda self, **k: None})())
    _invoke([*args, "--ledger", str(db)])
    assert modes and all(modes), modes


def test_read_only_media_is_one_clear_line(tmp_path: Path, monkeypatch):
    # What a read-only bind mount gives when the ledger is opened for writing (root cannot
    # be kept from writing by file modes, so the failure is injected).
    db = tmp_path / "l.db"
    Ledger(db).close()

    def refuse(path, **kw):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(cli_common, "Ledger", refuse)
    res = _invoke(["ack", "1", "--ledger", str(db)])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"error: {db}: cannot open the ledger for writing (unable to open database file)")
    res = _invoke(["runs", "--ledger", str(db)])
    assert res.exit_code == 2 and "needs its -shm file" in res.stderr


def test_read_only_open_works_on_a_wal_ledger(tmp_path: Path):
    db = tmp_path / "l.db"
    Ledger(db).close()
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    for args in (["runs"], ["jobs"], ["escalations"], ["report"], ["doctor"]):
        res = _invoke([*args, "--ledger", str(db)])
        assert res.exit_code == 0, (args, res.output)


# -- out-of-range numbers --------------------------------------------------------------
@pytest.mark.parametrize("args", [["show", "99999999999999999999"], ["show", "0"], ["ack", "99999999999999999999"],
                                  ["snooze", "1", "--for", "99999999d"], ["snooze", "1", "--for", "inf"],
                                  ["snooze", "1", "--for", "0s"], ["report", "--since", "999999999d"],
                                  ["tail", "--since", "nan"], ["escalations", "--limit", "99999999999999999999"],
                                  ["runs", "--state", "bogus"], ["sweep", "--interval", "inf"]],
                         ids=lambda a: " ".join(a))
def test_out_of_range_arguments_are_usage_errors(tmp_path: Path, args: list[str]):
    db = tmp_path / "l.db"
    Ledger(db).close()
    res = _invoke([*args, "--ledger", str(db)])
    assert res.exit_code == 2, res.output
    assert "Invalid value" in res.stderr or "error:" in res.stderr


def test_duration_limit_is_named(tmp_path: Path):
    res = _invoke(["snooze", "1", "--for", "99999999d", "--ledger", str(tmp_path / "l.db")])
    assert "at most 10 years" in res.stderr


def test_runs_state_lists_the_states(tmp_path: Path):
    res = _invoke(["runs", "--state", "bogus", "--ledger", str(tmp_path / "l.db")])
    assert res.exit_code == 2 and "orphaned" in res.stderr and "no runs" not in res.output


def test_check_of_a_file_says_not_a_folder(tmp_path: Path):
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0::/root:/bin/sh\n")
    res = _invoke(["check", str(f)])
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {f}: not a folder (give the folder that holds the job specs)"
    res = _invoke(["check", str(tmp_path / "nope")])
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {tmp_path / 'nope'}: no such folder"


def test_check_with_a_text_file_ledger_still_checks_the_folder(tmp_path: Path):
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "a.toml").write_text('name = "a"\ncommand = "true"\n')
    db = tmp_path / "notes.db"
    db.write_text("not a db\n" * 100)
    res = _invoke(["check", str(specs), "--ledger", str(db)])
    assert res.exit_code == 0 and "not a Watchkeeper ledger (file is not a database)" in res.output


@pytest.mark.parametrize("args", [["status"], ["sweep"], ["doctor"]])
def test_bad_settings_exit_3(tmp_path: Path, args: list[str]):
    cfg = tmp_path / "watchkeeper.toml"
    cfg.write_text('lease = "forever and a day"\n')
    res = _invoke([*args, "--config", str(cfg), "--ledger", str(tmp_path / "l.db")])
    assert res.exit_code == 3 and res.stderr.startswith("error: "), res.output


# -- terminal safety of show -----------------------------------------------------------
@pytest.mark.parametrize("ch", ["\u202e", "\u202a", "\u202d", "\u2066", "\u2069", "\u200b", "\u200f",
                                "\u061c", "\ufeff", "\u2028"])
def test_safe_escapes_bidi_and_format_characters(ch: str):
    out = _safe(f"evil{ch}txt.exe")
    assert ch not in out and f"\\u{ord(ch):04x}" in out


def test_safe_keeps_ordinary_text():
    assert _safe("héllo wörld ✓ 日本\n\tx") == "héllo wörld ✓ 日本\n\tx"
    assert _safe("\x1b[31m") == "\\x1b[31m"


def test_a_folder_named_as_the_ledger_in_the_environment_is_one_clear_line(tmp_path: Path, monkeypatch):
    """--ledger is checked by click; the same folder named by WATCHKEEPER_LEDGER (or the
    settings file) must say the same, not 'is the file or its folder read-only?'."""
    folder = tmp_path / "wk.db"
    folder.mkdir()
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "j.toml").write_text('name = "j"\ncommand = ["true"]\n')
    monkeypatch.setenv("WATCHKEEPER_LEDGER", str(folder))
    for args in (["run", str(tmp_path / "jobs")], ["runs"], ["trigger", "j"]):
        res = _invoke(args)
        assert res.exit_code == 2, (args, res.output)
        assert res.stderr.strip() == f"error: {folder}: not a Watchkeeper ledger (not a regular file)", args
