"""A sweep write that fails (ledger locked, read-only) changes nothing and is retried on the
next pass; nothing is skipped."""

from __future__ import annotations

import sqlite3

import pytest

from core.ledger.connection import Ledger
from core.sweep.sweep import Sweeper
from tests.kit.sweep import add_job, add_run, add_runner, dead_pid, fast_settings, run_row


def candidate(ledger):
    add_job(ledger)
    pid, ctime = dead_pid()
    rpid, rctime = dead_pid()
    rid = add_runner(ledger, pid=rpid, create_time=rctime, heartbeat_age=5)
    return add_run(ledger, pid=pid, create_time=ctime, runner_id=rid)


def test_locked_ledger_is_reported_then_retried(ledger, tmp_path):
    if ledger.backend != "sqlite":
        pytest.skip("holds SQLite's file write lock (PostgreSQL's conflicts: tests/ledger/test_postgres_ledger.py)")
    run_id = candidate(ledger)
    settings = fast_settings(tmp_path / "wk.db")
    sweeper = Sweeper(settings, actor="sweep", write_wait_s=0.2)
    impatient = Ledger(tmp_path / "wk.db", busy_timeout_ms=50)
    blocker = sqlite3.connect(tmp_path / "wk.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        report = sweeper.settle(impatient)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        impatient.close()
    assert report.orphaned == [] and report.errors and "retried next pass" in report.errors[0]
    assert run_row(ledger, run_id)["state"] == "running"
    assert sweeper.settle(ledger).orphaned == [run_id]


def test_read_only_ledger_is_reported_then_retried(ledger, tmp_path):
    if ledger.backend != "sqlite":
        pytest.skip("a read-only SQLite file")
    run_id = candidate(ledger)
    settings = fast_settings(tmp_path / "wk.db")
    sweeper = Sweeper(settings, actor="sweep")
    with Ledger(tmp_path / "wk.db", read_only=True) as ro:
        report = sweeper.sweep_once(ro)
    assert report.orphaned == [] and report.errors
    assert run_row(ledger, run_id)["state"] == "running"
    assert sweeper.sweep_once(ledger).orphaned == [run_id]
