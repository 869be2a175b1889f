"""Applying the retry policy: after a failed attempt, queue the next attempt of the lineage when
the policy (``core.supervisor.policy.retry``, decided above the store) asks for one.

The next attempt is a new ``runs`` row (``attempt + 1``, same ``lineage`` and slot,
``queued``, ``not_before`` from the job's backoff), inserted in the same transaction as the
terminal move of the failed attempt, so a retry schedule survives any restart.

Fan-out: a sub-task is never retried once its parent run is terminal (rule
``parent_ended``: the parent's own retry queues fresh sub-tasks), and a parent's terminal
move settles its still-queued sub-tasks (``fanout.settle_children``) in the same
transaction.
"""

from __future__ import annotations

import time

from core.ledger import fanout, runs
from core.ledger.connection import Conn, add_event
from core.ledger.lifecycle import FAILED_STATES, TERMINAL
from core.ledger.records import Run
from core.ledger.store import RetryRule
from core.spec.model import JobSpec, spec_from_json
from core.vocabulary import AuditEvent, EndReason, RunCommand, Trigger


def follow_up(conn: Conn, run_id: int, state: str, *, actor: str, policy: RetryRule,
              spec: JobSpec | None = None, handoff_error: str | None = None,
              now: float | None = None) -> int | None:
    """Inside the transaction that moved run ``run_id`` into ``state``: queue the next
    attempt when the retry ``policy`` (decided above the store:
    ``core.supervisor.policy.retry``) asks for one, ``delay_s`` from now. Loads the spec from
    the ``jobs`` table unless given.

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
            add_event(conn, actor=actor, kind=AuditEvent.RETRY_DECISION, run_id=run_id, job=run["job"],
                      attempt=run["attempt"], reason=EndReason.PARENT_ENDED,
                      detail={"retry": False, "rule": EndReason.PARENT_ENDED, "parent_run_id": run["parent_run_id"],
                              "parent_state": parent[0]})
            return None
    if spec is None:
        jrow = conn.execute("SELECT spec FROM jobs WHERE name = ?", (run["job"],)).fetchone()
        if jrow is None:
            add_event(conn, actor=actor, kind=AuditEvent.RETRY_DECISION, run_id=run_id, job=run["job"],
                      attempt=run["attempt"], reason="job_unknown", detail={"retry": False})
            return None
        spec = spec_from_json(jrow[0])
    ts = now if now is not None else time.time()
    from core.ledger.breaker import recent_failures
    fallback_failures = (recent_failures(conn, run["job"], spec.breaker.window or 0.0, ts, worker=RunCommand.FALLBACK)
                         if spec.fallback is not None and spec.breaker.enabled else 0)
    decision = policy.decide(spec, Run.from_row(run), state, handoff_error, fallback_failures)
    retry, worker, rule, delay = decision.retry, decision.worker, decision.rule, decision.delay_s
    if not retry:
        add_event(conn, actor=actor, kind=AuditEvent.RETRY_DECISION, run_id=run_id, job=run["job"],
                  attempt=run["attempt"], reason=rule, detail={"retry": False, "rule": rule})
        return None
    new_id = runs.create(conn, job=run["job"], lineage=run["lineage"], attempt=run["attempt"] + 1,
                         slot=run["slot"], task=run["task"], trigger=Trigger.RETRY, worker=worker,
                         parent_run_id=run["parent_run_id"], spec_hash=spec.spec_hash(), not_before=ts + delay,
                         now=ts, actor=actor, event=AuditEvent.RETRY_SCHEDULED, reason=rule,
                         detail={"after_run": run_id, "delay_s": round(delay, 3), "not_before": ts + delay,
                                 "worker": worker, "rule": rule}, if_absent=True)
    if new_id is None:  # already queued by someone else: fencing keeps one row per attempt
        return None
    add_event(conn, actor=actor, kind=AuditEvent.RETRY_DECISION, run_id=run_id, job=run["job"],
              attempt=run["attempt"], reason=rule,
              detail={"retry": True, "rule": rule, "next_run": new_id, "worker": worker})
    return new_id
