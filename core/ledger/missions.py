"""Missions in the ledger: ``missions``, ``mission_workers``, ``mission_calls``, ``mission_turns``.

A mission's audit trail lives in ``events`` under ``job = 'mission:<id>'`` (kinds
``mission_*``), beside the transitions of its worker runs. A worker's attempts are ordinary
``runs`` of the worker's job (``trigger = 'mission'``, ``slot = 'mission:<id>:<seq>'``), so
retries, backoff, leases, timeouts, the sweep and the breaker treat them like any run.

Every state change here is a compare-and-set (``… WHERE id = ? AND state IN (…)``) with its
event in the same transaction; call the write functions inside ``Ledger.write``.
All timestamps are Unix seconds (UTC).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from core.ledger import runs
from core.ledger.connection import Conn, Row, add_event, inserted_id, row_dict
from core.ledger.lifecycle import State
from core.vocabulary import AuditEvent, CoordinatorKind, MissionState, Trigger, WorkerState

_JSON_MISSION = ("command", "workers", "budget")
#: Columns ``move``/``update`` may set on a mission (anything else is a programming error).
MISSION_SETTABLE = frozenset({"report", "report_status", "close_requested", "question", "reason",
                              "decided_by", "ended_at"})
WORKER_SETTABLE = frozenset({"run_id", "attempts", "status", "confidence", "steps_used", "tokens", "cost",
                             "result", "error", "note", "settled_at", "abandoned_by"})


#: The audit event of a worker settled into each state (``settle_worker``).
WORKER_EVENTS: dict[WorkerState, AuditEvent] = {
    WorkerState.DELIVERED: AuditEvent.MISSION_WORKER_DELIVERED, WorkerState.FAILED: AuditEvent.MISSION_WORKER_FAILED,
    WorkerState.ABANDONED: AuditEvent.MISSION_WORKER_ABANDONED}


def mission_job(mission_id: int) -> str:
    """The ``job`` label of a mission's events and escalations: ``mission:<id>``."""
    return f"mission:{mission_id}"


def worker_slot(mission_id: int, seq: int) -> str:
    """``runs.slot`` of a mission worker's attempts."""
    return f"mission:{mission_id}:{seq}"


def parse_slot(slot: str | None) -> tuple[int, int] | None:
    """``(mission id, seq)`` from a worker run's slot, or None for any other run."""
    if not slot or not slot.startswith("mission:"):
        return None
    parts = slot.split(":")
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return int(parts[1]), int(parts[2])


def _decode(row: Row | None, keys: Iterable[str]) -> dict[str, Any] | None:
    d = row_dict(row)
    if d is None:
        return None
    for k in keys:
        if d.get(k) is not None:
            try:
                d[k] = json.loads(d[k])
            except ValueError:
                pass
    return d


def event(conn: Conn, mission_id: int, kind: AuditEvent, *, actor: str, reason: str | None = None,
          detail: dict[str, Any] | None = None, from_state: str | None = None, to_state: str | None = None,
          run_id: int | None = None, at: float | None = None) -> int:
    """Append a mission audit event (``events`` row, ``job = 'mission:<id>'``)."""
    return add_event(conn, actor=actor, kind=kind, job=mission_job(mission_id), run_id=run_id, reason=reason,
                     from_state=from_state, to_state=to_state, detail={"mission_id": mission_id, **(detail or {})},
                     at=at)


# -- missions -------------------------------------------------------------------------------

def create(conn: Conn, *, name: str, goal: str, coordinator: str, workers: list[str],
           budget: Mapping[str, Any], actor: str, owner: str | None = None, command: list[str] | None = None,
           cwd: str | None = None, model: str | None = None, system: str | None = None,
           now: float | None = None) -> int:
    """Insert a mission in ``planning`` (the coordinator's first turn is due); returns its id."""
    ts = now if now is not None else time.time()
    state = MissionState.WORKING if coordinator == CoordinatorKind.EXTERNAL else MissionState.PLANNING
    cur = conn.execute(
        "INSERT INTO missions (name, goal, coordinator, command, cwd, model, system, workers, owner, state, budget,"
        " created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (name, goal, coordinator, json.dumps(command) if command is not None else None, cwd, model, system,
         json.dumps(list(workers)), owner, state.value, json.dumps(dict(budget)), ts, ts))
    mid = inserted_id(cur)
    event(conn, mid, AuditEvent.MISSION_STARTED, actor=actor, to_state=state.value, reason=goal[:500],
          detail={"name": name, "coordinator": coordinator, "workers": list(workers), "owner": owner,
                  "budget": dict(budget)}, at=ts)
    return mid


def get(conn: Conn, mission_id: int) -> dict[str, Any] | None:
    """One ``missions`` row as a dict (``command``, ``workers``, ``budget`` decoded), or None."""
    return _decode(conn.execute("SELECT * FROM missions WHERE id = ?", (mission_id,)).fetchone(), _JSON_MISSION)


def list_missions(conn: Conn, *, states: Iterable[str] | None = None,
                  limit: int = 100) -> list[dict[str, Any]]:
    """Missions newest first (at most ``limit``), optionally only in ``states``."""
    sql, params = "SELECT * FROM missions", []
    states = list(states or [])
    if states:
        sql += f" WHERE state IN ({','.join('?' * len(states))})"
        params.extend(states)
    rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*params, int(limit))).fetchall()
    return [d for d in (_decode(r, _JSON_MISSION) for r in rows) if d is not None]


def move(conn: Conn, mission_id: int, from_states: Iterable[str], to: str, *, actor: str,
         reason: str | None = None, fields: Mapping[str, Any] | None = None, detail: dict[str, Any] | None = None,
         now: float | None = None) -> bool:
    """Compare-and-set a mission's state (from any of ``from_states``) with a
    ``mission_transition`` event; ``fields`` (``MISSION_SETTABLE``) set alongside.
    Returns False when the mission was not in one of ``from_states``."""
    fields = dict(fields or {})
    bad = set(fields) - MISSION_SETTABLE
    if bad:
        raise ValueError(f"mission move may not set {sorted(bad)}")
    ts = now if now is not None else time.time()
    froms = [str(s) for s in from_states]
    row = conn.execute("SELECT state FROM missions WHERE id = ?", (mission_id,)).fetchone()
    if row is None or row[0] not in froms:
        return False
    cols = ["state = ?", "updated_at = ?"] + [f"{k} = ?" for k in fields]
    cur = conn.execute(f"UPDATE missions SET {', '.join(cols)} WHERE id = ? AND state = ?",
                       (str(to), ts, *fields.values(), mission_id, row[0]))
    if cur.rowcount != 1:
        return False
    event(conn, mission_id, AuditEvent.MISSION_TRANSITION, actor=actor, from_state=row[0], to_state=str(to), reason=reason,
          detail=detail, at=ts)
    return True


def update(conn: Conn, mission_id: int, **fields: Any) -> None:
    """Set ``MISSION_SETTABLE`` columns without a state change (the caller records the event)."""
    bad = set(fields) - MISSION_SETTABLE
    if bad:
        raise ValueError(f"mission update may not set {sorted(bad)}")
    if fields:
        conn.execute(f"UPDATE missions SET {', '.join(f'{k} = ?' for k in fields)}, updated_at = ? WHERE id = ?",
                     (*fields.values(), time.time(), mission_id))


def due(conn: Conn, limit: int = 50) -> list[int]:
    """Ids of missions that are not ended (the mission engine's work list), oldest first."""
    ended = (MissionState.CLOSED.value, MissionState.ABORTED.value)
    return [int(r[0]) for r in conn.execute(
        "SELECT id FROM missions WHERE state NOT IN (?, ?) ORDER BY id LIMIT ?", (*ended, int(limit))).fetchall()]


# -- turns and tool calls ---------------------------------------------------------------------

def record_turn(conn: Conn, mission_id: int, turn: int, reply: list[dict[str, Any]], *,
                tokens: int = 0, cost: float = 0.0, actor: str, now: float | None = None) -> None:
    """Store one coordinator turn (its reply content blocks) and add its usage to the mission."""
    ts = now if now is not None else time.time()
    conn.execute("INSERT INTO mission_turns (mission_id, turn, at, reply, tokens, cost) VALUES (?,?,?,?,?,?)",
                 (mission_id, turn, ts, json.dumps(reply, default=str), int(tokens), float(cost)))
    conn.execute("UPDATE missions SET turns = ?, tokens = tokens + ?, cost = cost + ?, updated_at = ? WHERE id = ?",
                 (turn, int(tokens), float(cost), ts, mission_id))
    event(conn, mission_id, AuditEvent.MISSION_TURN, actor=actor, reason=f"coordinator turn {turn}",
          detail={"turn": turn, "tokens": tokens, "cost": round(cost, 6),
                  "calls": [b.get("name") for b in reply if b.get("type") == "tool_use"]}, at=ts)


def add_call(conn: Conn, mission_id: int, turn: int, call_id: str, name: str,
             input_: Mapping[str, Any], *, result: Any = None, is_error: bool = False,
             now: float | None = None) -> None:
    """One tool call of a turn; ``result`` None means it waits (a worker, a person)."""
    ts = now if now is not None else time.time()
    conn.execute(
        "INSERT OR IGNORE INTO mission_calls (mission_id, turn, call_id, name, input, result, is_error, created_at,"
        " answered_at) VALUES (?,?,?,?,?,?,?,?,?)",
        (mission_id, turn, call_id, name, json.dumps(dict(input_), default=str),
         json.dumps(result, default=str) if result is not None else None, int(is_error), ts,
         ts if result is not None else None))


def answer_call(conn: Conn, mission_id: int, call_id: str, result: Any, *,
                is_error: bool = False, now: float | None = None) -> bool:
    """Fill a waiting call's result (compare-and-set on ``result IS NULL``)."""
    ts = now if now is not None else time.time()
    cur = conn.execute("UPDATE mission_calls SET result = ?, is_error = ?, answered_at = ?"
                       " WHERE mission_id = ? AND call_id = ? AND result IS NULL",
                       (json.dumps(result, default=str), int(is_error), ts, mission_id, call_id))
    return cur.rowcount == 1


def calls_of(conn: Conn, mission_id: int, turn: int | None = None) -> list[dict[str, Any]]:
    """Tool calls of a mission (one turn, or all), in order; ``input``/``result`` decoded."""
    if turn is None:
        rows = conn.execute("SELECT * FROM mission_calls WHERE mission_id = ? ORDER BY id", (mission_id,))
    else:
        rows = conn.execute("SELECT * FROM mission_calls WHERE mission_id = ? AND turn = ? ORDER BY id",
                            (mission_id, turn))
    return [d for d in (_decode(r, ("input", "result")) for r in rows.fetchall()) if d is not None]


def turns_of(conn: Conn, mission_id: int) -> list[dict[str, Any]]:
    """Coordinator turns in order (``reply`` decoded)."""
    rows = conn.execute("SELECT * FROM mission_turns WHERE mission_id = ? ORDER BY turn", (mission_id,)).fetchall()
    return [d for d in (_decode(r, ("reply",)) for r in rows) if d is not None]


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:16]}"


# -- workers ----------------------------------------------------------------------------------

def queue_worker(conn: Conn, mission_id: int, *, worker: str, task: str, context: Any,
                 call_id: str | None, spec_hash: str | None, actor: str, now: float | None = None) -> dict[str, Any]:
    """Add worker ``seq`` to a mission and queue attempt 1 of its run (``trigger 'mission'``).

    Returns ``{id, seq, run_id, lineage}``. The run is an ordinary run of job ``worker``.
    """
    ts = now if now is not None else time.time()
    seq = int(conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM mission_workers WHERE mission_id = ?",
                           (mission_id,)).fetchone()[0])
    lineage = uuid.uuid4().hex
    run_id = runs.create(conn, job=worker, slot=worker_slot(mission_id, seq), trigger=Trigger.MISSION, actor=actor,
                         not_before=ts, spec_hash=spec_hash, lineage=lineage, reason="mission",
                         detail={"mission_id": mission_id, "seq": seq}, now=ts)
    assert run_id is not None
    cur = conn.execute(
        "INSERT INTO mission_workers (mission_id, seq, worker, task, context, call_id, state, lineage, run_id,"
        " attempts, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,1,?,?)",
        (mission_id, seq, worker, task, json.dumps(context, default=str), call_id, WorkerState.RUNNING.value,
         lineage, run_id, ts, ts))
    wid = inserted_id(cur)
    event(conn, mission_id, AuditEvent.MISSION_WORKER_SPAWNED, actor=actor, run_id=run_id, to_state=WorkerState.RUNNING.value,
          reason=f"worker {seq} ({worker}): {task[:200]}", detail={"seq": seq, "worker": worker, "run_id": run_id},
          at=ts)
    return {"id": wid, "seq": seq, "run_id": run_id, "lineage": lineage}


def workers_of(conn: Conn, mission_id: int) -> list[dict[str, Any]]:
    """Workers of a mission by ``seq``, each with ``run_state`` (its latest attempt's state)."""
    rows = conn.execute(
        "SELECT w.*, (SELECT r.state FROM runs r WHERE r.lineage = w.lineage ORDER BY r.attempt DESC LIMIT 1)"
        " AS run_state FROM mission_workers w WHERE w.mission_id = ? ORDER BY w.seq", (mission_id,)).fetchall()
    return [d for d in (_decode(r, ("context", "result")) for r in rows) if d is not None]


def latest_attempt(conn: Conn, lineage: str) -> dict[str, Any] | None:
    """The newest run of a worker's lineage joined with its outcome (``status``, ``handoff``,
    ``verification``, ``reason`` …), decoded; None when it has no run."""
    return _decode(conn.execute(
        "SELECT r.*, o.status, o.handoff, o.verification, o.handoff_findings, o.stdout_tail, o.stderr_tail"
        " FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id WHERE r.lineage = ?"
        " ORDER BY r.attempt DESC LIMIT 1", (lineage,)).fetchone(), ("handoff", "verification", "handoff_findings"))


def settle_worker(conn: Conn, worker_id: int, to: str, *, actor: str, reason: str,
                  fields: Mapping[str, Any] | None = None, now: float | None = None) -> bool:
    """Move a worker out of ``running`` (compare-and-set) with a ``mission_worker_<to>`` event."""
    fields = dict(fields or {})
    bad = set(fields) - WORKER_SETTABLE
    if bad:
        raise ValueError(f"worker settle may not set {sorted(bad)}")
    ts = now if now is not None else time.time()
    fields.setdefault("settled_at", ts)
    row = conn.execute("SELECT mission_id, seq, worker, run_id FROM mission_workers WHERE id = ?",
                       (worker_id,)).fetchone()
    if row is None:
        return False
    cols = ["state = ?", "updated_at = ?"] + [f"{k} = ?" for k in fields]
    vals = [json.dumps(v, default=str) if k == "result" and v is not None else v for k, v in fields.items()]
    cur = conn.execute(f"UPDATE mission_workers SET {', '.join(cols)} WHERE id = ? AND state = ?",
                       (str(to), ts, *vals, worker_id, WorkerState.RUNNING.value))
    if cur.rowcount != 1:
        return False
    event(conn, row[0], WORKER_EVENTS[WorkerState(to)], actor=actor, run_id=fields.get("run_id", row[3]),
          from_state=WorkerState.RUNNING.value, to_state=str(to), reason=reason,
          detail={"seq": row[1], "worker": row[2]}, at=ts)
    return True


def abandon_failed_worker(conn: Conn, worker_id: int, *, actor: str, by: str,
                          now: float | None = None) -> bool:
    """A person gives up a ``failed`` worker (``failed → abandoned``), so the mission may close."""
    ts = now if now is not None else time.time()
    row = conn.execute("SELECT mission_id, seq, worker FROM mission_workers WHERE id = ?", (worker_id,)).fetchone()
    if row is None:
        return False
    cur = conn.execute("UPDATE mission_workers SET state = ?, abandoned_by = ?, updated_at = ? WHERE id = ?"
                       " AND state = ?", (WorkerState.ABANDONED.value, by, ts, worker_id, WorkerState.FAILED.value))
    if cur.rowcount != 1:
        return False
    event(conn, row[0], AuditEvent.MISSION_WORKER_ABANDONED, actor=actor, from_state=WorkerState.FAILED.value,
          to_state=WorkerState.ABANDONED.value, reason=f"worker {row[1]} ({row[2]}) abandoned by {by}",
          detail={"seq": row[1], "worker": row[2]}, at=ts)
    return True


def worker_states(conn: Conn, mission_id: int) -> list[tuple[int, str, str]]:
    """``(seq, worker, state)`` of every worker of a mission, by seq."""
    return [(int(r[0]), r[1], r[2]) for r in conn.execute(
        "SELECT seq, worker, state FROM mission_workers WHERE mission_id = ? ORDER BY seq", (mission_id,)).fetchall()]


def note_attempt(conn: Conn, worker_id: int, run_id: int, attempt: int) -> None:
    """Point a running worker at its newest attempt (a retry was queued)."""
    conn.execute("UPDATE mission_workers SET run_id = ?, attempts = ?, updated_at = ? WHERE id = ? AND state = ?",
                 (run_id, attempt, time.time(), worker_id, WorkerState.RUNNING.value))


def worker_job(conn: Conn, name: str) -> dict[str, Any] | None:
    """The job a worker names (``jobs`` table): ``spec_hash``, ``enabled``, ``breaker_state``,
    ``breaker_until`` (Unix s); None if unknown."""
    return row_dict(conn.execute("SELECT spec_hash, enabled, breaker_state, breaker_until FROM jobs WHERE name = ?",
                                 (name,)).fetchone())


def live_worker_runs(conn: Conn, mission_id: int) -> list[dict[str, Any]]:
    """Non-terminal runs of a mission's workers (queued or live), for abort."""
    rows = conn.execute(
        "SELECT r.* FROM runs r JOIN mission_workers w ON w.lineage = r.lineage"
        " WHERE w.mission_id = ? AND r.state IN (?,?,?,?) ORDER BY r.id",
        (mission_id, State.QUEUED.value, State.SPAWNED.value, State.RUNNING.value, State.VERIFYING.value)).fetchall()
    return [dict(r) for r in rows]


def events_of(conn: Conn, mission_id: int, limit: int = 200) -> list[dict[str, Any]]:
    """A mission's audit trail (its own events), oldest first, at most ``limit``."""
    rows = conn.execute("SELECT * FROM (SELECT * FROM events WHERE job = ? ORDER BY id DESC LIMIT ?) ORDER BY id",
                        (mission_job(mission_id), int(limit))).fetchall()
    return [d for d in (_decode(r, ("detail",)) for r in rows) if d is not None]


def worker_input(conn: Conn, mission_id: int, seq: int) -> dict[str, Any] | None:
    """What a worker run is given: ``{mission_id, seq, goal, task, context}`` (None if unknown)."""
    row = conn.execute("SELECT w.task, w.context, m.goal FROM mission_workers w JOIN missions m ON m.id ="
                       " w.mission_id WHERE w.mission_id = ? AND w.seq = ?", (mission_id, seq)).fetchone()
    if row is None:
        return None
    try:
        context = json.loads(row[1]) if row[1] else None
    except ValueError:
        context = row[1]
    return {"mission_id": mission_id, "seq": seq, "goal": row[2], "task": row[0], "context": context}
