"""What a monitoring system asks of the ledger (``console.metrics`` turns it into Prometheus
metrics): the present state in a few bounded aggregates, and the audit trail's new events
after a cursor, from which counters and histograms are kept.

Every figure is grouped by a bounded set (job, state, severity, kind, sink, runner host),
never by run id. Times are Unix seconds (UTC); ages and lags are seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from core.ledger.connection import Ledger
from core.ledger.lifecycle import LIVE, TERMINAL
from core.vocabulary import AuditEvent, EscalationState, NotificationState, RunState, Trigger

_TERMINAL = tuple(sorted(str(s) for s in TERMINAL))
_LIVE = tuple(sorted(str(s) for s in LIVE))


@dataclass(frozen=True)
class Present:
    """The ledger now. ``open_escalations``: {(severity, kind): count} of state ``open``;
    ``oldest_open_s``: {severity: seconds since the oldest open one was first seen};
    ``live_runs``: {state: count} of spawned/running/verifying runs; ``heartbeat_age_s``:
    seconds since the freshest heartbeat of a runner that has not stopped (None: no such
    runner); ``runners_running``: runners not stopped whose lease has not run out;
    ``outbox``: {(sink, state): count} of pending and failed notifications."""

    open_escalations: dict[tuple[str, str], int] = field(default_factory=dict)
    oldest_open_s: dict[str, float] = field(default_factory=dict)
    live_runs: dict[str, int] = field(default_factory=dict)
    heartbeat_age_s: float | None = None
    runners_running: int = 0
    outbox: dict[tuple[str, str], int] = field(default_factory=dict)


def present(ledger: Ledger, now: float) -> Present:
    """The ledger's present state (table scans bounded by indexes on state; no run rows)."""
    esc = ledger.query("SELECT severity, kind, count(*) AS n, min(first_seen) AS oldest FROM escalations"
                       " WHERE state = ? GROUP BY severity, kind", (str(EscalationState.OPEN),))
    oldest: dict[str, float] = {}
    for r in esc:
        oldest[r["severity"]] = max(oldest.get(r["severity"], 0.0), now - float(r["oldest"]))
    live = ledger.query(f"SELECT state, count(*) AS n FROM runs WHERE state IN ({','.join('?' * len(_LIVE))})"
                        " GROUP BY state", _LIVE)
    beat = ledger.one("SELECT max(heartbeat_at) AS at, sum(CASE WHEN heartbeat_at + lease_s >= ? THEN 1 ELSE 0 END)"
                      " AS fresh FROM runners WHERE stopped_at IS NULL", (now,))
    outbox = ledger.query("SELECT sink, state, count(*) AS n FROM notifications WHERE state IN (?, ?)"
                          " GROUP BY sink, state", (str(NotificationState.PENDING), str(NotificationState.FAILED)))
    return Present(
        open_escalations={(r["severity"], r["kind"]): int(r["n"]) for r in esc},
        oldest_open_s=oldest,
        live_runs={r["state"]: int(r["n"]) for r in live},
        heartbeat_age_s=None if beat is None or beat["at"] is None else max(0.0, now - float(beat["at"])),
        runners_running=int(beat["fresh"] or 0) if beat is not None else 0,
        outbox={(r["sink"], r["state"]): int(r["n"]) for r in outbox},
    )


@dataclass(frozen=True)
class Happening:
    """One audit-trail event a counter cares about. ``what``: ``ended`` (a run reached
    ``state``, with its ``duration_s`` when it started), ``spawned`` (a scheduled run started;
    ``lag_s`` since its slot was due), ``judge_answered``, ``judge_error`` or
    ``judge_rejected``."""

    id: int
    what: str
    job: str
    state: str | None = None
    duration_s: float | None = None
    lag_s: float | None = None


def last_event_id(ledger: Ledger) -> int:
    """The newest audit event's id (0 for an empty ledger): where counting starts."""
    return int(ledger.scalar("SELECT coalesce(max(id), 0) FROM events"))


def happenings_after(ledger: Ledger, after_id: int, limit: int = 20000) -> tuple[list[Happening], int]:
    """The countable events with id > ``after_id`` (at most ``limit`` events read), and the
    cursor to pass next time. Reads ``events`` by primary key and each event's run."""
    rows = ledger.query(
        "SELECT e.id, e.at, e.kind, e.job, e.to_state, e.detail, r.trigger, r.not_before, r.started_at, r.ended_at"
        " FROM events e LEFT JOIN runs r ON r.id = e.run_id WHERE e.id > ? ORDER BY e.id LIMIT ?",
        (after_id, limit))
    out: list[Happening] = []
    cursor = after_id
    for r in rows:
        cursor = int(r["id"])
        kind, job = r["kind"], r["job"] or ""
        if kind == AuditEvent.TRANSITION and r["to_state"] in _TERMINAL:
            started, ended = r["started_at"], r["ended_at"] if r["ended_at"] is not None else r["at"]
            out.append(Happening(cursor, "ended", job, state=r["to_state"],
                                 duration_s=None if started is None else max(0.0, float(ended) - float(started))))
        elif kind == AuditEvent.TRANSITION and r["to_state"] == RunState.SPAWNED and r["trigger"] == Trigger.SCHEDULE \
                and r["not_before"] is not None:
            out.append(Happening(cursor, "spawned", job, lag_s=max(0.0, float(r["at"]) - float(r["not_before"]))))
        elif kind in (AuditEvent.JUDGE_ERROR, AuditEvent.JUDGE_REJECTED):
            out.append(Happening(cursor, str(kind), job))
        elif kind == AuditEvent.VERDICT:
            try:
                judged_by = (json.loads(r["detail"] or "{}") or {}).get("judged_by") or ""
            except (ValueError, AttributeError):
                judged_by = ""
            if "claude" in str(judged_by):
                out.append(Happening(cursor, "judge_answered", job))
    return out, cursor
