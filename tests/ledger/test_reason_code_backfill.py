"""Schema 8 gives every ended run its closed reason code (``runs.reason_code``); rows written
before it had only the sentence in ``runs.reason``, and the migration fills the code in."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from core.ledger.connection import MIGRATIONS, Ledger, split_sql

#: (state, runs.reason as written before schema 7, signal) → the code it is given.
OLD_ROWS = [
    ("succeeded", None, None, "completed"),
    ("succeeded", "partial", None, "partial"),
    ("failed", "exit_code", None, "exit_code"),
    ("failed", "signal", 9, "signal"),
    ("failed", "verification_failed", None, "verification_failed"),
    ("failed", "spawn_failed: FileNotFoundError: no such command", None, "spawn_failed"),
    ("failed", "supervisor_error", None, "supervisor_error"),
    ("failed", None, 15, "signal"),
    ("blocked", "blocked", None, "blocked"),
    ("timed_out", "timeout after 3s; SIGTERM ignored, killed 2s later", 9, "timeout"),
    ("timed_out", "budget.wall exceeded (5s)", 15, "budget_exceeded"),
    ("timed_out", "fan-out not settled within 60s", None, "fanout_unsettled"),
    ("abandoned", "abandoned by ana", None, "operator"),
    ("abandoned", "job_removed", None, "job_removed"),
    ("abandoned", "parent_ended", None, "parent_ended"),
    ("orphaned", "lease_expired", None, "lease_expired"),
    ("orphaned", "runner_gone", 9, "runner_gone"),
    ("orphaned", "interrupted", None, "interrupted"),
    ("orphaned", "pid_gone", None, None),   # a code no release wrote: left unknown, never guessed
    ("running", None, None, None),          # live: no end, no code
]


def _ledger_at_schema_7(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:7]:
        for stmt in split_sql(script):
            conn.execute(stmt)
    conn.execute("PRAGMA user_version=7")
    for i, (state, reason, sig, _code) in enumerate(OLD_ROWS, start=1):
        conn.execute("INSERT INTO runs (id, job, lineage, attempt, state, slot, trigger, not_before, created_at,"
                     " updated_at, reason, signal) VALUES (?, 'job', ?, 1, ?, ?, 'schedule', 0, 0, 0, ?, ?)",
                     (i, f"l{i}", state, f"s{i}", reason, sig))
    conn.close()


def test_old_runs_get_their_reason_code_and_keep_their_sentence(tmp_path):
    path = tmp_path / "wk.db"
    _ledger_at_schema_7(path)
    with Ledger(path) as led:
        got = {r["id"]: (r["reason_code"], r["reason"]) for r in led.rows("SELECT id, reason_code, reason FROM runs")}
    for i, (_state, reason, _sig, code) in enumerate(OLD_ROWS, start=1):
        assert got[i] == (code, reason), OLD_ROWS[i - 1]
