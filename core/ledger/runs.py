"""Listing runs for the CLI (``watchkeeper runs``) and queueing manual runs (``trigger``).
Run detail lives in ``core.ledger.reads.run_detail``, shared with the console.

All values come from the ``runs``, ``job_outcomes`` and ``events`` tables; times are Unix
seconds (UTC).
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any

from core.ledger.connection import Ledger, add_event


class UnknownJob(LookupError):
    """``trigger`` named a job that is not in the ``jobs`` table (or is disabled)."""


def list_runs(ledger: Ledger, *, job: str | None = None, state: str | None = None,
              limit: int = 50, before_id: int | None = None) -> list[dict[str, Any]]:
    """Newest runs first (keyset on ``runs.id``), each a dict of ``runs`` columns plus the
    outcome's ``duration_s``, ``status`` and ``verdict_reason``. ``limit`` ≤ 10,000."""
    where, params = [], []
    if job:
        where.append("r.job = ?")
        params.append(job)
    if state:
        where.append("r.state = ?")
        params.append(state)
    if before_id is not None:
        where.append("r.id < ?")
        params.append(before_id)
    sql = ("SELECT r.*, o.duration_s, o.status, o.verdict_reason, o.severity FROM runs r"
           " LEFT JOIN job_outcomes o ON o.run_id = r.id")
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY r.id DESC LIMIT ?"
    params.append(max(1, min(int(limit), 10000)))
    return [dict(r) for r in ledger.query(sql, params)]


def trigger(ledger: Ledger, job: str, *, actor: str) -> int:
    """Queue attempt 1 of a manual run of ``job`` now (slot ``manual:<uuid>``); returns its id.

    Raises:
        UnknownJob: the job is not in the ``jobs`` table or is disabled.
    """
    now = time.time()

    def tx(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT spec_hash, enabled FROM jobs WHERE name = ?", (job,)).fetchone()
        if row is None or not row["enabled"]:
            raise UnknownJob(f"no job {job!r} in the ledger (a runner records jobs when it loads their specs)")
        cur = conn.execute(
            "INSERT INTO runs (job, lineage, attempt, state, slot, task, trigger, spec_hash, not_before, created_at,"
            " updated_at) VALUES (?,?,1,'queued',?,'','manual',?,?,?,?)",
            (job, uuid.uuid4().hex, f"manual:{uuid.uuid4().hex[:12]}", row["spec_hash"], now, now, now))
        run_id = int(cur.lastrowid)
        add_event(conn, actor=actor, kind="run_queued", run_id=run_id, job=job, attempt=1, to_state="queued",
                  reason="manual")
        return run_id
    return ledger.write(tx)


def job_names(ledger: Ledger) -> list[str]:
    """Names of enabled jobs in the ``jobs`` table, sorted."""
    return [r[0] for r in ledger.query("SELECT name FROM jobs WHERE enabled = 1 ORDER BY name LIMIT 10000")]
