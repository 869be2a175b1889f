"""The terminal recipe: what every move into a terminal state commits with it.

A run ends in one transaction that holds, in this order:

1. the compare-and-set move itself (``core.ledger.lifecycle.apply``, with its ``transition``
   event);
2. the run's ``job_outcomes`` record (``core.ledger.outcomes.record``: state, status, reason
   and whatever evidence the caller has);
3. for a fan-out parent, the abandonment of its still-queued sub-tasks
   (``core.ledger.fanout.settle_children``, reason ``parent_ended``);
4. for a failed attempt (``FAILED_STATES``), the retry decision
   (``core.ledger.retries.follow_up``: a ``retry_decision`` event and maybe the next
   attempt). A retry policy that raises (a stored spec that no longer loads) is rolled back
   to a savepoint and recorded as a ``retry_decision`` event with reason ``error``: it never
   blocks the terminal move.

The runner (exit, timeout, spawn failure), the sweep (orphaned), the supervisor (verifying →
succeeded | failed | blocked, job removed) and operator actions (abandon) all call ``finish``
(inside their own transaction) or ``finish_run`` (its own transaction), so the recipe is
written once. Judging the run (``core.supervisor.supervisor.judge_run``) happens after the
commit and is the caller's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from core.ledger import fanout, lifecycle, outcomes, retries
from core.ledger.connection import Conn, Ledger, add_event
from core.ledger.lifecycle import FAILED_STATES, TERMINAL
from core.ledger.store import RetryRule
from core.spec.model import JobSpec
from core.vocabulary import AuditEvent, EndReason, OutcomeStatus, RunState

log = logging.getLogger(__name__)


def default_status(state: RunState | str) -> OutcomeStatus:
    """``job_outcomes.status`` for a run that ends in ``state`` without a handoff saying
    otherwise: ``success`` for succeeded, else the state's own word (failed, timed_out, ...).

    Raises:
        ValueError: ``state`` is not a terminal state.
    """
    return OutcomeStatus.SUCCESS if state == RunState.SUCCEEDED else OutcomeStatus(str(RunState(state).value))


def finish(conn: Conn, run_id: int, attempt: int, from_state: RunState | str,
           to_state: RunState | str, *, actor: str, reason_code: EndReason, reason: str | None = None,
           fields: Mapping[str, Any] | None = None, detail: dict[str, Any] | None = None,
           outcome: Mapping[str, Any] | None = None, spec: JobSpec | None = None,
           handoff_error: str | None = None, at: float | None = None, retry: RetryRule | None = None) -> bool:
    """End run ``run_id`` inside the caller's open write transaction (see the module docstring).

    Args:
        from_state, to_state: the move; ``to_state`` must be terminal.
        reason_code: why the run ended, the closed code (``runs.reason_code``).
        reason: the sentence for people (``runs.reason`` and the event), never read back by
            code; also the outcome's reason unless ``outcome`` names its own.
        fields: ``runs`` columns set with the move (``lifecycle.SETTABLE``).
        detail: JSON detail of the ``transition`` event.
        outcome: ``job_outcomes`` columns (``outcomes.COLUMNS``); ``state`` is always
            ``to_state``, ``status`` defaults to ``default_status(to_state)``.
        spec: the job's spec for the retry policy (read from ``jobs`` when None).
        handoff_error: the handoff's ``error`` (``rate_limit``/``timeout`` are transient).
        at: Unix seconds (UTC) of the move; default now.
        retry: the retry policy (``core.supervisor.policy.retry.RETRY``); required for a
            move into a failed state (``FAILED_STATES``).

    Returns:
        True when the move won; False when the run was not in ``from_state`` at ``attempt``
        (nothing written).

    Raises:
        ValueError: ``to_state`` is not terminal, ``outcome`` names an unknown column, or a
            failed state is asked for without ``retry``.
        lifecycle.IllegalTransition: the move is not in the transition table.
    """
    to = RunState(to_state)
    if to not in TERMINAL:
        raise ValueError(f"finish moves into a terminal state, not {to}")
    if to in FAILED_STATES and retry is None:
        raise ValueError(f"a move into {to} needs the retry policy (core.supervisor.policy.retry.RETRY)")
    if not lifecycle.apply(conn, run_id, attempt, from_state, to, actor=actor, reason=reason,
                           reason_code=reason_code, fields=fields, detail=detail, at=at):
        return False
    rec = dict(outcome or {})
    rec["state"] = to.value
    rec.setdefault("status", default_status(to).value)
    rec.setdefault("reason", reason)
    outcomes.record(conn, run_id, **rec)
    fanout.settle_children(conn, run_id, actor=actor, now=at)
    if to in FAILED_STATES:
        conn.execute("SAVEPOINT retry_decision")
        try:
            assert retry is not None  # checked before the move
            retries.follow_up(conn, run_id, to.value, actor=actor, policy=retry, spec=spec,
                              handoff_error=handoff_error, now=at)
        except Exception as exc:
            if not conn.in_transaction:
                raise  # SQLite rolled the whole transaction back (disk full, I/O error): no savepoint left
            # A stored spec that no longer loads must not block the terminal move forever:
            # undo only the retry, and say so in the audit trail and the log.
            conn.execute("ROLLBACK TO retry_decision")
            log.warning("run %s: retry decision failed, no retry queued: %s", run_id, exc)
            job = conn.execute("SELECT job FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
            add_event(conn, actor=actor, kind=AuditEvent.RETRY_DECISION, run_id=run_id, job=job, attempt=attempt,
                      reason="error", detail={"retry": False, "error": str(exc)}, at=at)
        conn.execute("RELEASE retry_decision")
    return True


def finish_run(ledger: Ledger, run_id: int, attempt: int, from_state: RunState | str,
               to_state: RunState | str, *, max_wait_s: float | None = None, **kwargs: Any) -> bool:
    """``finish`` in its own ``BEGIN IMMEDIATE`` transaction (``Ledger.write``: 'locked' is
    retried, never dropped; with ``max_wait_s`` seconds ``StorageError`` is raised
    after that long). Keyword arguments as for ``finish``. Returns whether the move won."""
    lifecycle.check(from_state, to_state)
    return ledger.write(lambda conn: finish(conn, run_id, attempt, from_state, to_state, **kwargs),
                        max_wait_s=max_wait_s)
