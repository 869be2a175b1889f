"""Retry policy: after a failed attempt, queue the next attempt of the lineage (or don't).

The next attempt is a new ``runs`` row (``attempt + 1``, same ``lineage`` and slot,
``queued``, ``not_before`` from the job's backoff), inserted in the same transaction as the
terminal move of the failed attempt, so a retry schedule survives any restart.

Fan-out: a sub-task is never retried once its parent run is terminal (rule
``parent_ended``: the parent's own retry queues fresh sub-tasks), and a parent's terminal
move settles its still-queued sub-tasks (``fanout.settle_children``) in the same
transaction.
"""

from __future__ import annotations

import random
import time
from typing import Any

from core.ledger import fanout, runs
from core.ledger.connection import Conn, add_event
from core.ledger.lifecycle import FAILED_STATES, TERMINAL, State
from core.spec.model import Backoff, JobSpec, spec_from_json
from core.vocabulary import RunCommand, Trigger

#: Handoff ``error`` values that mark a failure as transient.
TRANSIENT_ERRORS = frozenset({"rate_limit", "timeout"})


def backoff_delay(policy: Backoff, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before attempt ``attempt + 1`` after attempt ``attempt`` failed.

    ``min(max, initial * factor**(attempt-1))``; with ``jitter`` a uniformly random share of
    that ("full jitter"), so many failing jobs do not retry in lockstep.
    """
    cap = min(policy.max, policy.initial * policy.factor ** max(0, attempt - 1))
    if policy.jitter:
        return (rng or random).uniform(0, cap)
    return cap


def is_transient(spec: JobSpec, state: str, exit_code: int | None, handoff_error: str | None) -> bool:
    """A failure the same worker may simply retry: a timeout, an orphaned attempt, an exit
    code in ``retry_on``, or a handoff error of rate_limit/timeout. Without ``retry_on``
    every non-zero exit not in ``no_retry_on`` counts as retryable."""
    if state in (State.TIMED_OUT, State.ORPHANED):
        return True
    if handoff_error in TRANSIENT_ERRORS:
        return True
    if exit_code is None:
        return spec.retry_on is None
    if exit_code in spec.no_retry_on:
        return False
    return spec.retry_on is None or exit_code in spec.retry_on


def decide(spec: JobSpec, run: dict[str, Any], state: str, handoff_error: str | None = None) -> tuple[bool, str, str]:
    """Whether attempt ``run['attempt']`` ending in ``state`` gets another attempt.

    Returns ``(retry, worker, rule)``: worker is ``primary`` or ``fallback``; rule names the
    policy rule that decided (recorded in the audit trail).
    """
    if state not in FAILED_STATES:
        return False, RunCommand.PRIMARY, "not_a_failure"
    attempt = int(run["attempt"])
    if run.get("task"):
        task = next((t for t in spec.tasks if t.name == run["task"]), None)
        limit = task.max_attempts if task else 1
    else:
        limit = spec.max_attempts
    if attempt >= limit:
        return False, RunCommand.PRIMARY, "max_attempts_reached"
    exit_code = run.get("exit_code")
    if exit_code is not None and exit_code in spec.no_retry_on and state == State.FAILED:
        if spec.fallback is not None and run.get("worker") != RunCommand.FALLBACK:
            return True, RunCommand.FALLBACK, "no_retry_on→fallback"
        return False, RunCommand.PRIMARY, "no_retry_on"
    if is_transient(spec, state, exit_code, handoff_error):
        return True, run.get("worker") or RunCommand.PRIMARY, "transient→retry"
    if spec.fallback is not None and not run.get("task"):
        return True, RunCommand.FALLBACK, "non_transient→fallback"
    return False, RunCommand.PRIMARY, "non_transient"


def follow_up(conn: Conn, run_id: int, state: str, *, actor: str,
              spec: JobSpec | None = None, handoff_error: str | None = None,
              rng: random.Random | None = None, now: float | None = None) -> int | None:
    """Inside the transaction that moved run ``run_id`` into ``state``: queue the next
    attempt when the policy allows. Loads the spec from the ``jobs`` table unless given.

    A fan-out parent's still-queued sub-tasks are abandoned first (``fanout.settle_children``);
    a sub-task whose parent run is terminal is not retried (rule ``parent_ended``).

    Returns the new run id, or None (no retry). Always records a ``retry_decision`` event.
    """
    row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    run = {k: row[k] for k in row.keys()}
    if not run["task"] and run["state"] in TERMINAL:
        fanout.settle_children(conn, run_id, actor=actor, now=now)
    if run["task"] and run["parent_run_id"] is not None and state in FAILED_STATES:
        parent = conn.execute("SELECT state FROM runs WHERE id = ?", (run["parent_run_id"],)).fetchone()
        if parent is not None and parent[0] in TERMINAL:
            add_event(conn, actor=actor, kind="retry_decision", run_id=run_id, job=run["job"],
                      attempt=run["attempt"], reason=fanout.PARENT_ENDED,
                      detail={"retry": False, "rule": fanout.PARENT_ENDED, "parent_run_id": run["parent_run_id"],
                              "parent_state": parent[0]})
            return None
    if spec is None:
        jrow = conn.execute("SELECT spec FROM jobs WHERE name = ?", (run["job"],)).fetchone()
        if jrow is None:
            add_event(conn, actor=actor, kind="retry_decision", run_id=run_id, job=run["job"],
                      attempt=run["attempt"], reason="job_unknown", detail={"retry": False})
            return None
        spec = spec_from_json(jrow[0])
    ts = now if now is not None else time.time()
    retry, worker, rule = decide(spec, run, state, handoff_error)
    if retry and worker == RunCommand.FALLBACK:
        from core.ledger.breaker import recent_failures
        if spec.breaker.enabled and recent_failures(conn, run["job"], spec.breaker.window or 0.0, ts,
                                                    worker=RunCommand.FALLBACK) >= spec.breaker.failures:
            retry, rule = False, "fallback_breaker_open"
    if not retry:
        add_event(conn, actor=actor, kind="retry_decision", run_id=run_id, job=run["job"],
                  attempt=run["attempt"], reason=rule, detail={"retry": False, "rule": rule})
        return None
    delay = backoff_delay(spec.backoff, int(run["attempt"]), rng)
    new_id = runs.create(conn, job=run["job"], lineage=run["lineage"], attempt=run["attempt"] + 1,
                         slot=run["slot"], task=run["task"], trigger=Trigger.RETRY, worker=worker,
                         parent_run_id=run["parent_run_id"], spec_hash=spec.spec_hash(), not_before=ts + delay,
                         now=ts, actor=actor, event="retry_scheduled", reason=rule,
                         detail={"after_run": run_id, "delay_s": round(delay, 3), "not_before": ts + delay,
                                 "worker": worker, "rule": rule}, if_absent=True)
    if new_id is None:  # already queued by someone else: fencing keeps one row per attempt
        return None
    add_event(conn, actor=actor, kind="retry_decision", run_id=run_id, job=run["job"],
              attempt=run["attempt"], reason=rule,
              detail={"retry": True, "rule": rule, "next_run": new_id, "worker": worker})
    return new_id
