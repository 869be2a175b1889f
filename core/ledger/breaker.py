"""Circuit breakers: stop hammering a job that keeps failing.

Per job (``jobs.breaker_state``: closed | open | half_open, ``breaker_until``,
``breaker_opened_at``). ``failures`` final failures within ``window`` seconds open it for
``cooldown`` seconds: scheduled slots during the cooldown are skipped with a recorded
``skipped_breaker_open`` event (never silently) and one ``circuit_open`` escalation opens.
After the cooldown one half-open trial run decides: success closes the breaker (and
resolves the escalation), failure starts another cooldown.

A fallback worker has its own breaker, derived from the ledger: when its runs
(``runs.worker = 'fallback'``) failed ``failures`` times within ``window``, the retry policy
stops routing to it (``retries.follow_up`` records the rule ``fallback_breaker_open``).

Every change is a conditional update of ``jobs`` with its audit event in the same
transaction; all times are Unix seconds (UTC).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from core.ledger.connection import add_event
from core.ledger.lifecycle import FAILED_STATES
from core.spec.model import JobSpec
from core.vocabulary import BreakerState, sql_set

CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN
#: Terminal states that count against the breaker (``lifecycle.FAILED_STATES``).
FAILED_FINAL = FAILED_STATES


def _escalations():
    # Imported lazily: escalations imports notify, which the breaker does not otherwise need.
    from core.ledger import escalations
    return escalations


def recent_failures(conn: sqlite3.Connection, job: str, window: float, now: float, *,
                    worker: str | None = None) -> int:
    """Final failures of ``job`` (ordinary runs, not fan-out sub-tasks, and not attempts
    that were retried: a transient failure that a retry absorbs is not the job failing)
    that ended within the last ``window`` seconds; only ``worker``'s runs when given. From
    the ``runs`` table."""
    sql = (f"SELECT COUNT(*) FROM runs r WHERE job = ? AND task = '' AND state IN {sql_set(FAILED_FINAL)}"
           " AND ended_at >= ? AND NOT EXISTS (SELECT 1 FROM runs n WHERE n.lineage = r.lineage"
           " AND n.attempt = r.attempt + 1)")
    params: list[Any] = [job, now - window]
    if worker is not None:
        sql += " AND r.worker = ?"
        params.append(worker)
    return int(conn.execute(sql, params).fetchone()[0])


def state_of(conn: sqlite3.Connection, job: str) -> tuple[str, float | None]:
    """(breaker_state, breaker_until) of ``job`` from the ``jobs`` table; closed if unknown."""
    row = conn.execute("SELECT breaker_state, breaker_until FROM jobs WHERE name = ?", (job,)).fetchone()
    if row is None:
        return CLOSED, None
    return row[0] or CLOSED, row[1]


def _set(conn: sqlite3.Connection, job: str, expect: str, new: str, *, until: float | None,
         opened_at: float | None, actor: str, reason: str, run_id: int | None, now: float) -> bool:
    cur = conn.execute(
        "UPDATE jobs SET breaker_state = ?, breaker_until = ?, breaker_opened_at = COALESCE(?, breaker_opened_at)"
        " WHERE name = ? AND breaker_state = ?", (new, until, opened_at, job, expect))
    if cur.rowcount != 1:
        return False
    add_event(conn, actor=actor, kind=f"breaker_{new}", job=job, run_id=run_id, from_state=expect, to_state=new,
              reason=reason, detail={"until": until}, at=now)
    return True


def admit(conn: sqlite3.Connection, spec: JobSpec, slot: str, *, actor: str, now: float | None = None) -> bool:
    """Inside the transaction that would queue a scheduled slot: may it run?

    Open and cooling down → False, with a ``skipped_breaker_open`` event. Open and cooled
    down → moves to half_open and admits this one slot as the trial. Half-open with its
    trial still pending → False (skipped, recorded). Closed → True.
    """
    ts = now if now is not None else time.time()
    state, until = state_of(conn, spec.name)
    if state == CLOSED:
        return True
    if state == OPEN and until is not None and ts >= until:
        return _set(conn, spec.name, OPEN, HALF_OPEN, until=None, opened_at=None, actor=actor,
                    reason="cooldown over: one trial run", run_id=None, now=ts)
    add_event(conn, actor=actor, kind="skipped_breaker_open", job=spec.name, reason=f"breaker {state}",
              detail={"slot": slot, "until": until}, at=ts)
    return False


def record(conn: sqlite3.Connection, spec: JobSpec, run_id: int, state: str, *, actor: str,
           owner: str | None = None, sinks: Sequence[Any] = (), now: float | None = None) -> str | None:
    """After a run of ``spec`` reached terminal ``state`` (and no retry is queued for it):
    update the breaker. Call inside a write transaction. Returns the new breaker state when
    it changed, else None."""
    ts = now if now is not None else time.time()
    cur_state, _ = state_of(conn, spec.name)
    failed = state in FAILED_FINAL
    if failed and conn.execute("SELECT 1 FROM runs n JOIN runs r ON n.lineage = r.lineage AND n.attempt = r.attempt + 1"
                               " WHERE r.id = ?", (run_id,)).fetchone():
        return None  # a retry is queued: only the lineage's final outcome moves the breaker
    b = spec.breaker
    if cur_state == HALF_OPEN:
        if failed:
            _set(conn, spec.name, HALF_OPEN, OPEN, until=ts + b.cooldown, opened_at=ts, actor=actor,
                 reason="half-open trial failed: another cooldown", run_id=run_id, now=ts)
            _escalations().raise_escalation(
                conn, job=spec.name, kind="circuit_open", severity="warning", run_id=run_id, owner=owner,
                sinks=sinks, now=ts, reason=f"trial run {run_id} failed; breaker open for another {b.cooldown:g}s")
            return OPEN
        if state == "succeeded":
            _set(conn, spec.name, HALF_OPEN, CLOSED, until=None, opened_at=None, actor=actor,
                 reason="half-open trial succeeded", run_id=run_id, now=ts)
            _escalations().auto_resolve(conn, spec.name, ["circuit_open"], run_id=run_id,
                                        reason=f"trial run {run_id} succeeded; breaker closed", sinks=sinks,
                                        now=ts)
            return CLOSED
        return None
    if cur_state == CLOSED and failed:
        n = recent_failures(conn, spec.name, b.window, ts)
        if n >= b.failures:
            _set(conn, spec.name, CLOSED, OPEN, until=ts + b.cooldown, opened_at=ts, actor=actor,
                 reason=f"{n} failures within {b.window:g}s", run_id=run_id, now=ts)
            _escalations().raise_escalation(
                conn, job=spec.name, kind="circuit_open", severity="warning", run_id=run_id, owner=owner,
                sinks=sinks, now=ts,
                reason=f"{n} failures within {b.window:g}s; scheduled runs skipped for {b.cooldown:g}s")
            return OPEN
    return None
