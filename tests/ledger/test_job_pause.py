"""Pausing a job: held in the ``jobs`` table (so it survives restarts), attributed, audited,
compare-and-set between two operators; ``watchkeeper pause/resume`` exit 0 done, 1 refused,
2 no such job; shown by ``jobs``, ``jobs --json`` and ``status``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core import actions
from core.ledger import jobs as ledger_jobs
from core.ledger.connection import Ledger
from core.vocabulary import AuditEvent
from tests.kit import console_fixtures as cf


@pytest.fixture
def db(tmp_path: Path) -> Path:
    cf.build(tmp_path / "wk.db")
    return tmp_path / "wk.db"


def events(ledger: Ledger, kind: str) -> list[dict]:
    return [dict(r) for r in ledger.query("SELECT actor, job, reason, detail FROM events WHERE kind = ? ORDER BY id",
                                          (kind,))]


def test_pause_is_attributed_audited_and_held_across_connections(db):
    with Ledger(db) as ledger:
        res = actions.pause_job(ledger, "backup-db", "ana", reason="disk swap", now=cf.NOW)
        assert res.ok and "backup-db paused by ana" in res.message
    with Ledger(db) as again:  # a restarted runner or another console sees the pause
        assert ledger_jobs.pause_of(again.conn, "backup-db") == {
            "paused_at": cf.NOW, "paused_by": "operator:ana", "pause_reason": "disk swap"}
        [ev] = events(again, AuditEvent.JOB_PAUSED)
        assert (ev["actor"], ev["job"], ev["reason"]) == ("operator:ana", "backup-db", "disk swap")


def test_second_operator_is_told_who_paused_first(db):
    with Ledger(db) as ledger:
        assert actions.pause_job(ledger, "backup-db", "ana", now=cf.NOW).ok
        mine = actions.pause_job(ledger, "backup-db", "ana")
        assert mine.ok and "nothing to do" in mine.message
        theirs = actions.pause_job(ledger, "backup-db", "bob")
        assert not theirs.ok and theirs.message == "backup-db already paused by ana at 2026-01-01T12:00:00Z"
        assert len(events(ledger, AuditEvent.JOB_PAUSED)) == 1


def test_resume_clears_the_pause_and_records_how_long(db):
    with Ledger(db) as ledger:
        refused = actions.resume_job(ledger, "backup-db", "bob")
        assert not refused.ok and refused.message == "backup-db is not paused"
        actions.pause_job(ledger, "backup-db", "ana", now=cf.NOW)
        res = actions.resume_job(ledger, "backup-db", "bob", now=cf.NOW + 90)
        assert res.ok and "backup-db resumed by bob" in res.message
        assert ledger_jobs.pause_of(ledger.conn, "backup-db") is None
        [ev] = events(ledger, AuditEvent.JOB_RESUMED)
        assert ev["actor"] == "operator:bob"
        assert json.loads(ev["detail"]) == {"paused_at": cf.NOW, "paused_by": "operator:ana", "paused_s": 90.0}
        assert actions.resume_job(ledger, "backup-db", "bob").ok  # the same operator again: nothing to do
        other = actions.resume_job(ledger, "backup-db", "cyd")
        assert not other.ok and "not paused (resumed by bob at 2026-01-01T12:01:30Z)" in other.message


def test_unknown_job_is_missing(db):
    with Ledger(db) as ledger:
        for res in (actions.pause_job(ledger, "nope", "ana"), actions.resume_job(ledger, "nope", "ana"),
                    actions.trigger_job(ledger, "nope", "ana")):
            assert res.missing and not res.ok


def test_trigger_runs_a_paused_job_and_says_so(db):
    with Ledger(db) as ledger:
        actions.pause_job(ledger, "backup-db", "ana")
        res = actions.trigger_job(ledger, "backup-db", "bob")
        assert res.ok and "paused" in res.message
        run = ledger.one("SELECT job, state, trigger FROM runs WHERE id = ?", (res.target_id,))
        assert tuple(run) == ("backup-db", "queued", "manual")
        ev = ledger.one("SELECT actor FROM events WHERE run_id = ? AND kind = 'run_queued'", (res.target_id,))
        assert ev["actor"] == "operator:bob"


def test_admit_slot_skips_and_records_while_paused(db):
    with Ledger(db) as ledger:
        assert ledger.write(lambda c: ledger_jobs.admit_slot(c, "backup-db", "s1", actor="runner:x"))
        actions.pause_job(ledger, "backup-db", "ana", now=cf.NOW)
        assert not ledger.write(lambda c: ledger_jobs.admit_slot(c, "backup-db", "s2", actor="runner:x"))
        [ev] = events(ledger, AuditEvent.SLOT_SKIPPED_PAUSED)
        assert ev["actor"] == "runner:x" and json.loads(ev["detail"])["slot"] == "s2"
        assert "paused by ana" in ev["reason"]


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def test_cli_pause_and_resume_exit_codes(db):
    led = ["--ledger", str(db)]
    no = invoke("pause", "backup-db", *led, "--as", "ana", input="n\n")
    assert no.exit_code == 1 and "not paused" in no.stderr
    ok = invoke("pause", "backup-db", *led, "--as", "ana", "--reason", "disk swap", input="y\n")
    assert ok.exit_code == 0, ok.output
    assert "Pause backup-db?" in ok.stdout and "backup-db paused by ana" in ok.stdout
    refused = invoke("pause", "backup-db", *led, "--as", "bob", "--yes")
    assert refused.exit_code == 1 and "already paused by ana at " in refused.stderr
    missing = invoke("pause", "nope", *led, "--yes")
    assert missing.exit_code == 2 and "no job 'nope'" in missing.stderr

    listed = invoke("jobs", *led)
    [line] = [ln for ln in listed.stdout.splitlines() if ln.startswith("backup-db")]
    assert "paused" in line
    rows = [json.loads(x) for x in invoke("jobs", *led, "--json").stdout.splitlines()]
    [row] = [r for r in rows if r["name"] == "backup-db"]
    assert row["paused_by"] == "operator:ana" and row["pause_reason"] == "disk swap"
    status = invoke("status", *led)
    assert "paused: backup-db by ana" in status.stdout and "(disk swap)" in status.stdout

    back = invoke("resume", "backup-db", *led, "--as", "bob", input="y\n")
    assert back.exit_code == 0 and "Resume backup-db (paused by ana)?" in back.stdout
    again = invoke("resume", "backup-db", *led, "--as", "cyd", "--yes")
    assert again.exit_code == 1 and "is not paused" in again.stderr
    assert invoke("resume", "nope", *led, "--yes").exit_code == 2


def test_a_schema_1_ledger_migrates_with_no_job_paused(tmp_path):
    import sqlite3

    from core.ledger.connection import MIGRATIONS, split_sql

    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    for stmt in split_sql(MIGRATIONS[0]):
        conn.execute(stmt)
    conn.execute("INSERT INTO jobs (name, spec, spec_hash, updated_at) VALUES ('a', '{}', 'h', 0)")
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    with Ledger(old) as ledger:
        assert ledger.schema_version >= 2
        assert ledger_jobs.pause_of(ledger.conn, "a") is None
        assert actions.pause_job(ledger, "a", "ana").ok


def test_a_hostile_pause_reason_is_shown_literally(db):
    led = ["--ledger", str(db)]
    assert invoke("pause", "backup-db", *led, "--yes", "--reason", "swap \x1b]0;PWNED\x07 \u202edisk").exit_code == 0
    out = invoke("status", *led).stdout
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;PWNED\\x07" in out
