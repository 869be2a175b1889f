"""The ``notifications`` outbox: one row per (escalation event, sink), written in the same
transaction as the escalation change so nothing is lost across a crash. Delivery is
``core.supervisor.notify``'s job; this module only writes and shapes rows.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any


def payload_for(esc: dict[str, Any], event: str) -> dict[str, Any]:
    """The JSON sent to sinks for escalation row ``esc`` and ``event`` (opened|reopened|recovered)."""
    sev = (esc.get("severity") or "info").upper()
    owner = esc.get("owner") or "unowned"
    if event == "recovered":
        text = f"[RECOVERED] {esc['job']}: {esc['kind']} resolved after {esc.get('count', 1)} occurrence(s)"
    else:
        verb = "reopened" if event == "reopened" else "escalation"
        text = (f"[{sev}] {esc['job']}: {esc['kind']} {verb} (count {esc.get('count', 1)}, owner {owner})"
                f" - {esc.get('reason') or ''}")
    return {
        "text": text[:2000], "event": event, "escalation_id": esc["id"], "job": esc["job"],
        "kind": esc["kind"], "severity": esc.get("severity"), "state": esc.get("state"),
        "count": esc.get("count"), "owner": esc.get("owner"), "reason": esc.get("reason"),
        "first_seen": esc.get("first_seen"), "last_seen": esc.get("last_seen"),
        "latest_run_id": esc.get("latest_run_id"),
    }


def enqueue(conn: sqlite3.Connection, esc: dict[str, Any], event: str, sinks: Sequence[Any],
            *, now: float | None = None) -> list[int]:
    """Insert one ``pending`` notification per sink (inside the caller's transaction).

    Returns the new ``notifications`` ids (empty when no sink is configured).
    """
    ts = now if now is not None else time.time()
    body = json.dumps(payload_for(esc, event), default=str)
    ids = []
    for sink in sinks:
        cur = conn.execute("INSERT INTO notifications (escalation_id, event, sink, payload, state, attempts,"
                           " next_attempt_at, created_at) VALUES (?,?,?,?,'pending',0,?,?)",
                           (esc["id"], event, sink.name, body, ts, ts))
        ids.append(int(cur.lastrowid))
    return ids
