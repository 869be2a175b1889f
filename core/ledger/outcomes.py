"""The ``job_outcomes`` table: one structured record per finished run.

The runner inserts the record when a process exits (in the same transaction as
running → verifying); the supervisor completes it (verification, verdict). Runs that end
without a normal exit (timed_out, orphaned, abandoned, spawn failure) get their record in
the transaction of that terminal move via ``record``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from core.ledger.connection import Conn

COLUMNS = frozenset({
    "state", "status", "reason", "duration_s", "exit_code", "signal", "stdout_bytes", "stderr_bytes",
    "output_truncated", "stdout_head", "stdout_tail", "stderr_head", "stderr_tail", "handoff_raw",
    "handoff", "handoff_findings", "verification", "verdict", "escalate", "severity", "verdict_kind",
    "verdict_reason", "silent", "judged_by",
})
_JSON = frozenset({"handoff", "handoff_findings", "verification", "verdict"})


def _encode(fields: dict[str, Any]) -> dict[str, Any]:
    bad = set(fields) - COLUMNS
    if bad:
        raise ValueError(f"unknown job_outcomes columns {sorted(bad)}")
    return {k: (json.dumps(v, default=str) if k in _JSON and v is not None and not isinstance(v, str) else v)
            for k, v in fields.items()}


def record(conn: Conn, run_id: int, *, now: float | None = None, **fields: Any) -> None:
    """Insert or update the outcome of ``run_id`` (call inside the writing transaction).

    ``fields`` are ``job_outcomes`` columns; JSON columns accept dicts/lists. ``job``,
    ``lineage`` and ``attempt`` are copied from ``runs``; ``duration_s`` defaults to
    ``ended_at - started_at`` when both are known. ``now`` (Unix seconds, UTC; default the
    current time) is the row's ``created_at``/``updated_at``.

    Raises:
        ValueError: unknown column, or no such run.
    """
    enc = _encode(fields)
    ts = time.time() if now is None else now
    if enc:
        # The row usually exists already (the terminal move updates what verifying wrote):
        # one statement then, instead of reading the run and the row first (on PostgreSQL
        # every statement is a round trip, and every read a predicate lock).
        sets = ", ".join(f"{k} = ?" for k in enc)
        if conn.execute(f"UPDATE job_outcomes SET {sets}, updated_at = ? WHERE run_id = ?",
                        (*enc.values(), ts, run_id)).rowcount > 0:
            return
    run = conn.execute("SELECT job, lineage, attempt, state, started_at, ended_at FROM runs WHERE id = ?",
                       (run_id,)).fetchone()
    if run is None:
        raise ValueError(f"no run {run_id}")
    if not enc and conn.execute("SELECT 1 FROM job_outcomes WHERE run_id = ?", (run_id,)).fetchone():
        return
    enc.setdefault("state", run["state"])
    enc.setdefault("status", run["state"])
    if "duration_s" not in enc and run["started_at"] is not None:
        enc["duration_s"] = (run["ended_at"] or ts) - run["started_at"]
    cols = ["run_id", "job", "lineage", "attempt", "created_at", "updated_at", *enc]
    conn.execute(f"INSERT INTO job_outcomes ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                 (run_id, run["job"], run["lineage"], run["attempt"], ts, ts, *enc.values()))


def get(conn: Conn, run_id: int) -> dict[str, Any] | None:
    """The outcome of ``run_id`` as a dict with JSON columns decoded, or None."""
    row = conn.execute("SELECT * FROM job_outcomes WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    out = {k: row[k] for k in row.keys()}
    for k in _JSON:
        if out.get(k):
            try:
                out[k] = json.loads(out[k])
            except ValueError:
                pass
    return out


#: Columns of a history row: enough for the judge's baselines (duration, line shapes, work
#: counts, file sizes), lineage policy (flapping, first success) and the verdict the outcome
#: was given (``verdict_kind``, ``escalate``: a success escalated as an anomaly teaches no
#: baseline, or one zero-row run would make zero rows normal).
HISTORY_COLUMNS = ("run_id", "attempt", "state", "status", "duration_s", "exit_code", "signal", "stdout_head",
                   "stdout_tail", "stderr_tail", "handoff", "verification", "verdict_kind", "escalate")
#: The outcome's output columns, kept only for successes (only they teach the work baseline).
_SUCCESS_ONLY = ("stdout_head", "stdout_tail", "stderr_tail", "handoff", "verification")
#: ``HISTORY_COLUMNS`` as the select list over ``job_outcomes o`` (``_SUCCESS_ONLY`` as None
#: unless the outcome succeeded), shared by ``job_history`` and ``history_rows``.
_HISTORY_SELECT = ", ".join(
    [f"o.{c}" for c in HISTORY_COLUMNS if c not in _SUCCESS_ONLY]
    + [f"CASE WHEN o.state = 'succeeded' THEN o.{c} END AS {c}" for c in _SUCCESS_ONLY])


def job_history(conn: Conn, job: str, before_run: int, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` judged top-level outcomes of ``job`` before run ``before_run``, oldest
    first, from ``job_outcomes`` joined to ``runs`` (sub-tasks excluded).

    Each row: ``HISTORY_COLUMNS`` (``handoff`` and ``verification`` decoded from JSON, None when
    unreadable) plus ``retried`` (bool: the retry policy queued a next attempt). Output columns of
    non-successful outcomes are None: only successes teach the work baseline.
    """
    rows = conn.execute(
        f"SELECT {_HISTORY_SELECT}, {_RETRIED} AS retried"
        f" FROM job_outcomes o WHERE {_HISTORY_WHERE}"
        " ORDER BY o.run_id DESC LIMIT ?", (job, before_run, limit)).fetchall()
    return _history_dicts(reversed(rows))


#: The retry policy queued a next attempt of a history row's lineage (``retried``); an
#: operator's later ``manual_retry`` is not counted (``runs.retry_queued``).
# A scalar subquery with LIMIT, not EXISTS: PostgreSQL planned the EXISTS as a hashed subplan
# that reads every retry run of the table (a parallel sequential scan: 23 ms
# a judgement on 200,000 runs), where this one probes ``runs_lineage`` per row kept (0.5 ms).
_RETRIED = ("((SELECT 1 FROM runs r2 WHERE r2.lineage = o.lineage AND r2.attempt = o.attempt + 1"
            " AND r2.trigger = 'retry' LIMIT 1) IS NOT NULL)")
#: Which outcomes are a job's history (parameters: job, before_run), over ``job_outcomes o``
#: alone. The run's task is read per outcome kept, not joined: a join made PostgreSQL scan
#: ``runs`` once per outcome on a new ledger, before autovacuum's first statistics (19 ms a
#: judgement at 600 runs, growing with the square of the runs).
_HISTORY_WHERE = ("o.job = ? AND o.run_id < ? AND o.judged_by IS NOT NULL"
                  " AND (SELECT r.task FROM runs r WHERE r.id = o.run_id) = ''")


def job_history_keys(conn: Conn, job: str, before_run: int,
                     limit: int) -> list[tuple[int, float, bool]]:
    """The same outcomes as ``job_history`` (same rows, same order: oldest first), each as
    ``(run_id, updated_at, retried)`` only: what a caller that keeps decoded rows needs to
    tell which of them it already holds. ``updated_at`` (Unix seconds, ``job_outcomes``)
    changes with every write to the row (``record``, ``set_verdict``)."""
    rows = conn.execute(
        f"SELECT o.run_id, o.updated_at, {_RETRIED} AS retried"
        f" FROM job_outcomes o WHERE {_HISTORY_WHERE}"
        " ORDER BY o.run_id DESC LIMIT ?", (job, before_run, limit)).fetchall()
    return [(int(r[0]), r[1], bool(r[2])) for r in reversed(rows)]


def history_rows(conn: Conn, run_ids: list[int]) -> list[dict[str, Any]]:
    """``job_history`` rows (same columns and decoding, plus ``updated_at``) of the outcomes
    ``run_ids``, in ascending run id order; an id without an outcome is left out. ``retried``
    is read as well (current at the time of this read)."""
    if not run_ids:
        return []
    rows = conn.execute(
        f"SELECT {_HISTORY_SELECT}, o.updated_at, {_RETRIED} AS retried FROM job_outcomes o"
        " WHERE o.run_id IN (SELECT value FROM json_each(?)) ORDER BY o.run_id",
        (json.dumps(run_ids),)).fetchall()
    return _history_dicts(rows)


def _history_dicts(rows: Any) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        d = {k: row[k] for k in row.keys()}
        for k in ("handoff", "verification"):
            if isinstance(d.get(k), str):
                try:
                    d[k] = json.loads(d[k])
                except ValueError:
                    d[k] = None
        d["retried"] = bool(d["retried"])
        out.append(d)
    return out


def escalated_kind_before(conn: Conn, lineage: str, attempt: int) -> str | None:
    """The escalation kind (``job_outcomes.verdict_kind`` with ``escalate = 1``) of the latest
    attempt of ``lineage`` before ``attempt``, or None when none escalated. What a manual
    retry's failure is counted on, so it does not open a second kind for the same failure."""
    row = conn.execute("SELECT verdict_kind FROM job_outcomes WHERE lineage = ? AND attempt < ? AND escalate = 1"
                       " ORDER BY attempt DESC LIMIT 1", (lineage, attempt)).fetchone()
    return None if row is None else row[0]


def exists(conn: Conn, run_id: int) -> bool:
    """Whether ``run_id`` has a ``job_outcomes`` row."""
    return conn.execute("SELECT 1 FROM job_outcomes WHERE run_id = ?", (run_id,)).fetchone() is not None


def judged_by(conn: Conn, run_id: int) -> str | None:
    """``job_outcomes.judged_by`` of ``run_id`` (``rules``, ``claude:<model>`` …), or None when
    the run has no outcome or was not judged yet."""
    row = conn.execute("SELECT judged_by FROM job_outcomes WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else row[0]


def set_verdict(conn: Conn, run_id: int, *, verdict: dict[str, Any], escalate: bool,
                severity: str | None, kind: str, reason: str, silent: bool, judged_by: str,
                now: float | None = None) -> bool:
    """Write the supervisor's verdict into ``run_id``'s outcome, only if it has none yet
    (compare-and-set on ``judged_by IS NULL``). Returns False when it was judged already
    (the first verdict stands). Call inside the writing transaction; ``now`` is Unix seconds."""
    cur = conn.execute(
        "UPDATE job_outcomes SET verdict = ?, escalate = ?, severity = ?, verdict_kind = ?, verdict_reason = ?,"
        " silent = ?, judged_by = ?, updated_at = ? WHERE run_id = ? AND judged_by IS NULL",
        (json.dumps(verdict, default=str), int(escalate), severity, kind, reason, int(silent), judged_by,
         time.time() if now is None else now, run_id))
    return cur.rowcount == 1


def judged_counts(conn: Conn, since: float) -> dict[str, Any]:
    """Outcomes judged since ``since`` (Unix seconds, by ``created_at``): ``{runs, silent,
    escalated, notes (neither silent nor escalated), by_verdict: {verdict_kind: n}}``."""
    row = conn.execute("SELECT COUNT(*) AS runs, SUM(CASE WHEN silent = 1 THEN 1 ELSE 0 END) AS silent,"
                       " SUM(CASE WHEN escalate = 1 THEN 1 ELSE 0 END) AS escalated,"
                       " SUM(CASE WHEN silent = 0 AND escalate = 0 THEN 1 ELSE 0 END) AS notes FROM job_outcomes"
                       " WHERE created_at >= ? AND judged_by IS NOT NULL", (since,)).fetchone()
    kinds = {r["verdict_kind"]: int(r["n"]) for r in conn.execute(
        "SELECT verdict_kind, COUNT(*) AS n FROM job_outcomes WHERE created_at >= ? AND judged_by IS NOT NULL"
        " GROUP BY verdict_kind ORDER BY n DESC LIMIT 50", (since,))}
    return {"runs": int(row["runs"] or 0), "silent": int(row["silent"] or 0),
            "escalated": int(row["escalated"] or 0), "notes": int(row["notes"] or 0), "by_verdict": kinds}


def judged_since(conn: Conn, since: float, limit: int) -> list[dict[str, Any]]:
    """Top-level judged outcomes created at or after ``since`` (Unix seconds), oldest first, at
    most ``limit``: whole ``job_outcomes`` rows (sub-tasks excluded)."""
    rows = conn.execute(
        "SELECT o.* FROM job_outcomes o JOIN runs r ON r.id = o.run_id"
        " WHERE o.created_at >= ? AND o.judged_by IS NOT NULL AND r.task = ''"
        " ORDER BY o.run_id LIMIT ?", (since, limit)).fetchall()
    return [{k: row[k] for k in row.keys()} for row in rows]
