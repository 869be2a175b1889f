"""The run queue as the runner sees it: queueing a scheduled slot, finding the queued runs
that are due, counting live runs for a concurrency limit, and the few reads the runner
makes about one run.

Every value comes from the ``runs`` table (and ``jobs`` for the breaker through
``core.ledger.breaker``); times are Unix seconds (UTC). Functions taking a ``conn`` run
inside the caller's transaction (write functions: inside ``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from core.ledger import breaker, jobs, outcomes, runs
from core.ledger.connection import Conn, add_event
from core.ledger.lifecycle import LIVE
from core.ledger.records import Run
from core.spec import schedule
from core.spec.model import JobSpec
from core.vocabulary import AuditEvent, Trigger, sql_set

_LIVE_SQL = sql_set(LIVE)


def last_scheduled_slots(conn: Conn) -> dict[str, float]:
    """``{job: newest slot accounted for}`` (Unix seconds): the newest ``not_before`` of every
    job's attempt-1 scheduled (or misfire) runs (``runs``), or the last slot a runner already
    recorded as missed while no runner ran (``misfire_skipped`` events' ``detail.last``),
    whichever is later: the scheduler's memory of which slots were queued or reported, so the
    next runner never reports the same missed slots again. Two queries for all jobs (indexes
    ``runs_job`` and ``events_kind``), not one per job."""
    rows = conn.execute(
        f"SELECT job, MAX(not_before) FROM runs WHERE trigger IN {sql_set({Trigger.SCHEDULE, Trigger.MISFIRE})}"
        " AND attempt = 1"
        " AND task = '' GROUP BY job").fetchall()
    out = {r[0]: float(r[1]) for r in rows if r[1] is not None}
    # Slot keys are ISO-8601 UTC with milliseconds, so the text order is the time order.
    for job, key in conn.execute(
            "SELECT job, MAX(json_extract(detail, '$.last')) FROM events WHERE kind = ? AND job IS NOT NULL"
            " GROUP BY job", (AuditEvent.MISFIRE_SKIPPED.value,)).fetchall():
        at = schedule.slot_time(key) if key else None
        if at is not None and at > out.get(job, float("-inf")):
            out[job] = at
    return out


def queue_slot(conn: Conn, spec: JobSpec, slot: str, not_before: float, trigger: str, *,
               actor: str, now: float | None = None) -> int | None:
    """Insert attempt 1 of ``spec``'s slot ``slot`` (a ``queued`` run due at ``not_before``)
    with its ``run_queued`` event; call inside a write transaction.

    Returns the new run id, or None when nothing was queued: another runner queued the slot
    first (UNIQUE (job, slot, task, attempt)); a newer slot is already due (``skipped_late``
    event); an operator paused the job (``slot_skipped_paused`` event; a one-shot is held
    instead, without an event); the breaker is open (``skipped_breaker_open``); or the job's previous run is still
    queued at its concurrency limit (``skipped_overlap``). ``trigger`` is ``schedule``,
    ``misfire`` or ``once``'s ``schedule``.
    """
    now = time.time() if now is None else now
    if conn.execute("SELECT 1 FROM runs WHERE job = ? AND slot = ? AND task = ''", (spec.name, slot)).fetchone():
        return None
    if trigger == "schedule" and not spec.once:
        newer = schedule.next_fire(spec, not_before)
        if newer is not None and newer <= time.time():
            # This write waited for the ledger lock so long that a newer slot is due
            # already: that one runs (next tick), this one is recorded, not replayed.
            add_event(conn, actor=actor, kind=AuditEvent.SKIPPED_LATE, job=spec.name,
                      reason="a newer slot fell due while this one waited for the ledger",
                      detail={"slots": [slot], "kept": schedule.slot_key(newer)})
            return None
    if trigger in ("schedule", "misfire"):
        if spec.once and jobs.pause_of(conn, spec.name) is not None:
            return None  # a one-shot is held while paused (the scheduler asks again), never skipped
        if not jobs.admit_slot(conn, spec.name, slot, actor=actor, now=now):
            return None  # paused: the slot is skipped, recorded as slot_skipped_paused
        if not breaker.admit(conn, spec, slot, actor=actor, now=now):
            return None
    if trigger != "misfire" and not spec.once:
        waiting = conn.execute("SELECT COUNT(*) FROM runs WHERE job = ? AND state = 'queued' AND task = ''",
                               (spec.name,)).fetchone()[0]
        if waiting and live_runs_of_job(conn, spec.name) >= spec.concurrency:
            add_event(conn, actor=actor, kind=AuditEvent.SKIPPED_OVERLAP, job=spec.name,
                      reason="previous run still queued at concurrency limit", detail={"slot": slot})
            return None
    return runs.create(conn, job=spec.name, slot=slot, trigger=trigger, actor=actor, not_before=not_before,
                       spec_hash=spec.spec_hash(), now=now, detail={"slot": slot}, if_absent=True)


def due_queued(conn: Conn, now: float, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` queued runs with ``not_before <= now`` (oldest first), each a dict of
    ``runs`` columns plus ``parent_state`` and ``parent_started_at`` (the fan-out parent's
    state and start, Unix seconds; None without one)."""
    # The parent's columns as scalar subqueries, not a self-join: with the join PostgreSQL's
    # planner scanned the whole table (35 ms a tick on 200,000 runs) where the state index
    # answers in 0.4 ms; it reads the parent only for the rows kept.
    rows = conn.execute(
        "SELECT r.*, (SELECT p.state FROM runs p WHERE p.id = r.parent_run_id) AS parent_state,"
        " (SELECT p.started_at FROM runs p WHERE p.id = r.parent_run_id) AS parent_started_at FROM runs r"
        " WHERE r.state = 'queued' AND r.not_before <= ? ORDER BY r.not_before, r.id LIMIT ?",
        (now, int(limit))).fetchall()
    return [dict(r) for r in rows]


def next_queued_at(conn: Conn) -> float | None:
    """The earliest ``not_before`` of any queued run (Unix seconds), None when none is queued:
    how long the dispatcher may sleep."""
    row = conn.execute("SELECT MIN(not_before) FROM runs WHERE state = 'queued'").fetchone()
    return None if row is None or row[0] is None else float(row[0])


def live_runs_of_job(conn: Conn, job: str) -> int:
    """How many of ``job``'s own runs (not sub-tasks) are spawned, running or verifying."""
    return int(conn.execute(f"SELECT COUNT(*) FROM runs WHERE job = ? AND task = '' AND state IN {_LIVE_SQL}",
                            (job,)).fetchone()[0])


def live_runs_of_parent(conn: Conn, parent_run_id: int) -> int:
    """How many sub-tasks of fan-out parent ``parent_run_id`` are spawned, running or verifying."""
    return int(conn.execute(f"SELECT COUNT(*) FROM runs WHERE parent_run_id = ? AND state IN {_LIVE_SQL}",
                            (parent_run_id,)).fetchone()[0])


def finished_row(conn: Conn, run_id: int) -> dict[str, Any] | None:
    """What the runner reports of a finished run: every ``runs`` column and
    ``job_outcomes.duration_s`` (seconds; None without an outcome)."""
    row = conn.execute(
        "SELECT r.*, o.duration_s FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id WHERE r.id = ?",
        (run_id,)).fetchone()
    return None if row is None else dict(row)


#: ``job_outcomes`` columns a late result may fill in: the output its capture counted, never
#: the state, status, reason or verdict the settling side recorded.
LATE_EVIDENCE = ("stdout_bytes", "stderr_bytes", "stdout_head", "stdout_tail", "stderr_head", "stderr_tail",
                 "output_truncated")


def record_late_result(conn: Conn, run: Run, *, actor: str, exit_code: int | None,
                       signal: int | None, expected: str, evidence: dict[str, Any] | None = None) -> str:
    """A run's process ended after someone else settled it: append a ``late_result`` event
    (never a state change). Returns the run's state now ("missing" when the row is gone).

    ``evidence``: the capture's ``job_outcomes`` columns; the ``LATE_EVIDENCE`` ones are
    written to the run's outcome, so a run abandoned or orphaned while it still wrote output
    shows the bytes and lines it really produced (the settling side could not count them).
    """
    state = runs.state_of(conn, run.id) or "missing"
    kept = {k: v for k, v in (evidence or {}).items() if k in LATE_EVIDENCE}
    if kept and state != "missing":
        outcomes.record(conn, run.id, **kept)
    add_event(conn, actor=actor, kind=AuditEvent.LATE_RESULT, run_id=run.id, job=run.job, attempt=run.attempt,
              from_state=state, reason=f"exit after run was {state}",
              detail={"exit_code": exit_code, "signal": signal, "expected_state": expected})
    return state


def lock_queued(conn: Conn, run_ids: Iterable[int]) -> set[int]:
    """PostgreSQL only, inside a ``READ COMMITTED`` transaction (``Ledger.write_alone``): lock
    those of ``run_ids`` (``runs.id``) still ``queued`` that no other transaction holds
    (``FOR UPDATE SKIP LOCKED``, in id order) and return their ids. A run another runner is
    claiming right now is skipped instead of waited for, so two runners reading the same due
    runs split them between them. Raises what the connection raises."""
    rows = conn.execute("SELECT id FROM runs WHERE state = 'queued' AND id IN (SELECT value FROM json_each(?))"
                        " ORDER BY id FOR UPDATE SKIP LOCKED", (json.dumps(sorted(run_ids)),)).fetchall()
    return {int(r[0]) for r in rows}
