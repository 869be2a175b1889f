"""Runner cost when idle and at scale, each runner a real ``watchkeeper run`` process.

* **Idle CPU** of a runner with 1, 100 and 1,000 daily cron jobs (``0 3 * * *``, so nothing
  falls due) over 60 s (``--quick``: 20 s), default settings (heartbeat 5 s, sweep 5 s). The
  three runners run side by side over the same window, after a warm-up, and each one's CPU
  time (user + system, ``psutil``) is read before and after. Baseline, in the same window:
  the 1-job runner (flatness: 1,000 jobs should cost what 1 job costs) and a bare asyncio
  process that only sleeps (Python's own floor). Goal: ≤ 0.5% of one core at 1,000 jobs,
  and flat.
* **Scale**: 500 concurrent ``sleep 60`` runs under one runner (concurrency 500). Once all
  500 are ``running``: the runner's CPU (% of one core) and RSS over 20 s (``--quick``:
  10 s); the lease renewal of all 500 runs — ONE statement (``core.ledger.runners.renew``),
  timed from another connection; one orphan-sweep pass over the 500 live runs
  (``core.sweep.sweep.Sweeper.sweep_once``), timed. Baseline in the same window: a bare
  asyncio process holding 500 ``sleep 60`` children with their output piped. Goal: runner
  CPU ≤ 5% of one core.

What each run's monitor costs (spawn time, memory, 500 of them) is ``bench.monitor_bench``.

    python -m bench.runner_bench [--quick] [--json] [--only idle|scale]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.common import Figure, table

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
IDLE_SIZES = (1, 100, 1000)
SCALE_RUNS = 500

SLEEPER = """\
import asyncio, sys
async def main(n):
    procs = [await asyncio.create_subprocess_exec("sleep", "60", stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.PIPE, start_new_session=True)
             for _ in range(n)]
    print("ready", flush=True)
    await asyncio.gather(*(p.communicate() for p in procs))
asyncio.run(main(int(sys.argv[1])))
"""
IDLE_PY = "import asyncio; print('ready', flush=True); asyncio.run(asyncio.sleep(10**6))"


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def _start_runner(spec_dir: Path, db: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([PY, "-m", "console.cli", "run", str(spec_dir), "--ledger", str(db), "--quiet"],
                            cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _count(db: Path, sql: str) -> int:
    from core.ledger.connection import Ledger
    if not db.exists():
        return 0
    try:
        with Ledger(db) as led:
            return int(led.one(sql)[0])
    except Exception:  # created but not yet migrated: not ready
        return 0


def _helper(code: str, *args: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([PY, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    assert p.stdout is not None
    if p.stdout.readline().strip() != "ready":
        raise RuntimeError("baseline process did not start")
    return p


# -- idle ------------------------------------------------------------------------------------
def idle(quick: bool) -> list[Figure]:
    window = 20.0 if quick else 60.0
    with tempfile.TemporaryDirectory(prefix="wk-bench-idle-") as d:
        tmp = Path(d)
        runners: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}
        base = None
        try:
            for n in IDLE_SIZES:
                specs = tmp / f"jobs{n}"
                specs.mkdir()
                (specs / "daily.toml").write_text("".join(
                    f'[[job]]\nname = "daily-{i:04d}"\ncommand = ["/bin/true"]\nschedule = "0 3 * * *"\n'
                    f'timezone = "UTC"\n\n' for i in range(n)))
                db = tmp / f"wk{n}.db"
                runners[n] = (_start_runner(specs, db, tmp / f"runner{n}.log"), db)
            for n, (_p, db) in runners.items():
                _wait(lambda db=db, n=n: _count(db, "SELECT COUNT(*) FROM jobs") >= n, 120, f"{n} jobs loaded")
            base = _helper(IDLE_PY)
            time.sleep(5.0)  # warm-up: startup work (spec load, first tick, reconcile) is not idle
            procs = {n: psutil.Process(p.pid) for n, (p, _db) in runners.items()}
            bp = psutil.Process(base.pid)
            before = {n: _cpu_s(p) for n, p in procs.items()}
            b0 = _cpu_s(bp)
            t0 = time.monotonic()
            time.sleep(window)
            elapsed = time.monotonic() - t0
            pct = {n: (_cpu_s(p) - before[n]) / elapsed * 100 for n, p in procs.items()}
            floor = (_cpu_s(bp) - b0) / elapsed * 100
        finally:
            for p, _db in runners.values():
                _stop(p)
            if base is not None:
                base.kill()
                base.wait()
    one = pct[1]
    figs = []
    for n in IDLE_SIZES:
        goal = "≤ 0.5% of a core, flat" if n == 1000 else "flat"
        flat = pct[n] <= max(one * 1.5, one + 0.1)
        met = flat and (pct[n] <= 0.5 if n == 1000 else True)
        figs.append(Figure(f"idle runner CPU, {n:,} daily job(s)", pct[n], "% core", one if n != 1 else floor,
                           "1-job runner" if n != 1 else "bare asyncio sleep",
                           one / pct[n] if n != 1 and pct[n] else None, goal, met,
                           f"{window:g} s window, default heartbeat/sweep 5 s" if n == 1 else ""))
    figs.append(Figure("idle Python floor (bare asyncio sleep)", floor, "% core", note="same window"))
    return figs


# -- scale -----------------------------------------------------------------------------------
def scale(quick: bool) -> list[Figure]:
    from core.ledger import runners as runner_rows
    from core.ledger.connection import Ledger
    from core.ledger.runs import trigger
    from core.spec.settings import load_settings
    from core.sweep.sweep import Sweeper

    window = 10.0 if quick else 20.0
    n = SCALE_RUNS
    with tempfile.TemporaryDirectory(prefix="wk-bench-scale-") as d:
        tmp = Path(d)
        specs = tmp / "jobs"
        specs.mkdir()
        (specs / "watchkeeper.toml").write_text(f"concurrency = {n}\n")
        (specs / "sleep.toml").write_text(f'name = "sleeper"\ncommand = ["sleep", "60"]\nconcurrency = {n}\n'
                                          'timeout = "5m"\n')
        db = tmp / "wk.db"
        runner = _start_runner(specs, db, tmp / "runner.log")
        base = None
        try:
            _wait(lambda: _count(db, "SELECT COUNT(*) FROM jobs") >= 1, 60, "the job loaded")
            t_spawn = time.monotonic()  # from the first manual run queued
            with Ledger(db) as led:
                for _ in range(n):
                    trigger(led, "sleeper", actor="bench")
            _wait(lambda: _count(db, "SELECT COUNT(*) FROM runs WHERE state = 'running'") >= n, 300,
                  f"{n} runs running")
            spawn_s = time.monotonic() - t_spawn
            base = _helper(SLEEPER, str(n))
            time.sleep(2.0)
            rp, bp = psutil.Process(runner.pid), psutil.Process(base.pid)
            r0, b0 = _cpu_s(rp), _cpu_s(bp)
            t0 = time.monotonic()
            time.sleep(window)
            elapsed = time.monotonic() - t0
            cpu = (_cpu_s(rp) - r0) / elapsed * 100
            base_cpu = (_cpu_s(bp) - b0) / elapsed * 100
            rss = rp.memory_info().rss / 2**20
            base_rss = bp.memory_info().rss / 2**20
            # Lease renewal and one sweep pass, measured from this process on the same ledger.
            settings = load_settings(specs, ledger=str(db))
            with Ledger(db) as led:
                runner_id, ids = _live(led)
                renew_ms = []
                for _ in range(5):
                    t = time.perf_counter()
                    # Every lease due (``now`` a lease ahead): the full renewal of all the runs.
                    due = time.time() + settings.lease * (1 + len(renew_ms))
                    renewed = led.write(lambda conn, due=due: runner_rows.renew(conn, runner_id, ids,
                                                                                lease_s=settings.lease, now=due))
                    renew_ms.append((time.perf_counter() - t) * 1000)
                sweeper = Sweeper(settings, actor="bench")
                sweep_ms = []
                for _ in range(3):
                    t = time.perf_counter()
                    sweeper.sweep_once(led)
                    sweep_ms.append((time.perf_counter() - t) * 1000)
        finally:
            _stop(runner, timeout=90)
            if base is not None:
                os.killpg(base.pid, signal.SIGKILL)
                base.wait()
            _kill_runs(db)
    note = (f"{n} runs of `sleep 60`, all running {spawn_s:.1f} s after the first was queued (queued one by"
            f" one from this process); {window:g} s window")
    return [
        Figure(f"scale: runner CPU, {n} live runs", cpu, "% core", base_cpu, "asyncio holding 500 children",
               None, "≤ 5% of a core", cpu <= 5.0, note),
        Figure(f"scale: runner RSS, {n} live runs", rss, "MB", base_rss, "asyncio holding 500 children",
               base_rss / rss if rss else None, "", None),
        Figure(f"scale: lease renewal of {n} runs (one statement)", statistics.median(renew_ms), "ms", None, "",
               None, "", None, f"{renewed} leases renewed by one UPDATE; median of 5, max {max(renew_ms):.1f} ms"),
        Figure(f"scale: one sweep pass over {n} live runs", statistics.median(sweep_ms), "ms", None, "", None,
               "", None, f"median of 3, max {max(sweep_ms):.0f} ms"),
    ]


def _live(led: Any) -> tuple[str, list[int]]:
    rows = led.query("SELECT id, runner_id FROM runs WHERE state = 'running' LIMIT 100000")
    return rows[0]["runner_id"], [r["id"] for r in rows]


def _kill_runs(db: Path) -> None:
    """Every process group a run recorded (the runner's clean stop leaves them running)."""
    from core.ledger.connection import Ledger
    if not db.exists():
        return
    with Ledger(db) as led:
        pgids = [r[0] for r in led.query("SELECT pgid FROM runs WHERE pgid IS NOT NULL LIMIT 100000")]
    for pg in pgids:
        try:
            os.killpg(pg, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


BENCHES = {"idle": idle, "scale": scale}


def run(quick: bool = False, only: list[str] | None = None) -> list[Figure]:
    figs: list[Figure] = []
    for name in only or list(BENCHES):
        figs.extend(BENCHES[name](quick))
    return figs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.runner_bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", nargs="+", choices=sorted(BENCHES))
    a = ap.parse_args(argv)
    figs = run(a.quick, a.only)
    print(json.dumps([f.to_dict() for f in figs], indent=2) if a.json else table(figs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
