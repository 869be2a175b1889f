"""Defects found by the adversarial tester: a verifying run listed twice, a full disk
reported as "cannot rollback", a timeout sentence that added the grace to the timeout, and a
loop failure logged as a traceback every second."""

from __future__ import annotations

import json
import logging
import sqlite3

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger import lifecycle, outcomes, runs
from core.ledger.connection import Ledger
from core.ledger.writer import Writer
from core.runner.failures import FailureLog
from core.supervisor.rules import OutcomeFacts, _failure_text


def test_a_verifying_run_is_listed_once(ledger, ledger_target):
    rid = ledger.write(lambda c: runs.create(c, job="job", slot="s1", trigger="manual", actor="test",
                                             not_before=0.0, spec_hash=None))
    assert lifecycle.transition(ledger, rid, 1, "queued", "spawned", actor="test")
    assert lifecycle.transition(ledger, rid, 1, "spawned", "running", actor="test", fields={"started_at": 1.0})
    assert lifecycle.transition(ledger, rid, 1, "running", "verifying", actor="test",
                                fields={"ended_at": 2.0, "exit_code": 0})
    ledger.write(lambda c: outcomes.record(c, rid, state="verifying", status="success"))
    assert [r.run.id for r in runs.list_runs(ledger)] == [rid]
    assert [r.run.id for r in runs.list_runs(ledger, state="verifying")] == [rid]
    res = CliRunner().invoke(cli, ["runs", "--ledger", ledger_target, "--json"])
    assert res.exit_code == 0, res.output
    assert [json.loads(line)["id"] for line in res.output.splitlines() if line.strip()] == [rid]


def _fill_up(led: Ledger) -> None:
    """Cap the file at its current size: the next big insert fails with SQLITE_FULL, which
    makes SQLite roll the transaction back itself."""
    led.write(lambda c: c.execute("CREATE TABLE IF NOT EXISTS scratch (x BLOB)"))
    pages = led.conn.execute("PRAGMA page_count").fetchone()[0]
    led.conn.execute(f"PRAGMA max_page_count = {pages + 1}")


def _big_insert(c: sqlite3.Connection) -> None:
    for _ in range(20):
        c.execute("INSERT INTO scratch VALUES (?)", (b"x" * 4000,))


def test_a_full_disk_is_reported_as_such_not_as_a_failed_rollback(tmp_path):
    # SQLite's full disk (max_page_count reached); PostgreSQL's is the server's own error
    ledger = Ledger(tmp_path / "wk.db")
    _fill_up(ledger)
    with pytest.raises(sqlite3.OperationalError, match="full"):
        ledger.write(_big_insert)
    ledger.write(lambda c: c.execute("INSERT INTO scratch VALUES (1)"))  # usable again for small writes
    ledger.close()


def test_the_writer_reports_a_full_disk_to_its_callers(tmp_path):
    Ledger(tmp_path / "wk.db").close()
    w = Writer(tmp_path / "wk.db")
    try:
        w.write(lambda c: c.execute("CREATE TABLE scratch (x BLOB)"))
        pages = w.submit(lambda c: c.execute("PRAGMA page_count").fetchone()[0]).result()
        w.submit(lambda c: c.execute(f"PRAGMA max_page_count = {pages + 1}")).result()
        with pytest.raises(sqlite3.OperationalError, match="full"):
            w.write(_big_insert)
        w.write(lambda c: c.execute("INSERT INTO scratch VALUES (1)"))  # the thread goes on
    finally:
        w.close()


def test_the_timeout_sentence_says_the_timeout_and_the_grace():
    f = OutcomeFacts(state="timed_out", status="timed_out", reason="timeout",
                     run_reason="timed out after 3s; SIGTERM ignored, killed 2s later",
                     duration_s=5.02, exit_code=None, signal=9)
    text = _failure_text(f)
    assert text.startswith("timed out after 3s; SIGTERM ignored, killed 2s later")
    assert "5s" not in text


def test_a_loop_failure_is_one_line_per_kind_rate_limited_and_recovery_is_said(caplog):
    now = [0.0]
    fl = FailureLog(logging.getLogger("t.failures"), every_s=60, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, "t.failures")
    for _ in range(30):  # a loop failing every second for half a minute
        fl.failed("scheduler tick", sqlite3.OperationalError("database or disk is full"))
        now[0] += 1
    lines = [r for r in caplog.records if r.name == "t.failures"]
    assert len(lines) == 1 and lines[0].exc_info is None
    assert "scheduler tick failed: OperationalError: database or disk is full" in lines[0].getMessage()
    now[0] += 60
    fl.failed("scheduler tick", sqlite3.OperationalError("database or disk is full"))
    assert "29 more time(s)" in caplog.records[-1].getMessage()
    fl.ok("scheduler tick")
    fl.ok("scheduler tick")
    assert [r.getMessage() for r in caplog.records].count("scheduler tick works again") == 1
