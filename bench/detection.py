"""Detection latency of dead runs, median of several trials, with real processes.

1. job SIGKILL → terminal state recorded by its runner            (goal ≤ 0.5 s)
2. runner SIGKILL → run orphaned by the restarted runner           (goal ≤ 1 s from restart)
3. hung run, no live runner → orphaned by ``watchkeeper sweep --loop`` at a 2 s lease
                                                                   (goal ≤ lease + 1 s = 3 s)

For scale: Airflow's default zombie threshold is 300 s, Prefect's 90 s.
Run: ``python -m bench.detection [--trials N]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.ledger.connection import Ledger

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
TERMINAL = ("succeeded", "failed", "blocked", "timed_out", "orphaned", "abandoned")


class Rig:
    """One ledger, the runner/sweep processes started for it, one long-lived connection
    (short-lived connections next to a running runner are avoided on purpose)."""

    def __init__(self, folder: Path, toml: str) -> None:
        self.folder = folder
        self.specs = folder / "jobs"
        self.specs.mkdir(parents=True)
        (self.specs / "watchkeeper.toml").write_text(toml)
        (self.specs / "jobs.toml").write_text('name = "hang"\ncommand = ["sleep", "120"]\nonce = true\n')
        self.db = folder / "wk.db"
        self.procs: list[subprocess.Popen] = []
        self.led: Ledger | None = None

    def spawn(self, *args: str) -> subprocess.Popen:
        p = subprocess.Popen([PY, "-m", "console.cli", *args], cwd=ROOT, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def runner(self) -> subprocess.Popen:
        return self.spawn("run", str(self.specs), "--ledger", str(self.db), "--quiet")

    def run_row(self) -> dict | None:
        if self.led is None:
            if not Path(f"{self.db}-wal").exists():
                return None
            self.led = Ledger(self.db)
        row = self.led.one("SELECT * FROM runs WHERE job = 'hang' ORDER BY id LIMIT 1")
        return dict(row) if row else None

    def wait(self, pred, timeout: float = 20.0, step: float = 0.005):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = pred()
            except Exception:  # the ledger is still being created
                value = None
            if value:
                return value
            time.sleep(step)
        raise TimeoutError("condition not met")

    def running(self) -> dict:
        return self.wait(lambda: (r := self.run_row()) and r["state"] == "running" and r)

    def terminal(self) -> dict:
        return self.wait(lambda: (r := self.run_row()) and r["state"] in TERMINAL and r)

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait(timeout=10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
        row = self.run_row() if self.led else None
        if row and row["pgid"]:
            try:
                os.killpg(row["pgid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.led is not None:
            self.led.close()


FAST = "heartbeat = 0.2\nlease = 1.0\nsweep_interval = 0.2\nstart_timeout = 5.0\nshutdown_grace = 0.5\n"
LEASE_2S = "heartbeat = 0.5\nlease = 2.0\nsweep_interval = 0.2\nstart_timeout = 5.0\nshutdown_grace = 0.5\n"


def job_sigkill(tmp: Path) -> float:
    rig = Rig(tmp, FAST)
    try:
        rig.runner()
        run = rig.running()
        t0 = time.time()
        os.kill(run["pid"], signal.SIGKILL)
        rig.terminal()
        return time.time() - t0
    finally:
        rig.close()


def runner_sigkill(tmp: Path) -> float:
    rig = Rig(tmp, FAST)
    try:
        first = rig.runner()
        rig.running()
        os.kill(first.pid, signal.SIGKILL)  # the job lives on in its own session
        first.wait()
        t0 = time.time()
        rig.runner()
        row = rig.terminal()
        assert row["state"] == "orphaned", row
        return time.time() - t0
    finally:
        rig.close()


def hung_run_sweep(tmp: Path) -> float:
    rig = Rig(tmp, LEASE_2S)
    try:
        first = rig.runner()
        rig.running()
        rig.spawn("sweep", "--loop", "--ledger", str(rig.db), "--config", str(rig.specs / "watchkeeper.toml"))
        time.sleep(0.5)  # the sweep loop is up
        t0 = time.time()
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        row = rig.terminal()
        assert row["state"] == "orphaned", row
        return time.time() - t0
    finally:
        rig.close()


CASES = [
    ("job SIGKILL → terminal", job_sigkill, 0.5),
    ("runner SIGKILL → orphaned after restart", runner_sigkill, 1.0),
    ("hung run, no runner → orphaned by sweep loop (lease 2 s)", hung_run_sweep, 3.0),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"detection latency, median of {args.trials} trials (Airflow default 300 s, Prefect 90 s)")
    missed = 0
    for name, fn, goal in CASES:
        samples = []
        for i in range(args.trials):
            with tempfile.TemporaryDirectory(prefix="wk-bench-") as tmp:
                samples.append(fn(Path(tmp) / str(i)))
        med = statistics.median(samples)
        ok = med <= goal
        missed += not ok
        print(f"  {name:<58} median {med:6.3f} s  (min {min(samples):.3f}, max {max(samples):.3f})"
              f"  goal ≤ {goal:g} s  {'met' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
