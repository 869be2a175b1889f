"""Reads of the ``events`` audit trail (appends go through ``connection.add_event``, inside
the transaction of the change they record).

Every function takes an open connection (``Ledger.conn`` for a plain read, or the ``conn``
of a write transaction) and returns plain dicts; ``at`` is Unix seconds (UTC), ``detail`` is
decoded JSON (a dict, or None when absent or unreadable).
"""

from __future__ import annotations

import json
from typing import Any

from core.ledger.connection import Conn, Row


def _decode(row: Row | None) -> dict[str, Any] | None:
    if row is None:
        return None
    out = {k: row[k] for k in row.keys()}
    if "detail" in out:
        try:
            detail = json.loads(out["detail"]) if out["detail"] else None
        except ValueError:
            detail = None
        out["detail"] = detail if isinstance(detail, dict) else None
    return out


def latest(conn: Conn, run_id: int, kind: str | None = None) -> dict[str, Any] | None:
    """The newest event of run ``run_id`` (of ``kind`` when given): ``{id, at, actor, kind,
    from_state, to_state, reason, detail}``, or None."""
    sql = "SELECT id, at, actor, kind, from_state, to_state, reason, detail FROM events WHERE run_id = ?"
    params: list[Any] = [run_id]
    if kind is not None:
        sql += " AND kind = ?"
        params.append(kind)
    return _decode(conn.execute(sql + " ORDER BY id DESC LIMIT 1", params).fetchone())


def first(conn: Conn, run_id: int) -> dict[str, Any] | None:
    """The oldest event of run ``run_id`` (who queued it, and when), or None."""
    return _decode(conn.execute(
        "SELECT id, at, actor, kind, from_state, to_state, reason, detail FROM events WHERE run_id = ?"
        " ORDER BY id LIMIT 1", (run_id,)).fetchone())


def exists(conn: Conn, run_id: int, kind: str) -> bool:
    """Whether run ``run_id`` has an event of ``kind`` (idempotence marks such as
    ``late_result_judged``)."""
    return conn.execute("SELECT 1 FROM events WHERE run_id = ? AND kind = ? LIMIT 1",
                        (run_id, kind)).fetchone() is not None
