"""core.actions: retry queues a new attempt; abandon is compare-and-set first, then kills."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from core import actions
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf


@pytest.fixture
def ledger(tmp_path: Path):
    ids = cf.build(tmp_path / "wk.db")
    with Ledger(tmp_path / "wk.db") as db:
        db.ids = ids
        yield db


def test_retry_queues_next_attempt_of_the_lineage(ledger):
    old = ledger.one("SELECT * FROM runs WHERE id=?", (ledger.ids["failed_run"],))
    res = actions.retry(ledger, old["id"], "ana", now=cf.NOW)
    assert res.ok, res.message
    new = ledger.one("SELECT * FROM runs WHERE id=?", (res.target_id,))
    assert (new["lineage"], new["slot"], new["attempt"], new["state"], new["trigger"], new["not_before"]) == (
        old["lineage"], old["slot"], 2, "queued", "manual_retry", cf.NOW)
    ev = ledger.one("SELECT actor, kind FROM events WHERE run_id=?", (res.target_id,))
    assert (ev["actor"], ev["kind"]) == ("operator:ana", "manual_retry")


def test_second_retry_is_refused_while_the_first_is_queued(ledger):
    assert actions.retry(ledger, ledger.ids["failed_run"], "ana").ok
    res = actions.retry(ledger, ledger.ids["failed_run"], "bob")
    assert not res.ok and "already queued" in res.message and "by ana" in res.message


def test_abandon_queued_run_and_lost_race_message(ledger):
    queued = actions.retry(ledger, ledger.ids["failed_run"], "ana").target_id
    res = actions.abandon(ledger, queued, "ana")
    assert res.ok
    row = ledger.one("SELECT state FROM runs WHERE id=?", (queued,))
    assert row["state"] == "abandoned"
    assert ledger.one("SELECT status FROM job_outcomes WHERE run_id=?", (queued,))["status"] == "abandoned"
    again = actions.abandon(ledger, queued, "bob")
    assert not again.ok and "already abandoned by ana" in again.message


def test_abandon_kills_the_live_process_group_and_keeps_artifacts(ledger, tmp_path):
    art = tmp_path / "art"
    art.mkdir()
    (art / "stdout.log").write_text("kept")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        ctime = psutil.Process(proc.pid).create_time()
        run_id = cf.add_run(ledger, "backup-db", state="running", ended_at=None, pid=proc.pid,
                            pid_create_time=ctime, pgid=os.getpgid(proc.pid), artifacts_dir=str(art),
                            lineage="live-1")
        res = actions.abandon(ledger, run_id, "ana", grace_s=2)
        assert res.ok, res.message
        assert "terminated (SIGTERM)" in res.message
        assert not psutil.pid_exists(proc.pid) or psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE
        assert ledger.one("SELECT state FROM runs WHERE id=?", (run_id,))["state"] == "abandoned"
        kinds = [r["kind"] for r in ledger.query("SELECT kind FROM events WHERE run_id=? ORDER BY id", (run_id,))]
        assert kinds[-2:] == ["transition", "abandon_kill"]
        assert (art / "stdout.log").read_text() == "kept"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_abandon_never_signals_a_reused_pid(ledger):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        run_id = cf.add_run(ledger, "backup-db", state="running", ended_at=None, pid=proc.pid,
                            pid_create_time=time.time() - 10_000, lineage="live-2")
        res = actions.abandon(ledger, run_id, "ana", grace_s=0.2)
        assert res.ok and "no live process" in res.message
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
