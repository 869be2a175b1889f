"""Escalations: the items a person must look at, deduplicated per (job, kind).

States::

    open ─▶ acknowledged ─▶ resolved
      │  ╲        │            ▲
      │   ▶ snoozed (until T) ─┘   (at T, still unresolved → reopened: open again)
      └────────────────────────┘   (auto-resolved when the job recovers)

One row per open (job, kind) (``escalations_open`` unique index on ``dedup_key`` for
non-resolved rows): a repeat increments ``count`` and moves ``last_seen`` and
``latest_run_id``. Every state change is ``UPDATE … WHERE id=? AND state=?`` with an
``events`` row in the same transaction, so of two operators acting at once exactly one wins
and the other is told who was first. Opening and reopening enqueue one ``notifications`` row
per configured sink (``core.supervisor.notify``); an auto-resolve enqueues a recovery notice only when
the opening was notified.

Timestamps are Unix seconds (UTC). Operator names are plain strings; the audit actor is
``operator:<name>``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from core.ledger import outbox
from core.ledger.connection import Conn, Ledger, add_event, inserted_id, row_dict
from core.ledger.page_records import KindCount
from core.ledger.records import Escalation
from core.text import utc_hms
from core.vocabulary import AuditEvent, EscalationState, NotificationEvent, max_severity

ACTIVE = ("open", "acknowledged", "snoozed")


def dedup_key(job: str, kind: str) -> str:
    """The deduplication key of an escalation: ``"<job>:<kind>"``."""
    return f"{job}:{kind}"


def _get(conn: Conn, esc_id: int) -> dict[str, Any] | None:
    return row_dict(conn.execute("SELECT * FROM escalations WHERE id = ?", (esc_id,)).fetchone())


def _event(conn: Conn, esc: dict[str, Any], kind: AuditEvent, actor: str, *, to_state: str | None,
           from_state: str | None = None, run_id: int | None = None, reason: str | None = None,
           extra: dict[str, Any] | None = None, at: float | None = None) -> None:
    detail = {"escalation_id": esc["id"], "kind": esc["kind"], "count": esc.get("count"), **(extra or {})}
    add_event(conn, actor=actor, kind=kind, run_id=run_id, job=esc["job"], from_state=from_state,
              to_state=to_state, reason=reason, detail=detail, at=at)


# -- supervisor side (inside the judging transaction) --------------------------------------

def raise_escalation(conn: Conn, *, job: str, kind: str, severity: str, reason: str,
                     run_id: int | None, owner: str | None, sinks: Sequence[Any] = (),
                     now: float | None = None, actor: str = "supervisor") -> tuple[int, str]:
    """Open a new escalation for (job, kind) or count a repeat on the active one.

    Call inside the writing transaction. A repeat keeps the state (an acknowledged or snoozed
    item stays so), raises severity to the higher of the two and refreshes reason/latest run.

    Returns:
        ``(escalation id, "opened" | "updated")``.
    """
    ts = now if now is not None else time.time()
    key = dedup_key(job, kind)
    row = row_dict(conn.execute("SELECT * FROM escalations WHERE dedup_key = ? AND state != 'resolved'",
                                (key,)).fetchone())
    if row is not None:
        sev = max_severity(row["severity"], severity) or severity
        conn.execute("UPDATE escalations SET count = count + 1, last_seen = ?, latest_run_id = ?, reason = ?,"
                     " severity = ?, owner = COALESCE(?, owner), updated_at = ? WHERE id = ? AND state = ?",
                     (ts, run_id, reason, sev, owner, ts, row["id"], row["state"]))
        row.update(count=row["count"] + 1)
        _event(conn, row, AuditEvent.ESCALATION_UPDATED, actor, to_state=row["state"], run_id=run_id, reason=reason, at=ts)
        return int(row["id"]), "updated"
    cur = conn.execute(
        "INSERT INTO escalations (dedup_key, job, kind, severity, state, count, first_seen, last_seen,"
        " latest_run_id, owner, reason, notified, updated_at) VALUES (?,?,?,?,'open',1,?,?,?,?,?,?,?)",
        (key, job, kind, severity, ts, ts, run_id, owner, reason, 1 if sinks else 0, ts))
    esc = _get(conn, inserted_id(cur))
    assert esc is not None
    _event(conn, esc, AuditEvent.ESCALATION_OPENED, actor, to_state=EscalationState.OPEN, run_id=run_id, reason=reason, at=ts)
    if sinks and not outbox.enqueue(conn, esc, NotificationEvent.OPENED, sinks, now=ts):
        # No sink hears it (routing): "notified" must not claim otherwise.
        conn.execute("UPDATE escalations SET notified = 0 WHERE id = ?", (esc["id"],))
    return int(esc["id"]), "opened"


def auto_resolve(conn: Conn, job: str, kinds: Iterable[str], *, run_id: int | None,
                 reason: str, sinks: Sequence[Any] = (), now: float | None = None,
                 actor: str = "supervisor", started_at: float | None = None) -> list[int]:
    """Resolve the active escalations of ``job`` whose kind is in ``kinds`` (the job recovered).

    ``started_at``: when the recovering run started (Unix seconds, ``runs.started_at``). Given,
    only escalations whose escalated run (``latest_run_id``) had ended by then are resolved
    (``runs.ended_at <= started_at``): a run that overlapped the failure (concurrency > 1)
    proves nothing about it. Escalations without a run are not held back.

    Call inside the writing transaction. A recovery notice is enqueued only for escalations
    whose opening was notified. Returns the resolved ids.
    """
    ts = now if now is not None else time.time()
    kinds = list(kinds)
    if not kinds:
        return []
    timeline = ""
    params: tuple[Any, ...] = (job, *kinds)
    if started_at is not None:
        timeline = (" AND (latest_run_id IS NULL OR EXISTS (SELECT 1 FROM runs r WHERE r.id = latest_run_id"
                    " AND r.ended_at IS NOT NULL AND r.ended_at <= ?))")
        params = (*params, started_at)
    rows = conn.execute(
        f"SELECT * FROM escalations WHERE job = ? AND state != 'resolved' AND kind IN ({','.join('?' * len(kinds))})"
        + timeline, params).fetchall()
    done = []
    for r in rows:
        esc = row_dict(r)
        assert esc is not None
        cur = conn.execute("UPDATE escalations SET state = 'resolved', resolved_by = ?, resolved_at = ?,"
                           " updated_at = ? WHERE id = ? AND state = ?",
                           (actor, ts, ts, esc["id"], esc["state"]))
        if cur.rowcount != 1:
            continue
        _event(conn, esc, AuditEvent.ESCALATION_RESOLVED, actor, from_state=esc["state"], to_state=EscalationState.RESOLVED,
               run_id=run_id, reason=reason, extra={"auto": True}, at=ts)
        if esc["notified"]:
            esc.update(state=EscalationState.RESOLVED, resolved_by=actor, resolved_at=ts)
            outbox.enqueue(conn, esc, NotificationEvent.RECOVERED, sinks, now=ts)
        done.append(int(esc["id"]))
    return done


def expire_snoozes(ledger: Ledger, *, sinks: Sequence[Any] = (), now: float | None = None) -> list[int]:
    """Reopen snoozed escalations whose ``snoozed_until`` has passed (their anomaly persisted:
    a recovery would have auto-resolved them). Enqueues ``reopened`` notifications.

    Returns the reopened ids.
    """
    ts = now if now is not None else time.time()

    def tx(conn: Conn) -> list[int]:
        out = []
        for r in conn.execute("SELECT * FROM escalations WHERE state = 'snoozed' AND snoozed_until <= ?"
                              " LIMIT 100", (ts,)).fetchall():
            esc = row_dict(r)
            assert esc is not None
            cur = conn.execute("UPDATE escalations SET state = 'open', notified = MAX(notified, ?), updated_at = ?"
                               " WHERE id = ? AND state = 'snoozed'", (1 if sinks else 0, ts, esc["id"]))
            if cur.rowcount != 1:
                continue
            _event(conn, esc, AuditEvent.ESCALATION_REOPENED, "supervisor", from_state=EscalationState.SNOOZED,
                   to_state=EscalationState.OPEN,
                   reason=f"snooze by {esc['snoozed_by']} ended at {utc_hms(esc['snoozed_until'])}; still unresolved",
                   at=ts)
            esc.update(state=EscalationState.OPEN)
            outbox.enqueue(conn, esc, NotificationEvent.REOPENED, sinks, now=ts)
            out.append(int(esc["id"]))
        return out

    return ledger.write(tx)


# -- operator actions ----------------------------------------------------------------------

def move(conn: Conn, esc_id: int, *, allowed_from: Sequence[str], to_state: str, sets: dict[str, Any],
         event: AuditEvent, actor: str, extra: dict[str, Any] | None = None, now: float) -> tuple[dict[str, Any] | None, bool]:
    """Inside a write transaction: an operator's move of escalation ``esc_id`` into ``to_state``
    (setting ``sets`` columns), compare-and-set on the state read, only from ``allowed_from``,
    with an ``event`` audit row by ``actor``. Returns ``(the row before, moved)``; the row is
    None when there is no such escalation (nothing written)."""
    esc = _get(conn, esc_id)
    if esc is None or esc["state"] not in allowed_from:
        return esc, False
    cols = ", ".join(f"{k} = ?" for k in sets)
    cur = conn.execute(f"UPDATE escalations SET state = ?, {cols}, updated_at = ? WHERE id = ? AND state = ?",
                       (to_state, *sets.values(), now, esc_id, esc["state"]))
    if cur.rowcount != 1:  # cannot happen under BEGIN IMMEDIATE; kept as the CAS contract
        return esc, False
    _event(conn, esc, event, actor, from_state=esc["state"], to_state=to_state, run_id=None, extra=extra, at=now)
    return esc, True


# -- reading --------------------------------------------------------------------------------

def get(ledger: Ledger, esc_id: int) -> dict[str, Any] | None:
    """One ``escalations`` row as a dict, or None."""
    return _get(ledger.conn, esc_id)


def list_escalations(ledger: Ledger, state: str | Sequence[str] | None = None, limit: int = 100, *,
                     job: str | None = None, since: float | None = None,
                     before_id: int | None = None) -> list[Escalation]:
    """Escalations newest activity first (``Escalation`` records of ``escalations``).

    Args:
        state: one state, several, ``"active"`` (open|acknowledged|snoozed), or None for all.
        limit: page size (rows).
        job: only this job.
        since: only rows with ``last_seen`` ≥ this (Unix seconds).
        before_id: keyset paging by id (rows with smaller id).

    Ordering: active critical first is the console's business; here ``last_seen`` desc, id desc.
    """
    where: list[str] = []
    params: list[Any] = []
    if state == "active":
        state = ACTIVE
    if isinstance(state, str):
        where.append("state = ?")
        params.append(state)
    elif state:
        where.append(f"state IN ({','.join('?' * len(state))})")
        params.extend(state)
    if job is not None:
        where.append("job = ?")
        params.append(job)
    if since is not None:
        where.append("last_seen >= ?")
        params.append(since)
    if before_id is not None:
        where.append("id < ?")
        params.append(before_id)
    sql = "SELECT * FROM escalations" + (f" WHERE {' AND '.join(where)}" if where else "")
    sql += " ORDER BY last_seen DESC, id DESC LIMIT ?"
    return [Escalation.from_row(r) for r in ledger.rows(sql, (*params, int(limit)))]


def changed_since(ledger: Ledger, after_updated: float, after_id: int, limit: int = 200) -> list[Escalation]:
    """Escalations changed after the keyset ``(updated_at, id)`` (epoch s, id), oldest change
    first (for tail), as ``Escalation`` records."""
    rows = ledger.rows("SELECT * FROM escalations WHERE (updated_at > ?) OR (updated_at = ? AND id > ?)"
                       " ORDER BY updated_at, id LIMIT ?", (after_updated, after_updated, after_id, int(limit)))
    return [Escalation.from_row(r) for r in rows]


def counts_by_kind(ledger: Ledger, since: float) -> list[KindCount]:
    """Escalations seen since ``since`` (epoch s) per kind, most occurrences first."""
    rows = ledger.rows("SELECT kind, COUNT(*) AS escalations, SUM(count) AS occurrences"
                       " FROM escalations WHERE last_seen >= ? GROUP BY kind ORDER BY occurrences DESC",
                       (since,))
    return [KindCount(kind=r["kind"], escalations=r["escalations"], occurrences=r["occurrences"]) for r in rows]

