"""Circuit breakers: stop hammering a job that keeps failing.

Per job (``jobs.breaker_state``: closed | open | half_open, ``breaker_until``,
``breaker_opened_at``). ``failures`` final failures within ``window`` seconds open it for
``cooldown`` seconds: scheduled slots during the cooldown are skipped with a recorded
``skipped_breaker_open`` event (never silently) and one ``circuit_open`` escalation opens.
After the cooldown one half-open trial run decides: success closes the breaker (and
resolves the escalation), failure starts another cooldown. A run the breaker did not hold back
(a manual trigger) that succeeds closes it too, and so does an operator resolving its
``circuit_open`` escalation (``close``); a cooldown shortened in the spec counts from the
breaker's opening. A closed breaker counts only the failures since it last closed.

A fallback worker has its own breaker, derived from the ledger: when its runs
(``runs.worker = 'fallback'``) failed ``failures`` times within ``window``, the retry policy
stops routing to it (``retries.follow_up`` records the rule ``fallback_breaker_open``).

Thresholds come from the spec's ``breaker`` table, whose window and cooldown default to
values fitted to the job's period (``core.spec.model.Breaker``); ``breaker = false`` turns
it off. Every change is a conditional update of ``jobs`` with its audit event in the same
transaction; all times are Unix seconds (UTC).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from core.ledger.connection import Conn, add_event
from core.ledger.lifecycle import FAILED_STATES
from core.ledger.records import BreakerFailure
from core.ledger.store import BreakerWording
from core.spec.model import JobSpec
from core.vocabulary import AuditEvent, BreakerState, EscalationKind, RunState, sql_set

CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN
#: The audit event of a move into each breaker state.
BREAKER_EVENTS: dict[str, AuditEvent] = {OPEN: AuditEvent.BREAKER_OPEN, HALF_OPEN: AuditEvent.BREAKER_HALF_OPEN,
                                         CLOSED: AuditEvent.BREAKER_CLOSED}
#: Terminal states that count against the breaker (``lifecycle.FAILED_STATES``).
FAILED_FINAL = FAILED_STATES


def _escalations():
    # Imported lazily: escalations imports notify, which the breaker does not otherwise need.
    from core.ledger import escalations
    return escalations


def recent_failures(conn: Conn, job: str, window: float, now: float, *,
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


#: The columns a failure is described with (``runs`` r, ``job_outcomes`` o). A short stderr
#: is kept whole in stderr_head (stderr_tail stays empty): its last line is there.
_FAILURE_SELECT = ("SELECT r.id, r.ended_at, r.state, r.exit_code, r.signal, r.reason,"
                   " COALESCE(NULLIF(o.stderr_tail, ''), o.stderr_head) AS stderr_tail, o.verification,"
                   " o.verdict_kind FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id")


def failures_within(conn: Conn, job: str, window: float, now: float,
                    limit: int = 10) -> list[dict[str, Any]]:
    """The final failures ``recent_failures`` counts, newest first, at most ``limit``: each
    ``{"id", "ended_at" (Unix s), "state", "exit_code", "signal", "reason", "stderr_tail",
    "verification" (JSON text or None), "verdict_kind" (None until judged)}`` from ``runs``
    and ``job_outcomes``. The evidence a breaker opening is escalated with."""
    rows = conn.execute(
        f"{_FAILURE_SELECT} WHERE r.job = ? AND r.task = '' AND r.state IN {sql_set(FAILED_FINAL)} AND r.ended_at >= ?"
        " AND NOT EXISTS (SELECT 1 FROM runs n WHERE n.lineage = r.lineage AND n.attempt = r.attempt + 1)"
        " ORDER BY r.ended_at DESC, r.id DESC LIMIT ?", (job, now - window, int(limit))).fetchall()
    return [{k: row[k] for k in row.keys()} for row in rows]


def _failures_by_id(conn: Conn, ids: list[int]) -> list[dict[str, Any]]:
    """The runs ``ids`` described as ``failures_within`` does, newest first."""
    rows = conn.execute(f"{_FAILURE_SELECT} WHERE r.id IN (SELECT value FROM json_each(?))"
                        " ORDER BY r.ended_at DESC, r.id DESC", (json.dumps([int(i) for i in ids]),)).fetchall()
    return [{k: row[k] for k in row.keys()} for row in rows]


def _trigger(conn: Conn, run_id: int) -> str | None:
    row = conn.execute("SELECT trigger FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else str(row[0])


def _failure(conn: Conn, run_id: int) -> BreakerFailure | None:
    got = _failures_by_id(conn, [run_id])
    return BreakerFailure.from_row(got[0]) if got else None


def _first_opened_by(conn: Conn, job: str, run_id: int) -> list[BreakerFailure]:
    """The failures that first opened the breaker (their ids are in the latest
    ``breaker_open`` event from closed), without the trial ``run_id`` itself."""
    row = conn.execute("SELECT detail FROM events WHERE job = ? AND kind = ? AND from_state = ?"
                       " ORDER BY id DESC LIMIT 1", (job, AuditEvent.BREAKER_OPEN, CLOSED)).fetchone()
    try:
        ids = [int(i) for i in json.loads(row[0]).get("failures", [])] if row and row[0] else []
    except (ValueError, TypeError, AttributeError):
        ids = []
    return [BreakerFailure.from_row(f) for f in _failures_by_id(conn, [i for i in ids if i != run_id])]


def state_of(conn: Conn, job: str) -> tuple[str, float | None]:
    """(breaker_state, breaker_until) of ``job`` from the ``jobs`` table; closed if unknown."""
    row = conn.execute("SELECT breaker_state, breaker_until FROM jobs WHERE name = ?", (job,)).fetchone()
    if row is None:
        return CLOSED, None
    return row[0] or CLOSED, row[1]


def _set(conn: Conn, job: str, expect: str, new: str, *, until: float | None,
         opened_at: float | None, actor: str, reason: str, run_id: int | None, now: float,
         detail: dict[str, Any] | None = None) -> bool:
    cur = conn.execute(
        "UPDATE jobs SET breaker_state = ?, breaker_until = ?, breaker_opened_at = COALESCE(?, breaker_opened_at)"
        " WHERE name = ? AND breaker_state = ?", (new, until, opened_at, job, expect))
    if cur.rowcount != 1:
        return False
    add_event(conn, actor=actor, kind=BREAKER_EVENTS[new], job=job, run_id=run_id, from_state=expect, to_state=new,
              reason=reason, detail={"until": until, **(detail or {})}, at=now)
    return True


def _limits(spec: JobSpec) -> tuple[int, float, float]:
    """(failures, window s, cooldown s) of the spec's breaker. The spec fills window and
    cooldown from the job's period; 300/600 s only for a spec built without validation."""
    b = spec.breaker
    return b.failures, b.window if b.window is not None else 300.0, b.cooldown if b.cooldown is not None else 600.0


def _switched_off(conn: Conn, spec: JobSpec, state: str, *, actor: str, now: float) -> None:
    """The spec turned the breaker off (``breaker = false``) while it was open or half open:
    close it, and resolve its ``circuit_open`` escalation, so nothing stays stuck."""
    if state != CLOSED and _set(conn, spec.name, state, CLOSED, until=None, opened_at=None, actor=actor,
                                reason="breaker turned off in the spec", run_id=None, now=now):
        _escalations().auto_resolve(conn, spec.name, ["circuit_open"], run_id=None, now=now, actor=actor,
                                    reason="breaker turned off in the spec")


def admit(conn: Conn, spec: JobSpec, slot: str, *, actor: str, now: float | None = None) -> bool:
    """Inside the transaction that would queue a scheduled slot: may it run?

    Open and cooling down → False, with a ``skipped_breaker_open`` event. Open and cooled
    down → moves to half_open and admits this one slot as the trial. Half-open with its
    trial still pending → False (skipped, recorded). Closed, or turned off in the spec
    (``breaker.enabled = false``; an open breaker is closed then) → True.
    """
    ts = now if now is not None else time.time()
    state, until = state_of(conn, spec.name)
    if not spec.breaker.enabled:
        _switched_off(conn, spec, state, actor=actor, now=ts)
        return True
    if state == CLOSED:
        return True
    if state == OPEN:
        # A cooldown shortened in the spec since the breaker opened counts from its opening.
        opened = conn.execute("SELECT breaker_opened_at FROM jobs WHERE name = ?", (spec.name,)).fetchone()
        if opened is not None and opened[0] is not None:
            shorter = opened[0] + _limits(spec)[2]
            until = shorter if until is None else min(until, shorter)
    if state == OPEN and until is not None and ts >= until:
        return _set(conn, spec.name, OPEN, HALF_OPEN, until=None, opened_at=None, actor=actor,
                    reason="cooldown over: one trial run", run_id=None, now=ts)
    add_event(conn, actor=actor, kind=AuditEvent.SKIPPED_BREAKER_OPEN, job=spec.name, reason=f"breaker {state}",
              detail={"slot": slot, "until": until}, at=ts)
    return False


def record(conn: Conn, spec: JobSpec, run_id: int, state: str, *, actor: str, words: BreakerWording,
           owner: str | None = None, sinks: Sequence[Any] = (), now: float | None = None) -> str | None:
    """After a run of ``spec`` reached terminal ``state`` (and no retry is queued for it):
    update the breaker, its ``circuit_open`` escalation worded by ``words``
    (``core.supervisor.policy.breaker.BREAKER``). Call inside a write transaction. Returns the
    new breaker state when it changed, else None (always None when the spec turned the
    breaker off)."""
    if not spec.breaker.enabled:
        return None
    ts = now if now is not None else time.time()
    cur_state, _ = state_of(conn, spec.name)
    failed = state in FAILED_FINAL
    if failed and conn.execute("SELECT 1 FROM runs n JOIN runs r ON n.lineage = r.lineage AND n.attempt = r.attempt + 1"
                               " WHERE r.id = ?", (run_id,)).fetchone():
        return None  # a retry is queued: only the lineage's final outcome moves the breaker
    failures_needed, window, cooldown = _limits(spec)
    if cur_state == HALF_OPEN:
        if failed:
            _set(conn, spec.name, HALF_OPEN, OPEN, until=ts + cooldown, opened_at=ts, actor=actor,
                 reason="half-open trial failed: another cooldown", run_id=run_id, now=ts)
            _escalations().raise_escalation(
                conn, job=spec.name, kind=EscalationKind.CIRCUIT_OPEN, severity="warning", run_id=run_id, owner=owner,
                sinks=sinks, now=ts, reason=words.trial_failed(
                    _failure(conn, run_id), run_id, _first_opened_by(conn, spec.name, run_id),
                    words.held_back(spec, _trigger(conn, run_id), cooldown, another=True)))
            return OPEN
        if state == RunState.SUCCEEDED:
            _set(conn, spec.name, HALF_OPEN, CLOSED, until=None, opened_at=None, actor=actor,
                 reason="half-open trial succeeded", run_id=run_id, now=ts)
            _escalations().auto_resolve(conn, spec.name, ["circuit_open"], run_id=run_id,
                                        reason=f"trial run {run_id} succeeded; breaker closed", sinks=sinks,
                                        now=ts)
            return CLOSED
        return None
    if cur_state == OPEN and state == RunState.SUCCEEDED:
        # A run the breaker did not hold back (a manual trigger, a retry) succeeded: the job
        # works again, so its slots must not stay skipped for the rest of the cooldown.
        _set(conn, spec.name, OPEN, CLOSED, until=None, opened_at=None, actor=actor,
             reason=f"run {run_id} succeeded while the breaker was open", run_id=run_id, now=ts)
        _escalations().auto_resolve(conn, spec.name, ["circuit_open"], run_id=run_id,
                                    reason=f"run {run_id} succeeded; breaker closed", sinks=sinks, now=ts)
        return CLOSED
    if cur_state == CLOSED and failed:
        # Failures before the breaker last closed (a trial's success, a run that succeeded
        # while it was open, an operator's resolve) were dealt with: they count no more, or
        # one new failure would reopen it at once.
        closed = conn.execute("SELECT MAX(at) FROM events WHERE job = ? AND kind = ?",
                              (spec.name, AuditEvent.BREAKER_CLOSED)).fetchone()
        counted = window if closed is None or closed[0] is None else min(window, ts - float(closed[0]))
        n = recent_failures(conn, spec.name, counted, ts)
        if n >= failures_needed:
            # Escalated with the failures that opened it: which runs, how each ended, and
            # each one's own last stderr line — the operator sees why without digging.
            failures = failures_within(conn, spec.name, counted, ts)
            _set(conn, spec.name, CLOSED, OPEN, until=ts + cooldown, opened_at=ts, actor=actor,
                 reason=f"{n} failures within {window:g}s", run_id=run_id, now=ts,
                 detail={"failures": [f["id"] for f in failures], "window": window, "cooldown": cooldown})
            _escalations().raise_escalation(
                conn, job=spec.name, kind=EscalationKind.CIRCUIT_OPEN, severity="warning", run_id=run_id, owner=owner,
                sinks=sinks, now=ts, reason=words.opened([BreakerFailure.from_row(f) for f in failures], n, window,
                                                         words.held_back(spec, _trigger(conn, run_id), cooldown)))
            return OPEN
    return None


def close(conn: Conn, job: str, *, actor: str, reason: str, now: float | None = None) -> bool:
    """Close ``job``'s breaker by hand (open or half open → closed: an operator resolved its
    ``circuit_open`` escalation), with its ``breaker_closed`` event. Call inside a write
    transaction. Returns True when it was open or half open."""
    ts = now if now is not None else time.time()
    state, _ = state_of(conn, job)
    if state == CLOSED:
        return False
    return _set(conn, job, state, CLOSED, until=None, opened_at=None, actor=actor, reason=reason, run_id=None, now=ts)
