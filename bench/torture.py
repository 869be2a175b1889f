"""``make torture``: hundreds of mixed runs while the runner is SIGKILLed and restarted, the
ledger's write lock is held for 2 s at a time by another process, and the artifacts folder
runs out of space. Every other runner stop is clean (SIGTERM) instead, the way a deploy does
it; the jobs go on under their monitors either way, and the runs that completed while no
runner was alive are counted (recorded as they ended, never orphaned). Afterwards: ``watchkeeper doctor --json`` must be clean, every queued run
must be terminal (but a scheduled slot queued and not yet claimed when the last runner stopped,
which waits for the next runner), no write may be lost, no job process may be left alive, and no run a clean
stop left behind may have been escalated as critical (a clean stop is not a crash). Last,
``watchkeeper prune --max-age 0 --keep-per-job 2`` prunes everything it may, and doctor must
be clean again (prune keeps lineages whole).

    python -m bench.torture [--runs 500] [--kills 20] [--seconds 300] [--json]

The runner is ``watchkeeper run`` in its own process group (heartbeat 0.2 s, lease 1 s, sweep
every 0.2 s). The artifacts folder is a 2 MB tmpfs when mounting is possible (root), else the
runner gets ``RLIMIT_FSIZE`` (with SIGXFSZ ignored) and a job prints past it; the report says
which. Exit code 1 when any violation or leaked process is found.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

PY = sys.executable
TERMINAL = ("succeeded", "failed", "blocked", "timed_out", "orphaned", "abandoned")
FSIZE_LIMIT = 8 * 1024 * 1024  # fallback: per-file size limit of the runner (bytes)

SETTINGS = """\
ledger = "{ledger}"
artifacts = "{artifacts}"
concurrency = 8
heartbeat = 0.2
lease = 1.0
sweep_interval = 0.2
start_timeout = 5.0
shutdown_grace = 1.0
output_cap = {cap}
"""

JOBS = """\
[[job]]
name = "tick"
command = ["/bin/sh", "-c", "echo tick"]
every = "1s"
timeout = "10s"
intent = "Scheduled quiet success every second."
owner = "torture@example.org"

[[job]]
name = "ok"
command = ["/bin/sh", "-c", "echo ok"]
concurrency = 8
timeout = "10s"
intent = "Fast success."
owner = "torture@example.org"

[[job]]
name = "fail-retry"
command = ["/bin/sh", "-c", "echo failing >&2; exit 3"]
concurrency = 4
timeout = "10s"
max_attempts = 3
intent = "Fails every time; retried."
owner = "torture@example.org"
[job.backoff]
initial = "0.1s"
max = "0.5s"

[[job]]
name = "hang"
command = ["/bin/sleep", "30"]
concurrency = 4
timeout = "1s"
grace = "0.3s"
intent = "Hangs past its timeout."
owner = "torture@example.org"

[[job]]
name = "self-kill"
command = ["/bin/sh", "-c", "sleep 0.2; kill -9 $$"]
concurrency = 4
timeout = "10s"
max_attempts = 2
intent = "SIGKILLs itself."
owner = "torture@example.org"
[job.backoff]
initial = "0.1s"
max = "0.2s"

[[job]]
name = "grandkids"
command = ["/bin/sh", "-c", "sleep 30 & sleep 30 & (sleep 30 &) ; sleep 30"]
concurrency = 4
timeout = "1s"
grace = "0.3s"
intent = "Starts grandchildren and hangs."
owner = "torture@example.org"

[[job]]
name = "deploy-victim"
command = ["/bin/sleep", "4"]
concurrency = 4
timeout = "60s"
max_attempts = 2
intent = "Still running when the runner is stopped cleanly; retried by the next runner."
owner = "torture@example.org"
[job.backoff]
initial = "0.1s"
max = "0.2s"

[[job]]
name = "chatty"
command = ["{py}", "-c", "import sys; sys.stdout.write('x' * {chatty})"]
concurrency = 2
timeout = "30s"
intent = "Prints more than the artifacts folder holds."
owner = "torture@example.org"
"""

MIX = [("ok", 40), ("fail-retry", 15), ("hang", 10), ("self-kill", 12), ("grandkids", 10), ("chatty", 5)]

LOCK_HOLDER = """\
import random, sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
while True:
    time.sleep(random.uniform(1.5, 4.0))
    conn.execute("BEGIN IMMEDIATE")
    time.sleep(2.0)
    conn.execute("COMMIT")
    print("held", flush=True)
"""


class Torture:
    def __init__(self, root: Path, runs: int, kills: int, seconds: float, seed: int, log=print,
                 clean_stops: int = 0) -> None:
        self.root = root
        self.runs, self.kills_wanted, self.seconds = runs, kills, seconds
        self.rng = random.Random(seed)
        self.log = log
        self.spec = root / "specs"
        self.ledger = root / "wk.db"
        self.artifacts = root / "artifacts"
        self.mounted = False
        self.space_method = ""
        self.runner: subprocess.Popen | None = None
        self.runner_log = open(root / "runner.log", "ab")  # noqa: SIM115 - closed in close()
        self.kills = 0
        self.clean_stops_wanted = clean_stops
        self.clean_stops = 0
        self.restarts = 0
        self.triggered: list[int] = []
        self.lock_holds = 0
        self.deadline = time.monotonic() + seconds

    # -- setup ------------------------------------------------------------------------------
    def setup(self) -> None:
        self.spec.mkdir(parents=True)
        self.artifacts.mkdir()
        if os.geteuid() == 0:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(self.artifacts)],
                               capture_output=True, text=True)
            self.mounted = r.returncode == 0
        if self.mounted:
            self.space_method = "tmpfs of 2 MB mounted on the artifacts folder"
            cap, chatty = 1024 * 1024, 3_000_000
        else:
            self.space_method = (f"RLIMIT_FSIZE {FSIZE_LIMIT // 2**20} MB on the runner (SIGXFSZ ignored); "
                                 "mounting a tmpfs was not possible")
            cap, chatty = 64 * 1024 * 1024, 20_000_000
        (self.spec / "watchkeeper.toml").write_text(
            SETTINGS.format(ledger=self.ledger, artifacts=self.artifacts, cap=cap))
        (self.spec / "jobs.toml").write_text(JOBS.format(py=PY, chatty=chatty))

    def _preexec(self) -> None:
        if not self.mounted:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))

    def wk(self, *args: str, **kw: Any) -> subprocess.CompletedProcess:
        return subprocess.run([PY, "-m", "console.cli", *args], capture_output=True, text=True, timeout=120, **kw)

    # -- the runner --------------------------------------------------------------------------
    def start_runner(self) -> None:
        self.runner = subprocess.Popen(
            [PY, "-m", "console.cli", "run", str(self.spec), "--quiet"], stdin=subprocess.DEVNULL,
            stdout=self.runner_log, stderr=self.runner_log, start_new_session=True, preexec_fn=self._preexec)
        self.restarts += 1

    def kill_runner(self) -> None:
        assert self.runner is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.runner.pid, signal.SIGKILL)  # its own group: the runner, not the jobs
        self.runner.wait()
        self.kills += 1

    def stop_runner(self) -> None:
        if self.runner is None or self.runner.poll() is not None:
            return
        os.killpg(self.runner.pid, signal.SIGTERM)
        try:
            self.runner.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.runner.pid, signal.SIGKILL)
            self.runner.wait()

    # -- workload ----------------------------------------------------------------------------
    def _wait_for_jobs(self) -> None:
        from core.ledger.connection import Ledger
        while time.monotonic() < self.deadline:
            if self.ledger.exists():
                with Ledger(self.ledger) as led:
                    if led.one("SELECT COUNT(*) FROM jobs")[0] >= len(MIX) + 1:
                        return
            time.sleep(0.1)
        raise RuntimeError("the runner never recorded the jobs")

    def feed(self, stop: threading.Event) -> None:
        """Queue ``runs`` manual runs of the mix, in bursts, while the runner is being killed."""
        from core.ledger.connection import Ledger
        from core.ledger.runs import trigger
        names = [n for n, w in MIX for _ in range(w)]
        with Ledger(self.ledger) as led:
            while len(self.triggered) < self.runs and not stop.is_set() and time.monotonic() < self.deadline:
                for _ in range(self.rng.randint(1, 8)):
                    if len(self.triggered) >= self.runs:
                        break
                    self.triggered.append(trigger(led, self.rng.choice(names), actor="operator:torture"))
                time.sleep(self.rng.uniform(0.05, 0.3))

    def busy_for_clean_stop(self, n: int = 2, wait_s: float = 5.0) -> None:
        """Queue ``n`` runs that outlast the shutdown grace and wait (≤ ``wait_s``) until they
        run, so the clean stop has something to leave behind."""
        from core.ledger.connection import Ledger
        from core.ledger.runs import trigger
        with Ledger(self.ledger) as led:
            ids = [trigger(led, "deploy-victim", actor="operator:torture") for _ in range(n)]
            self.triggered.extend(ids)
            until = time.monotonic() + wait_s
            marks = ",".join(map(str, ids))
            while time.monotonic() < until:
                if led.one(f"SELECT COUNT(*) FROM runs WHERE id IN ({marks}) AND state = 'running'")[0] == n:
                    return
                time.sleep(0.1)

    def lock_holder(self) -> subprocess.Popen:
        return subprocess.Popen([PY, "-c", LOCK_HOLDER, str(self.ledger)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, start_new_session=True)

    #: A scheduled slot queued but not yet claimed when the last runner stops (the 1-s tick's,
    #: on a loaded machine) waits for the next runner: nothing of it started, nothing is stuck.
    WAITING = "state = 'queued' AND trigger IN ('schedule', 'misfire')"

    def pending(self) -> int:
        from core.ledger.connection import Ledger
        with Ledger(self.ledger) as led:
            return led.one(f"SELECT COUNT(*) FROM runs WHERE state NOT IN {TERMINAL!r} AND NOT ({self.WAITING})")[0]

    def drive(self) -> None:
        self.start_runner()
        self._wait_for_jobs()
        holder = self.lock_holder()
        stop = threading.Event()
        feeder = threading.Thread(target=self.feed, args=(stop,), daemon=True)
        feeder.start()
        try:
            # Spread the runner stops over the expected feeding time, at random moments: every
            # other one a clean stop (SIGTERM: a deploy, `systemctl restart`), the rest SIGKILLs.
            # Either way the jobs go on under their monitors.
            while self.kills + self.clean_stops < self.kills_wanted and time.monotonic() < self.deadline:
                time.sleep(self.rng.uniform(0.3, 2.5))
                if (self.kills + self.clean_stops) % 2 == 1:
                    self.busy_for_clean_stop()
                    self.stop_runner()  # SIGTERM: the runs it leaves keep running; the next runner re-attaches
                    self.clean_stops += 1
                    time.sleep(self.rng.uniform(0.0, 0.3))
                    self.start_runner()
                    continue
                self.kill_runner()
                time.sleep(self.rng.uniform(0.0, 0.3))
                self.start_runner()
                if self.kills % 5 == 0:
                    self.log(f"  kills {self.kills}, clean stops {self.clean_stops}, queued {len(self.triggered)}/{self.runs}")
            feeder.join(max(0.0, self.deadline - time.monotonic()))
            # Let the last runner finish everything (retries included).
            while time.monotonic() < self.deadline and self.pending():
                time.sleep(0.5)
        finally:
            stop.set()
            feeder.join(10)
            os.killpg(holder.pid, signal.SIGKILL)
            out, _ = holder.communicate()
            self.lock_holds = out.count("held")
            self.stop_runner()

    # -- checks ------------------------------------------------------------------------------
    def job_processes(self) -> list[tuple[int, float | None, int | None]]:
        from core.ledger.connection import Ledger
        with Ledger(self.ledger) as led:
            return [(r[0], r[1], r[2]) for r in led.query("SELECT pid, pid_create_time, pgid FROM runs"
                                                          " WHERE pid IS NOT NULL")]

    def leaked(self) -> list[dict[str, Any]]:
        """Every job process (recorded pid with its create time, or any member of a recorded
        group) still alive; each is killed by its process group and counted."""
        procs = self.job_processes()
        pgids = {g for _, _, g in procs if g}
        found: dict[int, dict[str, Any]] = {}
        for pid, ctime, _ in procs:
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                if (ctime is None or abs(p.create_time() - ctime) < 0.05) and p.status() != psutil.STATUS_ZOMBIE:
                    found[pid] = {"pid": pid, "pgid": os.getpgid(pid), "cmd": " ".join(p.cmdline())[:80]}
        for p in psutil.process_iter(["pid", "status"]):
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) in pgids and p.pid != os.getpid():
                    found.setdefault(p.pid, {"pid": p.pid, "pgid": os.getpgid(p.pid), "cmd": " ".join(p.cmdline())[:80]})
        for pg in {f["pgid"] for f in found.values()}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pg, signal.SIGKILL)
        return list(found.values())

    def check(self) -> dict[str, Any]:
        from core.ledger.connection import Ledger
        time.sleep(1.0)  # let the last group kills land before looking for survivors
        leaked = self.leaked()
        doc = self.wk("doctor", "--json", "--ledger", str(self.ledger), "--config", str(self.spec / "watchkeeper.toml"))
        try:
            doctor = json.loads(doc.stdout)
        except ValueError:
            doctor = {"ok": False, "violations": [{"check": "doctor_failed", "message": doc.stderr[-500:]}]}
        violations = [dict(v) for v in doctor.get("violations", [])]
        with Ledger(self.ledger) as led:
            q = lambda sql, p=(): led.one(sql, p)[0]  # noqa: E731
            runs = q("SELECT COUNT(*) FROM runs")
            known = {r[0] for r in led.query("SELECT id FROM runs")}
            lost = [i for i in self.triggered if i not in known]
            if lost:
                violations.append({"check": "lost_write", "message": f"{len(lost)} queued runs missing: {lost[:10]}"})
            # The last clean stop hands the runs it lists as left running to the next runner
            # (a tick started just before it): waiting by design, not stuck.
            stops = led.query("SELECT detail FROM events WHERE kind = 'runner_stopped' ORDER BY id DESC LIMIT 1")
            handed_over = set(json.loads(stops[0][0] or "{}").get("left_running", [])) if stops else set()
            for r in led.query(f"SELECT id, job, state FROM runs WHERE state NOT IN {TERMINAL!r}"
                               f" AND NOT ({self.WAITING}) LIMIT 50"):
                if r[0] in handed_over:
                    continue
                violations.append({"check": "not_terminal", "run_id": r[0],
                                   "message": f"{r[1]} still {r[2]} at the end"})
            for r in led.query(f"SELECT r.id, r.state FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id"
                               f" WHERE r.state IN {TERMINAL!r} AND o.run_id IS NULL LIMIT 50"):
                violations.append({"check": "missing_outcome", "run_id": r[0],
                                   "message": f"{r[1]} run has no job_outcomes row"})
            for r in led.query("SELECT r.id, COUNT(e.id) FROM runs r LEFT JOIN events e ON e.run_id = r.id"
                               " AND e.kind IN ('run_queued', 'retry_scheduled') AND e.to_state = 'queued'"
                               " GROUP BY r.id HAVING COUNT(e.id) != 1 LIMIT 50"):
                violations.append({"check": "queued_events", "run_id": r[0],
                                   "message": f"{r[1]} creation events (run_queued/retry_scheduled; expected 1)"})
            # Runs a clean stop left behind: settled as interrupted, never escalated as critical.
            left: list[int] = []
            for (detail,) in led.query("SELECT detail FROM events WHERE kind = 'runner_stopped'"):
                left.extend((json.loads(detail or "{}") or {}).get("left_running") or [])
            interrupted = {r[0]: (r[1], r[2], r[3]) for r in led.query(
                f"SELECT r.id, r.state, r.reason, o.severity FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id"
                f" WHERE r.id IN ({','.join(str(int(i)) for i in left) or 'NULL'})")}
            for run_id, (state, reason, severity) in interrupted.items():
                # A run a clean stop left ends as it really ends: its own failure (a timeout)
                # pages as such; the stop itself (orphaned, interrupted) never pages critical.
                if severity == "critical" and (state == "orphaned" or reason == "interrupted"):
                    violations.append({"check": "clean_stop_paged", "run_id": run_id,
                                       "message": f"left behind by a clean stop, ended {state} ({reason}),"
                                                  " escalated as critical"})
            by_state = dict(led.query("SELECT state, COUNT(*) FROM runs GROUP BY state"))
            by_job = {f"{r[0]}/{r[1]}/{r[2] or '-'}": r[3] for r in led.query(
                "SELECT job, state, reason, COUNT(*) FROM runs GROUP BY job, state, reason ORDER BY job")}
            degraded = q("SELECT COUNT(*) FROM job_outcomes WHERE handoff_findings LIKE '%capture_degraded%'")
            degraded_truthful = q(
                "SELECT COUNT(*) FROM job_outcomes o JOIN runs r ON r.id = o.run_id WHERE o.handoff_findings"
                " LIKE '%capture_degraded%' AND r.state IN ('succeeded','failed','timed_out','orphaned','blocked')"
                " AND (r.exit_code IS NOT NULL OR r.signal IS NOT NULL OR r.state = 'orphaned')")
            orphaned = by_state.get("orphaned", 0)
            # Runs whose job ended while no runner was alive: the next runner recorded how each
            # really ended (from its monitor's files), never as orphaned or interrupted.
            away = [r[0] for r in led.query("SELECT run_id FROM events WHERE kind = 'reattached'"
                                            " AND reason LIKE 'ended while no runner%'")]
            reattached = q("SELECT COUNT(*) FROM events WHERE kind = 'reattached' AND reason LIKE 'still running%'")
            marks = ",".join(str(int(i)) for i in away) or "NULL"
            away_states = dict(led.query(f"SELECT state, COUNT(*) FROM runs WHERE id IN ({marks}) GROUP BY state"))
            for bad in ("orphaned",):
                if away_states.get(bad):
                    violations.append({"check": "ended_away_orphaned", "message": (
                        f"{away_states[bad]} run(s) that ended while no runner was alive were recorded {bad}")})
        after_prune = self.prune_then_doctor()
        violations.extend(after_prune["violations"])
        return {
            "kills_survived": self.kills, "clean_stops": self.clean_stops,
            "left_by_clean_stops": len(left),
            "interrupted_runs": sum(1 for _, r, _ in interrupted.values() if r == "interrupted"),
            "completed_while_no_runner": len(away), "completed_while_no_runner_by_state": away_states,
            "reattached_running": reattached,
            "critical_from_clean_stops": sum(1 for st, r, sev in interrupted.values()
                                             if sev == "critical" and (st == "orphaned" or r == "interrupted")),
            "restarts": self.restarts, "runs": runs, "queued_by_torture": len(self.triggered),
            "by_state": by_state, "by_job_state_reason": by_job, "violations": len(violations), "violation_list": violations[:50],
            "doctor_ok": bool(doctor.get("ok")), "pruned_runs": after_prune["pruned_runs"],
            "doctor_ok_after_prune": not after_prune["violations"], "leaked_processes": len(leaked), "leaked": leaked[:20],
            "lock_holds_2s": self.lock_holds, "capture_degraded_runs": degraded,
            "capture_degraded_recorded_truthfully": degraded_truthful, "orphaned_runs": orphaned,
            "space_method": self.space_method,
        }

    def prune_then_doctor(self) -> dict[str, Any]:
        """Prune every run retention may remove, then doctor again: its violations (prefixed
        ``after_prune:``) and how many runs went."""
        cfg = ("--config", str(self.spec / "watchkeeper.toml"))
        pr = self.wk("prune", "--json", "--max-age", "0", "--keep-per-job", "2", "--ledger", str(self.ledger), *cfg)
        try:
            pruned = json.loads(pr.stdout)["runs"]
        except (ValueError, KeyError):
            return {"pruned_runs": 0, "violations": [{"check": "after_prune:prune_failed",
                                                      "message": pr.stderr[-500:]}]}
        doc = self.wk("doctor", "--json", "--ledger", str(self.ledger), *cfg)
        try:
            found = json.loads(doc.stdout).get("violations", [])
        except ValueError:
            found = [{"check": "doctor_failed", "message": doc.stderr[-500:]}]
        return {"pruned_runs": pruned, "violations": [{**v, "check": f"after_prune:{v.get('check')}"} for v in found]}

    def close(self) -> None:
        self.runner_log.close()
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.artifacts)], capture_output=True)


def torture(runs: int, kills: int, seconds: float, seed: int, log=print, clean_stops: int = 0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="wk-torture-") as d:
        t = Torture(Path(d), runs, kills, seconds, seed, log, clean_stops=clean_stops)
        started = time.monotonic()
        try:
            t.setup()
            log(f"torture: {runs} runs, {kills} runner kills, ≤ {seconds:g} s; artifacts: {t.space_method}")
            t.drive()
            report = t.check()
        finally:
            if t.runner is not None and t.runner.poll() is None:
                os.killpg(t.runner.pid, signal.SIGKILL)
                t.runner.wait()
            t.close()
        report["seconds"] = round(time.monotonic() - started, 1)
        report["seed"] = seed
        return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.torture", description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=500, help="manual runs to queue (retries and ticks add more)")
    ap.add_argument("--kills", type=int, default=20,
                    help="runner stops, each followed by a restart: every other one SIGKILL, the rest clean (SIGTERM)")
    ap.add_argument("--seconds", type=float, default=300, help="time budget for the whole workload")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    log = (lambda *x: print(*x, file=sys.stderr, flush=True)) if a.json else (lambda *x: print(*x, flush=True))
    r = torture(a.runs, a.kills, a.seconds, seed, log)
    if a.json:
        print(json.dumps(r, indent=2))
    else:
        print(f"\nkills survived      {r['kills_survived']}  (runner restarts {r['restarts']})")
        print(f"clean stops         {r['clean_stops']}: {r['left_by_clean_stops']} runs left behind,"
              f" {r['interrupted_runs']} settled as interrupted, {r['critical_from_clean_stops']} escalated critical")
        print(f"runs that completed while no runner was alive  {r['completed_while_no_runner']}  (recorded as "
              + (", ".join(f"{k} {v}" for k, v in sorted(r["completed_while_no_runner_by_state"].items())) or "-")
              + f"); runs re-attached still running {r['reattached_running']}")
        print(f"runs                {r['runs']}  ({r['queued_by_torture']} queued by the workload; "
              + ", ".join(f"{k} {v}" for k, v in sorted(r["by_state"].items())) + ")")
        print("  " + ", ".join(f"{k} {v}" for k, v in r["by_job_state_reason"].items()))
        print(f"violations          {r['violations']}  (doctor {'ok' if r['doctor_ok'] else 'NOT ok'}; after pruning"
              f" {r['pruned_runs']} runs, doctor {'ok' if r['doctor_ok_after_prune'] else 'NOT ok'})")
        for v in r["violation_list"]:
            print(f"    [{v.get('check')}] run {v.get('run_id')}: {v.get('message')}")
        print(f"leaked processes    {r['leaked_processes']}")
        for p in r["leaked"]:
            print(f"    pid {p['pid']} pgid {p['pgid']}: {p['cmd']}")
        print(f"write lock held 2 s {r['lock_holds_2s']} times by another process")
        print(f"out of space        {r['space_method']}: {r['capture_degraded_runs']} runs with capture_degraded,"
              f" {r['capture_degraded_recorded_truthfully']} of them with exit/signal recorded")
        print(f"seconds             {r['seconds']}  (seed {r['seed']})")
        print("RESULT: " + ("ok" if not r["violations"] and not r["leaked_processes"] else "FAILED"))
    return 0 if not r["violations"] and not r["leaked_processes"] else 1


if __name__ == "__main__":
    sys.exit(main())
