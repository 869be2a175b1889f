"""The fleet's hosts, read from the runners that ran on them, and the ``host_down`` escalation.

A *host* is a hostname in ``runners.hostname``. It is up while one of its runners is alive
(``core.liveness.runner_liveness``: from another host that is a fresh heartbeat within the
lease, nothing else). It is *down* when every runner it had stopped heartbeating without a
clean stop, while a runner elsewhere is alive to say so: a lone host that dies is the
``runner_gap`` (and the ``[deadman]`` ping's) to report, never a second page.

``check_hosts`` runs in every runner's periodic pass, so whichever runner survives opens
one ``host_down`` escalation per down host (job ``(host <name>)``, dedup on it: opened once
however many runners see it), listing since when, its live runs and the jobs pinned to it;
its outbox rows are delivered by whichever runner claims them first
(``core.ledger.outbox.claim``). A runner of that host heartbeating again resolves it. A job
pinned (``host = …``) only to hosts that are down gets its own ``host_down`` escalation:
nothing in the fleet will run its slots.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from core import liveness
from core.ledger import escalations
from core.ledger.connection import Conn, row_dict
from core.ledger.lifecycle import LIVE, State
from core.ledger.records import Runner
from core.liveness import RunnerLiveness
from core.text import utc_hms
from core.vocabulary import EscalationKind, sql_set

KIND = EscalationKind.HOST_DOWN
#: A host whose newest heartbeat is older than this (seconds) is a retired machine, not a
#: down one: never escalated, and ``status`` leaves it out.
RETIRED_S = 86400.0
#: Most runners read to judge the fleet (newest heartbeat first).
RUNNERS_READ = 500


def host_job(host: str) -> str:
    """``escalations.job`` of a host's ``host_down``: ``(host db1)``."""
    return f"(host {host})"


@dataclass(frozen=True)
class Host:
    """One hostname's runners judged at one time. ``up``: one of them is alive (or stalled:
    its process is there); ``since``: the newest heartbeat of any of them (Unix seconds);
    ``stopped_cleanly``: its newest runner recorded a clean stop; ``runners``: their ids,
    newest first, with their liveness; ``live_runs``: ids of live runs its runners own;
    ``labels``: the labels its runners declared; ``up_since``: when the longest-running of
    its live runners started (Unix seconds; None while down); ``lease_s``: its newest
    runner's lease, seconds."""

    name: str
    up: bool
    since: float
    stopped_cleanly: bool
    runners: list[tuple[str, str]] = field(default_factory=list)
    live_runs: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    up_since: float | None = None
    lease_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fleet(conn: Conn, *, now: float | None = None, this_host: str | None = None) -> list[Host]:
    """Every host heard from within ``RETIRED_S`` (table ``runners``, their live runs from
    ``runs``), sorted by name. ``now`` is Unix seconds. Never writes."""
    ts = time.time() if now is None else now
    rows = [row_dict(r) for r in conn.execute(
        "SELECT * FROM runners WHERE heartbeat_at >= ? ORDER BY heartbeat_at DESC LIMIT ?",
        (ts - RETIRED_S, RUNNERS_READ)).fetchall()]
    runs: dict[str, list[int]] = {}
    for r in conn.execute(f"SELECT id, runner_id FROM runs WHERE state IN {sql_set(LIVE)}"
                          " AND runner_id IS NOT NULL ORDER BY id").fetchall():
        runs.setdefault(r["runner_id"], []).append(int(r["id"]))
    by_host: dict[str, list[tuple[Runner, RunnerLiveness]]] = {}
    for row in rows:
        runner = Runner.from_row(row)
        by_host.setdefault(runner.hostname, []).append(
            (runner, liveness.runner_liveness(runner, now=ts, this_host=this_host)))
    out = []
    for name, judged in sorted(by_host.items()):
        newest = judged[0][0]
        labels = sorted({lb for r, _ in judged for lb in (r.labels or [])})
        starts = [float(r.started_at) for r, st in judged if st is not RunnerLiveness.GONE]
        out.append(Host(name=name, up=any(st is not RunnerLiveness.GONE for _, st in judged),
                        since=float(newest.heartbeat_at), stopped_cleanly=newest.stopped_at is not None,
                        runners=[(r.id, st.value) for r, st in judged],
                        live_runs=sorted(i for r, _ in judged for i in runs.get(r.id, [])), labels=labels,
                        up_since=min(starts) if starts else None, lease_s=float(newest.lease_s)))
    return out


def pinned_jobs(conn: Conn) -> dict[str, list[str]]:
    """Enabled jobs pinned to hosts (their spec's ``host``): ``{job: [hostname or label]}``."""
    out: dict[str, list[str]] = {}
    for r in conn.execute("SELECT name, spec FROM jobs WHERE enabled = 1 ORDER BY name").fetchall():
        try:
            pin = json.loads(r["spec"]).get("host")
        except (ValueError, TypeError, AttributeError):
            continue
        if pin:
            out[r["name"]] = [pin] if isinstance(pin, str) else [str(p) for p in pin]
    return out


def runs_at_death(conn: Conn, host: Host) -> list[int]:
    """Ids of the runs a down host's runners had when they fell silent: those still live, and
    those the surviving runners already orphaned by lease since its last heartbeat (a lease
    may run out before the host is declared down, and the page must still name them)."""
    ids = [r for r, _ in host.runners]
    if not ids:
        return list(host.live_runs)
    marks = ", ".join("?" for _ in ids)
    lost = [int(r["id"]) for r in conn.execute(
        f"SELECT id FROM runs WHERE state = ? AND runner_id IN ({marks}) AND ended_at >= ? ORDER BY id",
        (str(State.ORPHANED), *ids, host.since)).fetchall()]
    return sorted({*host.live_runs, *lost})


def down_reason(host: Host, pinned: Sequence[str]) -> str:
    """One line for a down host: since when, its runners, the runs they had (``runs_at_death``),
    the jobs pinned to it."""
    runs = ", ".join(str(i) for i in host.live_runs[:20]) + (", …" if len(host.live_runs) > 20 else "")
    # The newest runner is the one that fell silent; earlier ones stopped or died before it.
    who = host.runners[0][0] if host.runners else "-"
    if len(host.runners) > 1:
        who += f" (and {len(host.runners) - 1} earlier runner(s) of that host)"
    return (f"host {host.name} down: no heartbeat from its runner {who}"
            f" since {utc_hms(host.since)}; its runs "
            + (f"{runs} (the surviving runners orphan each as its lease runs out)" if runs else "none")
            + f"; pinned jobs {', '.join(pinned) or 'none'}")


def check_hosts(conn: Conn, *, sinks: Sequence[Any] = (), owner: str | None = None, now: float | None = None,
                actor: str = "supervisor", this_host: str | None = None) -> dict[str, list[str]]:
    """Inside a write transaction: open ``host_down`` for each host that is down while
    another has been up for a lease (not after a clean stop of its newest runner), and for
    each enabled job pinned only to down hosts (not when they all stopped cleanly); resolve those whose host (or one of the job's hosts) is up
    again. The owner is the host's newest runner's ``runners.owner``, else ``owner``.
    Returns ``{"opened": [job], "resolved": [job]}`` (``(host db1)`` or a job's name)."""
    ts = time.time() if now is None else now
    hosts = fleet(conn, now=ts, this_host=this_host)
    out: dict[str, list[str]] = {"opened": [], "resolved": []}
    if not hosts:
        return out
    # A runner that has just started has not yet heard from the hosts starting beside it (a
    # fleet coming up, a power cut's return): nothing is declared down, nor a pinned job
    # stranded, until one live runner has been up for a lease, long enough for every host
    # starting with it to heartbeat once.
    anyone_up = any(h.up and h.up_since is not None and ts - h.up_since >= h.lease_s for h in hosts)
    pins = pinned_jobs(conn)
    open_jobs = {r["job"] for r in conn.execute(
        "SELECT job FROM escalations WHERE kind = ? AND state != 'resolved'", (str(KIND),)).fetchall()}

    def serves(h: Host, names: Sequence[str]) -> bool:
        return h.name in names or bool(set(h.labels) & set(names))

    for h in hosts:
        job = host_job(h.name)
        if h.up:
            if job in open_jobs and escalations.auto_resolve(
                    conn, job, [KIND], run_id=None, sinks=sinks, now=ts, actor=actor,
                    reason=f"host {h.name}: a runner heartbeats again"):
                out["resolved"].append(job)
        elif anyone_up and not h.stopped_cleanly and job not in open_jobs:
            mine = [j for j, names in pins.items() if serves(h, names)]
            who = conn.execute("SELECT owner FROM runners WHERE hostname = ? ORDER BY heartbeat_at DESC LIMIT 1",
                               (h.name,)).fetchone()
            escalations.raise_escalation(conn, job=job, kind=KIND, severity="critical",
                                         reason=down_reason(replace(h, live_runs=runs_at_death(conn, h)), mine),
                                         run_id=None,
                                         owner=(who["owner"] if who else None) or owner, sinks=sinks, now=ts,
                                         actor=actor)
            out["opened"].append(job)
    for j, names in pins.items():
        serving = [h for h in hosts if serves(h, names)]
        if serving and all(h.stopped_cleanly and not h.up for h in serving):
            continue  # stopped by an operator, not down: its slots wait for it, and nobody is paged
        if any(h.up for h in serving):
            if j in open_jobs and escalations.auto_resolve(conn, j, [KIND], run_id=None, sinks=sinks, now=ts,
                                                           actor=actor, reason="a host it is pinned to is up again"):
                out["resolved"].append(j)
        elif anyone_up and j not in open_jobs:
            job_owner = conn.execute("SELECT owner FROM jobs WHERE name = ?", (j,)).fetchone()
            where = ", ".join(f"{h.name} (down since {utc_hms(h.since)})" for h in serving) or "no known host"
            escalations.raise_escalation(
                conn, job=j, kind=KIND, severity="critical", run_id=None,
                owner=(job_owner["owner"] if job_owner else None) or owner, sinks=sinks, now=ts,
                actor=actor, reason=f"pinned to {', '.join(names)}: no live runner there ({where}); its slots"
                                    " are not run anywhere")
            out["opened"].append(j)
    return out
