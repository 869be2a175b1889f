"""Who watches the watcher: runner heartbeats and the "runner gap".

A runner gap is the time since the last heartbeat of any runner when no runner is alive
(see ``core.liveness.runner_liveness``: fresh heartbeat and, on this host, a live process).
It is a finding: the supervisor escalates it, the console shows it, ``watchkeeper status``
says it plainly ("no runner since 04:12, 7m ago").

A gap is *expected* to be filled when the most recent runner did not record a clean stop
(it crashed, was SIGKILLed, or stalled): then whoever notices — ``watchkeeper sweep`` from
cron, a console, ``tail``, or the next runner after the fact — opens or updates the one
``runner_gap`` escalation (``check_gap`` / ``record_gap_after``). After a clean stop nobody
is expected to run jobs, so nothing pages. The escalation resolves once a runner heartbeats
again; its reason and its ``escalation_opened``/``escalation_updated`` events keep the record.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from core import liveness
from core.ledger import escalations, hosts
from core.ledger.connection import Conn, Ledger, add_event, row_dict
from core.ledger.jobs import paused_jobs
from core.ledger.lifecycle import LIVE, NON_TERMINAL
from core.ledger.records import Run, Runner
from core.liveness import RunnerLiveness
from core.text import age, safe_text, short_age, utc_hms
from core.vocabulary import AuditEvent, EscalationKind, sql_set

_NON_TERMINAL_SQL = ", ".join(f"'{s.value}'" for s in sorted(NON_TERMINAL))
_LIVE_SQL = sql_set(LIVE)

#: ``escalations.job`` of runner-level escalations (not about one job).
RUNNER_JOB = "(runner)"
#: Escalation kind of a runner gap.
GAP_KIND = EscalationKind.RUNNER_GAP


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
    """"no runner since 04:12, 7m ago" (local wall time; the span in ``short_age``'s one
    style); for ``since`` None,
    "no runner has ever run on this ledger"."""
    if since is None:
        return "no runner has ever run on this ledger"
    when = datetime.fromtimestamp(since).strftime("%H:%M" if now - since < 86400 else "%Y-%m-%d %H:%M")
    return f"no runner since {when}, {short_age(now - since)} ago"


def runners(ledger: Ledger, *, now: float | None = None, limit: int = 20) -> list[RunnerStatus]:
    """The ``limit`` runners with the most recent heartbeats (table ``runners``), newest first,
    each judged at ``now`` (Unix seconds, default now)."""
    now = time.time() if now is None else now
    host = liveness.hostname()
    rows = ledger.query("SELECT * FROM runners ORDER BY heartbeat_at DESC LIMIT ?", (int(limit),))
    counts = {r["runner_id"]: r["n"] for r in ledger.query(
        f"SELECT runner_id, count(*) AS n FROM runs WHERE state IN {sql_set(LIVE)}"
        " AND runner_id IS NOT NULL GROUP BY runner_id")}
    out = []
    for r in rows:
        d = row_dict(r)
        out.append(RunnerStatus(
            id=d["id"], hostname=d["hostname"], pid=d["pid"], started_at=d["started_at"],
            heartbeat_at=d["heartbeat_at"], heartbeat_s=d["heartbeat_s"], lease_s=d["lease_s"],
            stopped_at=d["stopped_at"], stop_reason=d["stop_reason"],
            liveness=liveness.runner_liveness(Runner.from_row(d), now=now, this_host=host).value, live_runs=counts.get(d["id"], 0)))
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
    if any(liveness.runner_liveness(Runner.from_row(row_dict(r)), now=now, this_host=host) is RunnerLiveness.ALIVE
           for r in fresh):
        return None
    last = ledger.one("SELECT heartbeat_at, stopped_at FROM runners ORDER BY heartbeat_at DESC LIMIT 1")
    since = None if last is None else float(last["heartbeat_at"])
    return RunnerGap(since=since, seconds=None if since is None else now - since,
                     stopped_cleanly=last is not None and last["stopped_at"] is not None,
                     text=gap_text(since, now))


#: A gone runner whose last heartbeat is older than this (seconds) is long dead: ``status``
#: leaves it out unless asked for ``--all`` (the newest runner is always shown).
LONG_DEAD_S = 86400.0
#: Most runners ``status --all`` lists.
ALL_RUNNERS_LIMIT = 1000


def status(ledger: Ledger, *, now: float | None = None, all_runners: bool = False,
           host: str | None = None) -> dict[str, Any]:
    """Everything ``watchkeeper status`` shows, as JSON-ready data:
    ``{"at", "runners": [RunnerStatus dict], "hidden": int, "gap": RunnerGap dict | None,
    "runs": {state: count} for non-terminal states, "stalled": [runner id],
    "paused": [{name, paused_at, paused_by, pause_reason}] (``core.ledger.jobs.paused_jobs``)}``.

    ``runners`` lists each runner once, newest heartbeat first: every runner alive, stalled,
    holding live runs or heard from within ``LONG_DEAD_S``, and always the newest one; the
    others are counted in ``hidden`` unless ``all_runners`` (then up to ``ALL_RUNNERS_LIMIT``).
    ``hosts``: the fleet's hosts (``core.ledger.hosts.Host`` dicts: up, runners, live runs).
    ``host``: only that host's runners and host entry."""
    now = time.time() if now is None else now
    rs = [r for r in runners(ledger, now=now, limit=ALL_RUNNERS_LIMIT) if host is None or r.hostname == host]
    with ledger.read() as conn:
        fleet = [h.to_dict() for h in hosts.fleet(conn, now=now) if host is None or h.name == host]
    if all_runners:
        shown, hidden = rs, 0
    else:
        shown = [r for i, r in enumerate(rs) if i == 0 or r.liveness != RunnerLiveness.GONE or r.live_runs
                 or now - r.heartbeat_at <= LONG_DEAD_S]
        hidden = len(rs) - len(shown)
    gap = runner_gap(ledger, now=now)
    counts = {r["state"]: r["n"] for r in ledger.query(
        f"SELECT state, count(*) AS n FROM runs WHERE state IN ({_NON_TERMINAL_SQL}) GROUP BY state")}
    return {"at": now, "runners": [r.to_dict() for r in shown], "hidden": hidden,
            "gap": gap.to_dict() if gap else None, "runs": counts,
            "stalled": [r.id for r in rs if r.liveness == RunnerLiveness.STALLED], "paused": paused_jobs(ledger),
            "hosts": fleet}


def format_status(st: dict[str, Any]) -> list[str]:
    """Plain lines for ``status(...)``: the gap (if any) first, then one line per runner."""
    now = st["at"]
    lines = []
    # A host whose newest runner stopped cleanly was stopped on purpose: "stopped", never "down".
    down = [h for h in st.get("hosts") or [] if not h["up"] and not h.get("stopped_cleanly")]
    if st["gap"]:
        lines.append(st["gap"]["text"])
    elif down:
        # A live runner elsewhere does not make a dead host fine: say it on the first line.
        lines.append(safe_text("runner: ok; host(s) down: " + ", ".join(
            f"{h['name']} (last heartbeat {short_age(now - h['since'])} ago)" for h in down)))
    else:
        lines.append("runner: ok")
    idw = max((len(r["id"]) for r in st["runners"]), default=0)
    for r in st["runners"]:
        beat = short_age(now - r["heartbeat_at"])
        extra = ""
        if r["liveness"] == RunnerLiveness.STALLED:
            extra = " (process alive, heartbeat stale: stalled; its runs are left alone)"
        elif r["stopped_at"]:
            extra = f" (stopped: {r['stop_reason'] or 'stopped'})"
        # Gone by a clean stop is "stopped", as its host's line says; "gone" is a crash or a kill.
        word = "stopped" if r["stopped_at"] and r["liveness"] == RunnerLiveness.GONE else r["liveness"]
        lines.append(f"  {r['id']:<{idw}}  {word:<7} {r['hostname']}:{r['pid']}  last heartbeat {beat} ago,"
                     f" lease {r['lease_s']:g}s, {r['live_runs']} live run(s){extra}")
    if st.get("hidden"):
        lines.append(f"  … {st['hidden']} runner(s) gone for more than {short_age(LONG_DEAD_S)} not shown (--all)")
    if len(st.get("hosts") or []) > 1 or down:
        lines.append("hosts:")
        for h in st["hosts"]:
            alive = sum(1 for _, live in h["runners"] if live != RunnerLiveness.GONE)
            word = "up" if h["up"] else "stopped" if h.get("stopped_cleanly") else "down"
            lines.append(safe_text(f"  {h['name']:<16} {word:<7}  {alive}/{len(h['runners'])}"
                                   f" runner(s) alive, last heartbeat {short_age(now - h['since'])} ago,"
                                   f" {len(h['live_runs'])} live run(s)"))
    runs = st["runs"]
    lines.append("runs: " + (", ".join(f"{n} {s}" for s, n in sorted(runs.items())) if runs else "none in flight"))
    for p in st.get("paused") or []:
        by = str(p["paused_by"] or "?").removeprefix("operator:")
        # Names and reasons are operator text: shown through the one escaper.
        lines.append(safe_text(f"paused: {p['name']} by {by} {short_age(now - p['paused_at'])}"
                               " ago" + (f" ({p['pause_reason']})" if p.get("pause_reason") else "")))
    return lines


# -- the runner-gap escalation ----------------------------------------------------------------

def _gap_subject(row: dict[str, Any], state: RunnerLiveness) -> str:
    how = {RunnerLiveness.GONE: "its process is gone (crash, kill -9, OOM, reboot)",
           RunnerLiveness.STALLED: "its process is alive but stalled (stopped, blocked or swapping)"}.get(
        state, "its heartbeat is stale")
    return (f"runner {row['id']} on {row['hostname']} (pid {row['pid']}) last heartbeat at "
            f"{utc_hms(row['heartbeat_at'])}; {how}")


def check_gap(conn: Conn, *, sinks: Sequence[Any] = (), owner: str | None = None,
              now: float | None = None, actor: str = "supervisor") -> str | None:
    """Inside a write transaction: open the ``runner_gap`` escalation when no runner is alive
    while one is expected (the most recent runner, by heartbeat, never recorded a clean stop),
    or resolve the open one once a runner is alive again.

    Reads table ``runners`` (judged with ``core.liveness.runner_liveness``, so a SIGKILLed
    runner on this host counts as gone at once, without waiting for its lease). Opening
    enqueues one ``notifications`` row per sink (``core.ledger.outbox``); the owner recorded
    on the escalation is the gone runner's ``runners.owner``, else ``owner``. ``now`` is Unix seconds. Returns ``"opened"``, ``"resolved"`` or None.
    """
    ts = time.time() if now is None else now
    host = liveness.hostname()
    rows = [row_dict(r) for r in conn.execute(
        "SELECT * FROM runners ORDER BY heartbeat_at DESC LIMIT 50").fetchall()]
    judged = [(r, liveness.runner_liveness(Runner.from_row(r), now=ts, this_host=host)) for r in rows if r is not None]
    alive = [r for r, st in judged if st is RunnerLiveness.ALIVE]
    active = conn.execute("SELECT 1 FROM escalations WHERE dedup_key = ? AND state != 'resolved'",
                          (escalations.dedup_key(RUNNER_JOB, GAP_KIND),)).fetchone()
    if alive:
        if not active:
            return None
        got = escalations.auto_resolve(conn, RUNNER_JOB, [GAP_KIND], run_id=None, sinks=sinks, now=ts,
                                       actor=actor, reason=f"runner {alive[0]['id']} heartbeating again")
        return "resolved" if got else None
    if not judged or active:
        return None
    last, state = judged[0]
    if last["stopped_at"] is not None:
        return None  # stopped cleanly by someone: no runner is expected, nothing to page about
    reason = f"no runner is running jobs: {_gap_subject(last, state)}"
    # The gone runner's own owner wins: a sweep without settings, ``tail`` or a console must
    # page the same person the runner's settings name.
    escalations.raise_escalation(conn, job=RUNNER_JOB, kind=GAP_KIND, severity="critical", reason=reason,
                                 run_id=None, owner=last.get("owner") or owner, sinks=sinks, now=ts, actor=actor)
    return "opened"


@dataclass(frozen=True)
class PastGap:
    """A gap a starting runner found behind it: the previous runner (``runners`` row
    ``previous``) vanished without a clean stop. ``since``: its last heartbeat, ``until``: the
    new runner's start (Unix seconds); ``seconds`` = until − since."""

    previous: Runner
    since: float
    until: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.until - self.since)


def past_gap(ledger: Ledger, *, runner_id: str, started_at: float) -> PastGap | None:
    """The gap before runner ``runner_id`` (which started at ``started_at``, Unix seconds):
    the most recent other runner, when it never recorded a clean stop and no other runner is
    alive. None otherwise (first runner ever, a clean stop, or another runner still alive).
    Reads table ``runners``; never writes."""
    host = liveness.hostname()
    rows = ledger.rows(
        "SELECT * FROM runners WHERE id != ? ORDER BY heartbeat_at DESC LIMIT 50", (runner_id,))
    rows = [r for r in rows if r is not None]
    if not rows:
        return None
    if any(liveness.runner_liveness(Runner.from_row(r), now=started_at, this_host=host) is RunnerLiveness.ALIVE for r in rows):
        return None
    last = rows[0]
    if last["stopped_at"] is not None:
        return None
    return PastGap(previous=Runner.from_row(last), since=float(last["heartbeat_at"]), until=started_at)


def record_gap_after(conn: Conn, gap: PastGap, *, runner_id: str, slots: list[dict[str, Any]],
                     sinks: Sequence[Any] = (), owner: str | None = None, now: float | None = None,
                     severity: str = "warning") -> int:
    """Inside a write transaction: open (or update the already open) ``runner_gap``
    escalation for a gap found after the fact by runner ``runner_id``, and append a
    ``runner_gap_recorded`` event with the structured record.

    ``slots``: one dict per job with slots that fell inside the gap and were not run
    (``core.sweep.watch.slots_in_gap``), ``{"job", "slots": [ISO UTC, the newest ones],
    "count", "truncated": count > len(slots), "policy": "skip" | "run_once", "outcome"}``. The reason says how long, from when to when (UTC) and what fell in it. An
    escalation already open (``watchkeeper sweep`` saw the gap live) keeps its higher severity.
    Returns the escalation id.
    """
    ts = time.time() if now is None else now
    prev = gap.previous
    parts = [f"no runner from {utc_hms(gap.since)} to {utc_hms(gap.until)}"
             f" ({age(gap.seconds)}): runner {prev.id} on {prev.hostname}"
             f" (pid {prev.pid}) stopped heartbeating without a clean stop"]
    if slots:
        parts.append("; ".join(f"{s['job']}: {s['count']} slot(s) {s['outcome']} (misfire={s['policy']})"
                               for s in slots[:20]) + ("; …" if len(slots) > 20 else ""))
    else:
        parts.append("no scheduled slot fell in the gap")
    reason = "; ".join(parts)
    esc_id, _ = escalations.raise_escalation(conn, job=RUNNER_JOB, kind=GAP_KIND, severity=severity,
                                             reason=reason, run_id=None, owner=owner, sinks=sinks, now=ts,
                                             actor=f"runner:{runner_id}")
    add_event(conn, actor=f"runner:{runner_id}", kind=AuditEvent.RUNNER_GAP_RECORDED, reason=reason[:500],
              detail={"escalation_id": esc_id, "previous_runner": prev.id, "from": gap.since, "to": gap.until,
                      "seconds": round(gap.seconds, 3), "slots": slots[:200]}, at=ts)
    return esc_id


def owners_of_live_runs(conn: Conn) -> dict[str, dict[str, Any]]:
    """``runners`` rows (as dicts, by id) of every runner that owns a live run (spawned,
    running or verifying): what the sweep and doctor judge those runs' owners by."""
    return {r["id"]: {k: r[k] for k in r.keys()} for r in conn.execute(
        f"SELECT * FROM runners WHERE id IN (SELECT DISTINCT runner_id FROM runs WHERE state IN {sql_set(LIVE)})")}


# -- the runner's own row (written by core.runner) ------------------------------------------
def register_runner(conn: Conn, *, runner_id: str, hostname: str, pid: int,
                    pid_create_time: float | None, heartbeat_s: float, lease_s: float, version: str,
                    spec_dir: str, actor: str, now: float | None = None, owner: str | None = None,
                    boot_id: str | None = None, labels: Sequence[str] = ()) -> None:
    """Insert this runner's ``runners`` row (heartbeat = start time) and its
    ``runner_started`` event; call inside a write transaction. ``hostname`` and ``boot_id``
    (``core.liveness.boot_id``) name its host life. ``owner`` (its settings'
    ``runner_owner``) owns the ``runner_gap`` escalation whoever opens it."""
    now = time.time() if now is None else now
    conn.execute(
        "INSERT INTO runners (id, hostname, pid, pid_create_time, started_at, heartbeat_at, heartbeat_s,"
        " lease_s, version, owner, boot_id, labels) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (runner_id, hostname, pid, pid_create_time, now, now, heartbeat_s, lease_s, version, owner, boot_id,
         json.dumps(list(labels)) if labels else None))
    add_event(conn, actor=actor, kind=AuditEvent.RUNNER_STARTED, detail={"pid": pid, "spec_dir": spec_dir})


#: A heartbeat renews a run's lease once a sixth of it has passed (``lease_until`` less than
#: this share of ``lease_s`` ahead). A run that started moments ago keeps the fresh lease its
#: start wrote, so the heartbeat leaves its row alone while the writer moves it on: on
#: PostgreSQL renewing every live run took the row locks of runs mid-transition, deadlocked
#: with the writer's group commits and made them fail serialization and run again, which
#: held every runner of a fleet back (two runners were no faster than one). With heartbeat at
#: most a third of the lease (settings), a lease has a sixth of it left after one missed beat.
RENEW_LEFT = 5 / 6


def renew(conn: Conn, runner_id: str, run_ids: Iterable[int], *, lease_s: float,
          now: float | None = None) -> int:
    """One heartbeat: ``runners.heartbeat_at`` = now (Unix seconds), and ``runs.lease_until``
    = now + ``lease_s`` for every live run of ``runner_id`` among ``run_ids`` whose lease
    has less than ``RENEW_LEFT`` of ``lease_s`` left, in ONE statement however many runs are
    live (their ids go in as one JSON array). Returns how many leases were renewed. Call
    inside a write transaction."""
    now = time.time() if now is None else now
    conn.execute("UPDATE runners SET heartbeat_at = ? WHERE id = ?", (now, runner_id))
    cur = conn.execute(
        f"UPDATE runs SET lease_until = ? WHERE runner_id = ? AND state IN {_LIVE_SQL}"
        " AND (lease_until IS NULL OR lease_until < ?) AND id IN (SELECT value FROM json_each(?))",
        (now + lease_s, runner_id, now + lease_s * RENEW_LEFT, json.dumps(sorted(run_ids))))
    return int(cur.rowcount)


def record_stopped(conn: Conn, runner_id: str, *, actor: str, left_running: list[int],
                   reason: str = "clean shutdown", now: float | None = None,
                   detail: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Mark runner ``runner_id`` stopped (``runners.stopped_at``, ``stop_reason`` = ``reason``,
    e.g. "SIGTERM (systemd stop)") with its attributed ``runner_stopped`` event naming the runs
    it left running (``detail.left_running``, plus ``left``: ``[{id, job, task, attempt,
    pid}]`` and the caller's ``detail``: signal, user, systemd unit); call inside a write
    transaction. Returns ``left`` (from table ``runs``) for the operator's screen."""
    now = time.time() if now is None else now
    conn.execute("UPDATE runners SET stopped_at = ?, stop_reason = ? WHERE id = ?", (now, reason, runner_id))
    left: list[dict[str, Any]] = []
    if left_running:
        marks = ",".join("?" * len(left_running))
        left = [{"id": r["id"], "job": r["job"], "task": r["task"], "attempt": r["attempt"], "pid": r["pid"]}
                for r in conn.execute(f"SELECT id, job, task, attempt, pid FROM runs WHERE id IN ({marks})"
                                      " ORDER BY id", tuple(left_running)).fetchall()]
    text = (f"{reason}: {len(left_running)} run(s) left running under their monitors for the next runner"
            " to re-attach"
            if left_running else f"{reason}: clean stop, nothing left running")
    add_event(conn, actor=actor, kind=AuditEvent.RUNNER_STOPPED, reason=text,
              detail={**(detail or {}), "stop_reason": reason, "left_running": left_running, "left": left}, at=now)
    return left


def reattach_run(conn: Conn, run: Run | Mapping[str, Any], *, runner_id: str, lease_s: float,
                 reason: str, now: float | None = None) -> bool:
    """Inside a write transaction: runner ``runner_id`` takes over the live run ``run`` (a
    ``Run``, or a ``runs`` mapping with its columns) that an earlier runner
    of this host left behind; compare-and-set on (state, attempt, previous runner), so two
    starting runners never both take it. Renews its lease (``lease_s`` seconds) and appends a
    ``reattached`` event (``reason``: what the new runner found: still running, or ended while
    no runner was there). Returns whether it was taken."""
    at = time.time() if now is None else now
    if not isinstance(run, Run):
        run = Run.from_row(run)
    cur = conn.execute("UPDATE runs SET runner_id = ?, lease_until = ? WHERE id = ? AND attempt = ? AND state = ?"
                       " AND runner_id = ?", (runner_id, at + lease_s, run.id, run.attempt, run.state,
                                               run.runner_id))
    if cur.rowcount != 1:
        return False
    add_event(conn, actor=f"runner:{runner_id}", kind=AuditEvent.REATTACHED, run_id=run.id, job=run.job,
              attempt=run.attempt, reason=reason, detail={"previous_runner": run.runner_id}, at=at)
    return True
