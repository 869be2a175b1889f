"""``MissionTx``: one open write transaction on a mission, as the mission engine and the
mission actions see it (``Store.mission_write``).

A coordinator turn reads the mission, decides, and records the turn, its tool calls, the
workers it spawns, the moves and the escalations — all in one transaction, compare-and-set
on (state, turn). The decisions are the mission code's (``core.mission``); this handle gives
it the ledger's mission statements (``core.ledger.missions``) bound to the transaction,
reading typed records (``core.ledger.records``), never a row or the connection.

Every method runs inside the caller's transaction; nothing here commits. Times are Unix
seconds (UTC). Errors: ``core.ledger.connection.StorageError`` (the store failed), and
``ValueError`` for a column a move or update may not set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.ledger import escalations
from core.ledger import missions as ml
from core.ledger.connection import Conn
from core.ledger.records import Job, Mission, MissionCall, Worker
from core.vocabulary import AuditEvent


class MissionTx:
    """Mission statements bound to one open write transaction (see the module docstring)."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    # -- reads, inside the transaction ---------------------------------------------------------
    def mission(self, mission_id: int) -> Mission | None:
        """The mission (``missions``), or None when there is no such mission."""
        row = ml.get(self._conn, mission_id)
        return Mission.from_row(row) if row is not None else None

    def calls(self, mission_id: int, turn: int | None = None) -> list[MissionCall]:
        """Tool calls of the mission (of ``turn``, or all), in order (``mission_calls``)."""
        return [MissionCall.from_row(c) for c in ml.calls_of(self._conn, mission_id, turn)]

    def workers(self, mission_id: int) -> list[Worker]:
        """Workers of the mission by seq (``mission_workers``, with ``run_state``)."""
        return [Worker.from_row(w) for w in ml.workers_of(self._conn, mission_id)]

    def worker_job(self, name: str) -> Job | None:
        """The job a worker names (``jobs``: ``spec_hash``, ``enabled``, ``breaker_state``), or None."""
        row = ml.worker_job(self._conn, name)
        return Job.from_row({"name": name, **row}) if row is not None else None

    # -- writes --------------------------------------------------------------------------------
    def create(self, **kw: Any) -> int:
        """Insert a mission (``missions.create``'s keywords); returns its id."""
        return ml.create(self._conn, **kw)

    def move(self, mission_id: int, from_states: Iterable[str], to: str, *, actor: str,
             reason: str | None = None, fields: Mapping[str, Any] | None = None) -> bool:
        """Compare-and-set the mission's state with its ``mission_transition`` event; False when
        it was not in one of ``from_states``."""
        return ml.move(self._conn, mission_id, from_states, to, actor=actor, reason=reason, fields=fields)

    def update(self, mission_id: int, **fields: Any) -> None:
        """Set ``missions.MISSION_SETTABLE`` columns (no state change; record the event yourself)."""
        ml.update(self._conn, mission_id, **fields)

    def event(self, mission_id: int, kind: AuditEvent, *, actor: str, reason: str | None = None,
              detail: dict[str, Any] | None = None) -> None:
        """One audit event under ``job = 'mission:<id>'``."""
        ml.event(self._conn, mission_id, kind, actor=actor, reason=reason, detail=detail)

    def record_turn(self, mission_id: int, turn: int, reply: list[dict[str, Any]], *, tokens: int, cost: float,
                    actor: str) -> None:
        """Store coordinator turn ``turn`` and add its usage (tokens, dollars) to the mission."""
        ml.record_turn(self._conn, mission_id, turn, reply, tokens=tokens, cost=cost, actor=actor)

    def add_call(self, mission_id: int, turn: int, call_id: str, name: str, input_: Mapping[str, Any], *,
                 result: Any = None, is_error: bool = False) -> None:
        """Record one tool call; ``result`` None means it waits."""
        ml.add_call(self._conn, mission_id, turn, call_id, name, input_, result=result, is_error=is_error)

    def answer_call(self, mission_id: int, call_id: str, result: Any, *, is_error: bool = False) -> bool:
        """Fill a waiting call's result (compare-and-set on no result yet)."""
        return ml.answer_call(self._conn, mission_id, call_id, result, is_error=is_error)

    def queue_worker(self, mission_id: int, *, worker: str, task: str, context: Any, call_id: str | None,
                     spec_hash: str | None, actor: str) -> int:
        """Add the next worker and queue attempt 1 of its run; returns the worker's seq."""
        return int(ml.queue_worker(self._conn, mission_id, worker=worker, task=task, context=context,
                                   call_id=call_id, spec_hash=spec_hash, actor=actor)["seq"])

    def settle_worker(self, worker_id: int, to: str, *, actor: str, reason: str,
                      fields: Mapping[str, Any] | None = None) -> bool:
        """Move a worker out of ``running`` (compare-and-set) with its event."""
        return ml.settle_worker(self._conn, worker_id, to, actor=actor, reason=reason, fields=fields)

    def abandon_failed_worker(self, worker_id: int, *, actor: str, by: str) -> bool:
        """``failed → abandoned`` (compare-and-set) with its event."""
        return ml.abandon_failed_worker(self._conn, worker_id, actor=actor, by=by)

    def raise_escalation(self, mission_id: int, *, kind: str, severity: str, reason: str, run_id: int | None,
                         owner: str | None, sinks: Sequence[Any], actor: str) -> None:
        """Open (or count a repeat of) an escalation under ``job = 'mission:<id>'``, with its outbox rows."""
        escalations.raise_escalation(self._conn, job=ml.mission_job(mission_id), kind=kind, severity=severity,
                                     reason=reason, run_id=run_id, owner=owner, sinks=sinks, actor=actor)

    def resolve_escalations(self, mission_id: int, kinds: Iterable[str], *, actor: str, reason: str) -> None:
        """Resolve the mission's active escalations of ``kinds``."""
        escalations.auto_resolve(self._conn, ml.mission_job(mission_id), kinds, run_id=None, reason=reason,
                                 actor=actor)
