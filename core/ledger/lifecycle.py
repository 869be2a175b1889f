"""The run lifecycle: the one transition table, and the only function that moves a run.

::

    queued ─▶ spawned ─▶ running ─▶ verifying ─▶ succeeded | failed | blocked
       │          │          ├─▶ timed_out   (killed at timeout, whole process group)
       │          │          └─▶ orphaned    (declared dead by the sweep / startup reconciliation)
       └──────────┴──────────────▶ abandoned (operator; kills live processes, keeps artifacts)

Every move is ``UPDATE runs … WHERE id=? AND state=? AND attempt=?`` inside
``BEGIN IMMEDIATE``, with its ``events`` row appended in the same transaction. The caller
learns whether it won (``True``) or lost a race (``False``); an illegal move raises
``IllegalTransition`` before the ledger is touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from core.ledger.connection import HAS_RETURNING, Conn, Ledger, add_event
from core.vocabulary import AuditEvent, EndReason, RunState

#: The run states live in ``core.vocabulary``; ``State`` stays importable from here.
State = RunState


Q, SP, RU, VE = State.QUEUED, State.SPAWNED, State.RUNNING, State.VERIFYING

#: The only allowed moves. spawned→failed covers a command that could not be started;
#: spawned→orphaned covers a missed start deadline or a dead runner; verifying→orphaned a
#: runner that died while verifying.
TRANSITIONS: dict[State, frozenset[State]] = {
    Q: frozenset({SP, State.ABANDONED}),
    SP: frozenset({RU, State.FAILED, State.ORPHANED, State.ABANDONED}),
    RU: frozenset({VE, State.TIMED_OUT, State.ORPHANED, State.ABANDONED}),
    VE: frozenset({State.SUCCEEDED, State.FAILED, State.BLOCKED, State.ORPHANED, State.ABANDONED}),
    State.SUCCEEDED: frozenset(),
    State.FAILED: frozenset(),
    State.BLOCKED: frozenset(),
    State.TIMED_OUT: frozenset(),
    State.ORPHANED: frozenset(),
    State.ABANDONED: frozenset(),
}

TERMINAL: frozenset[State] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)
LIVE: frozenset[State] = frozenset({SP, RU, VE})  # a process may exist; lease applies
NON_TERMINAL: frozenset[State] = frozenset({Q}) | LIVE
#: Terminal states that count as a failed attempt (may be retried per policy).
FAILED_STATES: frozenset[State] = frozenset({State.FAILED, State.TIMED_OUT, State.ORPHANED})


#: Columns a transition may set alongside ``state`` (anything else is a programming error).
SETTABLE = frozenset({
    "spawned_at", "started_at", "ended_at", "pid", "pid_create_time", "pgid", "runner_id",
    "lease_until", "exit_code", "signal", "reason", "artifacts_dir", "not_before", "host", "boot_id",
})


class IllegalTransition(ValueError):
    """A move not in ``TRANSITIONS`` (e.g. succeeded → running)."""

    def __init__(self, from_state: str, to_state: str) -> None:
        allowed = ", ".join(sorted(TRANSITIONS.get(State(from_state), ()))) if from_state in State._value2member_map_ else "?"
        super().__init__(f"illegal transition {from_state} → {to_state} (allowed from {from_state}: {allowed or 'none, terminal'})")
        self.from_state = from_state
        self.to_state = to_state


def check(from_state: str, to_state: str) -> None:
    """Raise ``IllegalTransition`` unless ``from_state → to_state`` is in the table."""
    try:
        f, t = State(from_state), State(to_state)
    except ValueError:
        raise IllegalTransition(from_state, to_state) from None
    if t not in TRANSITIONS[f]:
        raise IllegalTransition(from_state, to_state)


def apply(conn: Conn, run_id: int, attempt: int, from_state: str, to_state: str, *,
          actor: str, reason: str | None = None, reason_code: EndReason | None = None,
          fields: Mapping[str, Any] | None = None, detail: dict[str, Any] | None = None,
          at: float | None = None) -> bool:
    """Move one run inside the caller's open write transaction (compare-and-set).

    Sets ``state``, ``updated_at`` and ``fields`` (subset of ``SETTABLE``); on a move into a
    terminal state ``ended_at`` defaults to now, unless already set (a run leaving verifying
    keeps when its process exited), and ``reason_code`` (why it ended, a closed
    code) is required and stored in ``runs.reason_code``; ``reason`` is the sentence for
    people (``runs.reason`` and the event), never read back by code. Appends a
    ``transition`` event when the update wins. Returns False when the run was not in
    ``from_state`` at ``attempt``.

    Raises:
        IllegalTransition: the move is not in ``TRANSITIONS``.
        ValueError: ``fields`` names a column outside ``SETTABLE``; a terminal move without
            ``reason_code``, or a live move with one.
    """
    check(from_state, to_state)
    fields = dict(fields or {})
    bad = set(fields) - SETTABLE
    if bad:
        raise ValueError(f"transition may not set {sorted(bad)}")
    ts = at if at is not None else time.time()
    if State(to_state) in TERMINAL:
        if reason_code is None:
            raise ValueError(f"a move into {to_state} needs its reason_code (core.vocabulary.EndReason)")
        fields["reason_code"] = EndReason(reason_code).value
    elif reason_code is not None:
        raise ValueError(f"reason_code is for terminal moves, not {to_state}")
    if reason is not None:
        fields.setdefault("reason", reason)
    cols = ["state = ?", "updated_at = ?"] + [f"{k} = ?" for k in fields]
    params = [str(to_state), ts, *fields.values()]
    if State(to_state) in TERMINAL and "ended_at" not in fields:
        # The end already recorded (a run leaving verifying: when its process exited, e.g.
        # the monitor's exit file for one that ended while no runner was there) stays.
        cols.append("ended_at = COALESCE(ended_at, ?)")
        params.append(ts)
    params += [run_id, str(from_state), attempt]
    sql = f"UPDATE runs SET {', '.join(cols)} WHERE id = ? AND state = ? AND attempt = ?"
    if HAS_RETURNING:  # one statement instead of two on the busiest write path
        won = conn.execute(sql + " RETURNING job", params).fetchone()
        if won is None:
            return False
        job = won[0]
    else:
        if conn.execute(sql, params).rowcount != 1:
            return False
        job = conn.execute("SELECT job FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
    add_event(conn, actor=actor, kind=AuditEvent.TRANSITION, run_id=run_id, job=job, attempt=attempt,
              from_state=str(from_state), to_state=str(to_state), reason=reason, detail=detail, at=ts)
    return True


def transition(ledger: Ledger, run_id: int, attempt: int, from_state: str, to_state: str, *,
               actor: str, reason: str | None = None, reason_code: EndReason | None = None,
               fields: Mapping[str, Any] | None = None,
               detail: dict[str, Any] | None = None,
               then: Callable[[Conn], Any] | None = None) -> bool:
    """Move one run in its own ``BEGIN IMMEDIATE`` transaction; see ``apply``.

    ``then(conn)`` runs in the same transaction only when the move wins (e.g. writing the
    outcome or queueing the retry), so the follow-up commits atomically with the move.
    'database is locked' is retried (``Ledger.write``), never dropped.
    """
    check(from_state, to_state)

    def tx(conn: Conn) -> bool:
        won = apply(conn, run_id, attempt, from_state, to_state, actor=actor, reason=reason,
                    reason_code=reason_code, fields=fields, detail=detail)
        if won and then is not None:
            then(conn)
        return won

    return ledger.write(tx)
