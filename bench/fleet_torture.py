"""The torture workload on a fleet: mixed runs on three hosts sharing one PostgreSQL ledger
while, again and again, one host's runner is SIGKILLed mid-run and the host comes back.

    python -m bench.fleet_torture [--hosts 3] [--kills 2] [--seconds 60] [--seed 7] [--json]

Each host is a runner in its own PID, mount and UTS namespace (``tests.kit.hosts``: its own
hostname and boot id; process ids collide across hosts as across machines) on a throw-away
PostgreSQL (``tests.kit.postgres``). The runner is the namespace's only child, so its SIGKILL
ends the host: every monitor and job on it dies with it, as in a power loss, and the host that
comes back is a new host life (a new boot id). A feeder triggers a mix of quick successes,
failures retried with backoff, hangs killed at their timeout, self-SIGKILLing jobs and slow
jobs (the ones a kill finds mid-run); a job ticks every second on the schedule.

Afterwards, with the fleet still up and the feed stopped:

* the ledger's invariants hold (``core.ledger.invariants``: states match their transitions, no
  terminal move twice, no attempt gap, each slot once, no lineage overlap);
* each scheduled slot ran once across the fleet;
* no run is stuck: every run created before the feed stopped is terminal within the drain bound;
* per kill, ``host_down`` for that host was delivered opened (or reopened) exactly once, and
  recovered once after the host came back;
* every notification row was delivered exactly once (sink lines per escalation and event equal
  the outbox rows sent).

Exit code 1 on any violation. Figures: runs by state and by host, kills, time from a kill to
its ``host_down`` delivery and to the host's runs being orphaned by lease, notifications.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

PY = sys.executable
TERMINAL = ("succeeded", "failed", "blocked", "timed_out", "orphaned", "abandoned")

SETTINGS = """\
artifacts = "{artifacts}"
concurrency = 6
heartbeat = 1.0
lease = 10.0
sweep_interval = 1.0
start_timeout = 15.0
shutdown_grace = 0.5

[[notify]]
type = "command"
name = "file"
recovery = true
timeout = 30.0
command = [{py}, "-c", "import sys, json; open({out}, 'a').write(json.dumps(json.load(sys.stdin)) + chr(10))"]
"""

JOBS = """\
[[job]]
name = "tick"
command = ["true"]
every = "1s"
timeout = "10s"
intent = "Scheduled quiet success every second, once per slot across the fleet."

[[job]]
name = "ok"
command = ["/bin/sh", "-c", "echo ok"]
concurrency = 6
timeout = "10s"
intent = "Fast success."

[[job]]
name = "fail-retry"
command = ["/bin/sh", "-c", "echo failing >&2; exit 3"]
concurrency = 3
timeout = "10s"
max_attempts = 3
intent = "Fails every time; retried."
[job.backoff]
initial = "0.2s"
max = "0.5s"

[[job]]
name = "hang"
command = ["/bin/sleep", "30"]
concurrency = 2
timeout = "1s"
grace = "0.3s"
intent = "Hangs past its timeout."

[[job]]
name = "self-kill"
command = ["/bin/sh", "-c", "sleep 0.2; kill -9 $$"]
concurrency = 2
timeout = "10s"
max_attempts = 2
intent = "SIGKILLs itself."
[job.backoff]
initial = "0.1s"
max = "0.2s"

[[job]]
name = "slow"
command = ["/bin/sleep", "3"]
concurrency = 6
timeout = "30s"
max_attempts = 2
intent = "Takes a few seconds: what a host's crash finds mid-run."
[job.backoff]
initial = "0.2s"
max = "0.5s"
"""

MIX = [("ok", 40), ("fail-retry", 10), ("hang", 6), ("self-kill", 8), ("slow", 36)]


def _sent(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


class FleetTorture:
    """One fleet torture in ``root`` on ``url`` (a fresh PostgreSQL ledger)."""

    def __init__(self, root: Path, url: str, *, hosts: int, kills: int, seconds: float, seed: int,
                 log: Any = print) -> None:
        self.root, self.url = root, url
        self.names = [f"h{i + 1}" for i in range(hosts)]
        self.kills, self.seconds = kills, seconds
        self.rng = random.Random(seed)
        self.log = log
        self.out = root / "sent.jsonl"
        self.specs = root / "jobs"
        self.fleet: dict[str, Any] = {}
        self.lives: dict[str, int] = {}
        self.killed: list[dict[str, Any]] = []  # {host, at, running: [run ids]}
        self.triggered = 0
        self.beat_gaps: dict[str, float] = {}  # host: longest gap between two heartbeats, s

    # -- the fleet ---------------------------------------------------------------------------
    def setup(self) -> None:
        self.specs.mkdir(parents=True)
        (self.specs / "watchkeeper.toml").write_text(SETTINGS.format(
            artifacts=self.root / "artifacts", py=json.dumps(PY), out=repr(str(self.out))))
        (self.specs / "jobs.toml").write_text(JOBS)
        for name in self.names:
            self.start_host(name)

    def start_host(self, name: str) -> None:
        from tests.kit import hosts
        life = self.lives[name] = self.lives.get(name, 0) + 1
        self.fleet[name] = hosts.Host(name, self.specs, self.url, self.root / f"{name}.log",
                                      boot_id=f"boot-{name}-{life}")

    def wait(self, pred: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            got = pred()
            if got:
                return got
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout:g}s; {self.situation()}")
            time.sleep(0.1)

    def situation(self) -> str:
        """What the ledger says of hosts and escalations now (for a timeout's message)."""
        now = time.time()
        runners = [f"{r['hostname']}/{r['boot_id']} beat {now - r['heartbeat_at']:.1f}s ago"
                   + (" stopped" if r["stopped_at"] else "") for r in self.rows(
                       "SELECT hostname, boot_id, heartbeat_at, stopped_at FROM runners ORDER BY started_at")]
        escs = [f"{r['job']} {r['kind']} {r['state']} notified={r['notified']}" for r in self.rows(
            "SELECT job, kind, state, notified FROM escalations ORDER BY id")]
        sent = [(m["job"], m["event"]) for m in _sent(self.out)]
        return f"runners {runners}; escalations {escs}; delivered {sent}"

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        return self.led.rows(sql, params)

    def alive_hosts(self) -> set[str]:
        now = time.time()
        return {r["hostname"] for r in self.rows(
            "SELECT hostname FROM runners WHERE stopped_at IS NULL AND heartbeat_at > ?", (now - 5.0,))}

    def watch_beats(self, stop: threading.Event) -> None:
        """Keep, per runner, the longest time between two heartbeats seen (``heartbeat_at``,
        polled every 0.25 s on this thread's own connection): what a false ``host_down``
        would come from. A killed runner's last silence is not counted."""
        from core.ledger.connection import Ledger
        last: dict[str, float] = {}
        with Ledger(self.url) as led:
            while not stop.wait(0.25):
                for r in led.rows("SELECT id, hostname, heartbeat_at FROM runners WHERE stopped_at IS NULL"):
                    beat = float(r["heartbeat_at"])
                    prev = last.get(r["id"])
                    if prev is not None and beat > prev:
                        key = r["hostname"]
                        self.beat_gaps[key] = max(self.beat_gaps.get(key, 0.0), round(beat - prev, 2))
                    last[r["id"]] = beat

    # -- the workload ------------------------------------------------------------------------
    def feed(self, stop: threading.Event) -> None:
        from core.ledger.sql_store import open_store
        jobs = [j for j, _ in MIX]
        weights = [w for _, w in MIX]
        with open_store(self.url) as store:  # this thread's own connection
            while not stop.is_set():
                pending = [r for r in store.runs_in_states(["queued"], limit=100) if r.trigger == "manual"]
                if len(pending) < 12:
                    store.queue_manual_run(self.rng.choices(jobs, weights)[0], actor="torture")
                    self.triggered += 1
                stop.wait(0.05)

    def kill_one(self) -> None:
        """SIGKILL the runner of a host with a slow run going (mid-run), wait for its
        ``host_down``, then bring the host back (a new life) and wait for the recovery."""
        victim = self.rng.choice(self.names)
        running = self.wait(lambda: [r["id"] for r in self.rows(
            "SELECT id FROM runs WHERE host = ? AND state = 'running' AND job = 'slow'", (victim,))],
            60, f"a slow run going on {victim}")
        at = time.time()
        pid = self.fleet[victim].kill_runner()
        self.log(f"killed {victim}'s runner (pid {pid}) with {len(running)} slow run(s) going")
        kill = {"host": victim, "at": at, "running": running}
        self.killed.append(kill)
        job = f"(host {victim})"
        mine = sum(1 for k in self.killed if k["host"] == victim)
        self.wait(lambda: len([m for m in _sent(self.out) if m["job"] == job
                               and m["event"] in ("opened", "reopened")]) >= mine, 60, f"host_down of {victim} delivered")
        kill["host_down_after_s"] = round(time.time() - at, 2)
        ids = ",".join(str(int(i)) for i in running)
        self.wait(lambda: not self.rows(f"SELECT id FROM runs WHERE id IN ({ids}) AND state = 'running'"),
                  60, f"{victim}'s runs settled by another host")
        kill["orphaned_after_s"] = round(time.time() - at, 2)
        self.fleet[victim].end()
        time.sleep(self.rng.uniform(0.5, 2.0))
        self.start_host(victim)
        self.wait(lambda: len([m for m in _sent(self.out) if m["job"] == job and m["event"] == "recovered"])
                  >= mine, 60, f"host_down of {victim} recovered")
        kill["recovered_after_s"] = round(time.time() - at, 2)
        self.log(f"  host_down delivered after {kill['host_down_after_s']}s,"
                 f" runs settled after {kill['orphaned_after_s']}s, recovered after {kill['recovered_after_s']}s")

    def drive(self) -> dict[str, Any]:
        from core.ledger.connection import Ledger
        self.led = Ledger(self.url)
        self.setup()
        self.wait(lambda: self.alive_hosts() >= set(self.names), 60, "every runner heartbeating")
        stop = threading.Event()
        feeder = threading.Thread(target=self.feed, args=(stop,), daemon=True)
        beats = threading.Thread(target=self.watch_beats, args=(stop,), daemon=True)
        began = time.monotonic()
        feeder.start()
        beats.start()
        try:
            gap = self.seconds / (self.kills + 1)
            for _ in range(self.kills):
                time.sleep(max(0.0, began + gap * (len(self.killed) + 1) - time.monotonic()))
                self.kill_one()
                self.wait(lambda: self.alive_hosts() >= set(self.names), 60, "the fleet whole again")
            time.sleep(max(0.0, began + self.seconds - time.monotonic()))
        finally:
            stop.set()
            feeder.join(10)
            beats.join(10)
        fed_until = time.time()
        # Drain with the fleet up: everything created before the feed stopped must end.
        stuck: list[dict[str, Any]] = []
        try:
            self.wait(lambda: not self.rows(
                f"SELECT id FROM runs WHERE created_at < ? AND state NOT IN {TERMINAL}", (fed_until,)),
                90, "every run ended")
        except TimeoutError:
            stuck = self.rows(f"SELECT id, job, state, host FROM runs WHERE created_at < ? AND state NOT IN"
                              f" {TERMINAL} ORDER BY id", (fed_until,))
        return self.check(stuck, time.monotonic() - began)

    # -- the verdict -------------------------------------------------------------------------
    def check(self, stuck: list[dict[str, Any]], elapsed: float) -> dict[str, Any]:
        from core.ledger.sql_store import SqlStore
        violations = [v.to_dict() for v in SqlStore(self.led).invariant_violations()]
        violations += [{"check": "stuck", "run_id": r["id"], "message": f"{r['job']} still {r['state']} on"
                        f" {r['host']} after the drain"} for r in stuck]
        ticks = Counter(r["slot"] for r in self.rows("SELECT slot FROM runs WHERE job = 'tick' AND attempt = 1"))
        violations += [{"check": "slot_twice", "message": f"tick slot {s} ran {n} times"}
                       for s, n in ticks.items() if n > 1]
        sent = _sent(self.out)
        for name in self.names:
            job = f"(host {name})"
            kills = sum(1 for k in self.killed if k["host"] == name)
            opened = sum(1 for m in sent if m["job"] == job and m["event"] in ("opened", "reopened"))
            recovered = sum(1 for m in sent if m["job"] == job and m["event"] == "recovered")
            if opened != kills or recovered != kills:
                violations.append({"check": "host_down", "message": f"{name}: {kills} kill(s), host_down delivered"
                                   f" opened {opened}, recovered {recovered} time(s)"})
        # Each outbox row delivered once: sink lines per (escalation, event) against the rows
        # sent. A row whose first attempt failed (the sink overran its timeout, perhaps after
        # it had written) is retried by design — at least once, counted apart; two deliveries
        # of a row sent at its first attempt would be two runners claiming it: a violation.
        lines = Counter((m.get("escalation_id"), m["event"]) for m in sent)
        sent_rows = self.rows("SELECT escalation_id, event, attempts FROM notifications WHERE state = 'sent'")
        rows = Counter((r["escalation_id"], r["event"]) for r in sent_rows)
        retried = {(r["escalation_id"], r["event"]) for r in sent_rows if r["attempts"] > 1}
        redelivered = 0
        for key in set(lines) | set(rows):
            if lines[key] == rows[key]:
                continue
            if key in retried and lines[key] > rows[key]:
                redelivered += lines[key] - rows[key]
                continue
            violations.append({"check": "notification_once", "message": (
                f"escalation {key[0]} {key[1]}: {lines[key]} delivered, {rows[key]} outbox row(s) sent")})
        by_state = {r["state"]: r["n"] for r in self.rows("SELECT state, COUNT(*) AS n FROM runs GROUP BY state")}
        by_host = {r["host"] or "-": r["n"] for r in self.rows("SELECT host, COUNT(*) AS n FROM runs GROUP BY host")}
        lease_orphans = self.rows("SELECT COUNT(*) AS n FROM runs WHERE state = 'orphaned'"
                                  " AND reason_code = 'lease_expired'")[0]["n"]
        return {
            "backend": "postgresql", "hosts": len(self.names), "seconds": round(elapsed, 1),
            "runs": sum(by_state.values()), "triggered": self.triggered, "tick_slots": len(ticks),
            "runs_by_state": by_state, "runs_by_host": by_host, "orphaned_by_lease": lease_orphans,
            "kills": len(self.killed), "killed": self.killed,
            "host_down_after_s": [k.get("host_down_after_s") for k in self.killed],
            "notifications_sent": sum(rows.values()), "notifications_delivered": sum(lines.values()),
            "redelivered_after_failed_attempt": redelivered, "max_heartbeat_gap_s": self.beat_gaps,
            "violations": violations,
        }

    def close(self) -> None:
        for host in self.fleet.values():
            host.end()
        led = getattr(self, "led", None)
        if led is not None:
            led.close()


def fleet_torture(*, hosts: int = 3, kills: int = 2, seconds: float = 60, seed: int = 7,
                  log: Any = print) -> dict[str, Any]:
    """Run one fleet torture on a throw-away PostgreSQL; returns its figures (``violations``
    empty when every check held). Raises RuntimeError when PostgreSQL or namespaces are
    not available here."""
    from tests.kit import hosts as kit
    from tests.kit import postgres
    why = postgres.available() or kit.available()
    if why:
        raise RuntimeError(f"fleet torture needs PostgreSQL and namespaces: {why}")
    server = postgres.Server().start()
    root = Path(tempfile.mkdtemp(prefix="wk-fleet-torture-"))
    t = FleetTorture(root, server.fresh_database(), hosts=hosts, kills=kills, seconds=seconds, seed=seed, log=log)
    try:
        result = t.drive()
    finally:
        t.close()
        server.stop()
    if not result["violations"]:  # the hosts' logs and the sink's lines stay only when something broke
        shutil.rmtree(root, ignore_errors=True)
    else:
        result["logs"] = str(root)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fleet_torture", description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    r = fleet_torture(hosts=args.hosts, kills=args.kills, seconds=args.seconds, seed=args.seed,
                      log=(lambda *_: None) if args.json else print)
    if args.json:
        print(json.dumps(r))
    else:
        print(f"fleet torture on PostgreSQL: {r['hosts']} hosts, {r['seconds']}s, {r['runs']} runs"
              f" ({r['tick_slots']} tick slots), {r['kills']} host kill(s)")
        print("  runs by state: " + ", ".join(f"{k} {v}" for k, v in sorted(r["runs_by_state"].items())))
        print("  runs by host:  " + ", ".join(f"{k} {v}" for k, v in sorted(r["runs_by_host"].items())))
        print(f"  orphaned by lease: {r['orphaned_by_lease']}; host_down delivered after"
              f" {r['host_down_after_s']} s; notifications sent {r['notifications_sent']},"
              f" delivered {r['notifications_delivered']} ({r['redelivered_after_failed_attempt']} again after a"
              " failed attempt)")
        print(f"  longest gap between two heartbeats (s), by host: {r['max_heartbeat_gap_s']}")
        print(f"  violations: {len(r['violations'])}")
        for v in r["violations"][:20]:
            print(f"    {v}")
    return 1 if r["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
