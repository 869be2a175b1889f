"""Who watches the watcher: runner heartbeats and the "runner gap".

A runner gap is the time since the last heartbeat of any runner when no runner is alive
(see ``core.liveness.runner_liveness``: fresh heartbeat and, on this host, a live process).
It is a finding: the supervisor escalates it, the console shows it, ``watchkeeper status``
says it plainly ("no runner since 04:12, 7 minutes ago").
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import humanize

from core import liveness
from core.ledger.connection import Ledger, row_dict
from core.ledger.jobs import paused_jobs
from core.ledger.lifecycle import NON_TERMINAL
from core.liveness import RunnerLiveness
from core.spec.model import safe_text

_NON_TERMINAL_SQL = ", ".join(f"'{s.value}'" for s in sorted(NON_TERMINAL))


@dataclass(frozen=True)
class RunnerStatus:
    """One ``runners`` row judged now. Times are Unix seconds; ``liveness`` is
    ``alive`` | ``stalled`` | ``gone``; ``live_runs`` counts its spawned/running/verifying runs."""

    id: str
    hostname: str
    pid: int
    started_at: float
    heartbeat_at: float
    heartbeat_s: float
    lease_s: float
    stopped_at: float | None
    stop_reason: str | None
    liveness: str
    live_runs: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunnerGap:
    """No runner is alive. ``since``: last heartbeat of any runner (Unix seconds, None if no
    runner ever ran); ``seconds``: now − since; ``stopped_cleanly``: the most recent runner
    recorded a clean stop (an operator stopped it) rather than vanishing; ``text``: one
    line for people."""

    since: float | None
    seconds: float | None
    stopped_cleanly: bool
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gap_text(since: float | None, now: float) -> str:
    """"no runner since 04:12, 7 minutes ago" (local wall time); for ``since`` None,
    "no runner has ever run on this ledger"."""
    if since is None:
        return "no runner has ever run on this ledger"
    when = datetime.fromtimestamp(since).strftime("%H:%M" if now - since < 86400 else "%Y-%m-%d %H:%M")
    return f"no runner since {when}, {humanize.naturaldelta(max(0.0, now - since))} ago"


def runners(ledger: Ledger, *, now: float | None = None, limit: int = 20) -> list[RunnerStatus]:
    """The ``limit`` runners with the most recent heartbeats (table ``runners``), newest first,
    each judged at ``now`` (Unix seconds, default now)."""
    now = time.time() if now is None else now
    host = liveness.hostname()
    rows = ledger.query("SELECT * FROM runners ORDER BY heartbeat_at DESC LIMIT ?", (int(limit),))
    counts = {r["runner_id"]: r["n"] for r in ledger.query(
        "SELECT runner_id, count(*) AS n FROM runs WHERE state IN ('spawned','running','verifying')"
        " AND runner_id IS NOT NULL GROUP BY runner_id")}
    out = []
    for r in rows:
        d = row_dict(r)
        out.append(RunnerStatus(
            id=d["id"], hostname=d["hostname"], pid=d["pid"], started_at=d["started_at"],
            heartbeat_at=d["heartbeat_at"], heartbeat_s=d["heartbeat_s"], lease_s=d["lease_s"],
            stopped_at=d["stopped_at"], stop_reason=d["stop_reason"],
            liveness=liveness.runner_liveness(d, now=now, this_host=host).value, live_runs=counts.get(d["id"], 0)))
    return out


def runner_gap(ledger: Ledger, *, now: float | None = None) -> RunnerGap | None:
    """The current runner gap, or None while at least one runner is alive.

    Reads table ``runners`` only (bounded: fresh rows plus the latest one). ``now`` is Unix
    seconds (default now). Never writes.
    """
    now = time.time() if now is None else now
    host = liveness.hostname()
    fresh = ledger.query("SELECT * FROM runners WHERE stopped_at IS NULL AND heartbeat_at + lease_s >= ?"
                         " ORDER BY heartbeat_at DESC LIMIT 50", (now,))
    if any(liveness.runner_liveness(row_dict(r), now=now, this_host=host) is RunnerLiveness.ALIVE
           for r in fresh):
        return None
    last = ledger.one("SELECT heartbeat_at, stopped_at FROM runners ORDER BY heartbeat_at DESC LIMIT 1")
    since = None if last is None else float(last["heartbeat_at"])
    return RunnerGap(since=since, seconds=None if since is None else now - since,
                     stopped_cleanly=last is not None and last["stopped_at"] is not None,
                     text=gap_text(since, now))


def status(ledger: Ledger, *, now: float | None = None) -> dict[str, Any]:
    """Everything ``watchkeeper status`` shows, as JSON-ready data:
    ``{"at", "runners": [RunnerStatus dict], "gap": RunnerGap dict | None,
    "runs": {state: count} for non-terminal states, "stalled": [runner id],
    "paused": [{name, paused_at, paused_by, pause_reason}] (``core.ledger.jobs.paused_jobs``)}``."""
    now = time.time() if now is None else now
    rs = runners(ledger, now=now)
    gap = runner_gap(ledger, now=now)
    counts = {r["state"]: r["n"] for r in ledger.query(
        f"SELECT state, count(*) AS n FROM runs WHERE state IN ({_NON_TERMINAL_SQL}) GROUP BY state")}
    return {"at": now, "runners": [r.to_dict() for r in rs], "gap": gap.to_dict() if gap else None,
            "runs": counts, "stalled": [r.id for r in rs if r.liveness == RunnerLiveness.STALLED],
            "paused": paused_jobs(ledger)}


def format_status(st: dict[str, Any]) -> list[str]:
    """Plain lines for ``status(...)``: the gap (if any) first, then one line per runner."""
    now = st["at"]
    lines = []
    if st["gap"]:
        lines.append(st["gap"]["text"])
    else:
        lines.append("runner: ok")
    for r in st["runners"]:
        beat = humanize.naturaldelta(max(0.0, now - r["heartbeat_at"]))
        extra = ""
        if r["liveness"] == RunnerLiveness.STALLED:
            extra = " (process alive, heartbeat stale: stalled; its runs are left alone)"
        elif r["stopped_at"]:
            extra = f" (stopped: {r['stop_reason'] or 'stopped'})"
        lines.append(f"  {r['id']}  {r['liveness']:<7} {r['hostname']}:{r['pid']}  last heartbeat {beat} ago,"
                     f" lease {r['lease_s']:g}s, {r['live_runs']} live run(s){extra}")
    runs = st["runs"]
    lines.append("runs: " + (", ".join(f"{n} {s}" for s, n in sorted(runs.items())) if runs else "none in flight"))
    for p in st.get("paused") or []:
        by = str(p["paused_by"] or "?").removeprefix("operator:")
        # Names and reasons are operator text: shown through the one escaper.
        lines.append(safe_text(f"paused: {p['name']} by {by} {humanize.naturaldelta(max(0.0, now - p['paused_at']))}"
                               " ago" + (f" ({p['pause_reason']})" if p.get("pause_reason") else "")))
    return lines
