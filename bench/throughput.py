"""Runner throughput: 1,000 runs of /bin/true through the full Watchkeeper lifecycle.

Three contenders, same work, same concurrency, measured in one process run:

* **watchkeeper** – an embedded ``Runner`` (own thread, own event loop) on a fresh ledger;
  1,000 manual runs are queued through ``core.ledger.runs.trigger`` and each goes queued → spawned
  → running → verifying → succeeded with its outcome row, audit events and the supervisor's
  judgement. Timed from the first queue insert (all queued, then the runner started) to
  the last run judged.
* **raw** – ``asyncio.create_subprocess_exec("/bin/true")`` with stdout/stderr pipes
  drained (``communicate``), bounded by a semaphore at the same concurrency, no ledger.
* **huey** – ``huey.SqliteHuey`` with an in-process consumer of thread workers at the same
  concurrency; the task runs /bin/true with ``subprocess.run``. Timed from the first
  enqueue (all queued, then the consumer started) to the last result.

Goals: watchkeeper ≥ 0.8× raw and ≥ 1.0× Huey (runs per second).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import Figure, table

TRUE = "/bin/true"
TERMINAL_SQL = "('succeeded','failed','blocked','timed_out','orphaned','abandoned')"


def _cpu_s() -> float:
    """This process's CPU time so far (user + system, seconds; children not included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def bench_raw(n: int, concurrency: int) -> float:
    """Seconds for ``n`` raw spawns of /bin/true at ``concurrency``."""
    async def main() -> None:
        sem = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with sem:
                proc = await asyncio.create_subprocess_exec(
                    TRUE, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, start_new_session=True)
                await proc.communicate()
                if proc.returncode != 0:
                    raise RuntimeError("/bin/true failed")
        await asyncio.gather(*(one() for _ in range(n)))
    t0 = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - t0


def bench_huey(n: int, concurrency: int, tmp: Path) -> float:
    """Seconds for ``n`` Huey tasks running /bin/true, thread workers at ``concurrency``."""
    import logging

    from huey import SqliteHuey
    logging.getLogger("huey").setLevel(logging.WARNING)
    huey = SqliteHuey("bench", filename=str(tmp / "huey.db"))

    @huey.task()
    def run_true() -> int:
        return subprocess.run([TRUE], stdin=subprocess.DEVNULL, capture_output=True).returncode

    consumer = huey.create_consumer(workers=concurrency, worker_type="thread", periodic=False)
    # Same shape as the Watchkeeper figure: queue everything, then start the workers, so no
    # worker is asleep in Huey's empty-queue backoff when the work arrives.
    t0 = time.perf_counter()
    results = [run_true() for _ in range(n)]
    consumer.start()
    try:
        for r in results:
            rc = r.get(blocking=True, timeout=120, backoff=1.0, max_delay=0.005)
            if rc != 0:
                raise RuntimeError("huey task failed")
        return time.perf_counter() - t0
    finally:
        consumer.stop(graceful=True)


def bench_watchkeeper(n: int, concurrency: int, tmp: Path) -> tuple[float, dict[str, int]]:
    """Seconds for ``n`` runs of /bin/true through the full lifecycle, and a check summary."""
    from core.ledger.connection import Ledger
    from core.ledger.jobs import sync_jobs
    from core.ledger.runs import trigger
    from core.runner.runner import Runner
    from core.spec.loader import load_dir
    from core.spec.settings import load_settings

    spec_dir = tmp / "specs"
    spec_dir.mkdir()
    (spec_dir / "bench.toml").write_text(
        f'name = "bench-true"\ncommand = ["{TRUE}"]\nconcurrency = {concurrency}\ntimeout = "60s"\n'
        'intent = "Exit 0."\nowner = "bench@example.org"\n')
    settings = load_settings(spec_dir, ledger=str(tmp / "wk.db"), concurrency=concurrency)
    runner = Runner(spec_dir, settings, install_signal_handlers=False)
    errors: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(runner.run())
        except BaseException as exc:  # surfaced below
            errors.append(exc)
    led = Ledger(settings.ledger)
    sync_jobs(led, load_dir(spec_dir), actor="bench")  # so trigger knows the job before the runner starts
    th = threading.Thread(target=main, daemon=True)
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            trigger(led, "bench-true", actor="bench")
        th.start()
        if not runner.started.wait(30):
            raise RuntimeError("runner did not start")
        deadline = time.monotonic() + 600
        while True:
            done = led.one("SELECT COUNT(*) FROM job_outcomes WHERE judged_by IS NOT NULL")[0]
            if done >= n:
                break
            if time.monotonic() > deadline or errors:
                raise RuntimeError(f"only {done}/{n} runs finished" + (f": {errors[0]!r}" if errors else ""))
            # The poll is the benchmark's, not the runner's, but it shares the process (and
            # its GIL): a COUNT over the outcomes every 5 ms cost about 5 % of the runner's
            # CPU. Every 20 ms it is a quarter of that; the end is seen ≤ 20 ms late (< 1 %).
            time.sleep(0.02)
        elapsed = time.perf_counter() - t0
        summary = {
            "succeeded": led.one("SELECT COUNT(*) FROM runs WHERE state = 'succeeded'")[0],
            "outcomes": led.one("SELECT COUNT(*) FROM job_outcomes WHERE state = 'succeeded'")[0],
            "judged": led.one("SELECT COUNT(*) FROM job_outcomes WHERE judged_by IS NOT NULL")[0],
            "transitions": led.one("SELECT COUNT(*) FROM events WHERE kind = 'transition'")[0],
        }
    finally:
        led.close()
        runner.request_stop()
        th.join(60)
    w = getattr(runner, "writer", None)
    if w is not None and w.transactions:
        summary["writes"], summary["transactions"] = w.writes, w.transactions
    return elapsed, summary


def run(quick: bool = False, runs: int | None = None, concurrency: int = 16) -> list[Figure]:
    n = runs or (200 if quick else 1000)
    with tempfile.TemporaryDirectory(prefix="wk-bench-tp-") as d:
        tmp = Path(d)
        bench_raw(min(n, 50), concurrency)  # warm-up: page cache, fork path
        # Imported before the clocks start, as in a running runner (its ~0.2 s of CPU is not
        # a cost per run).
        import core.runner.runner  # noqa: F401
        c0 = _cpu_s()
        raw_s = bench_raw(n, concurrency)
        c1 = _cpu_s()
        wk_s, summary = bench_watchkeeper(n, concurrency, tmp)
        c2 = _cpu_s()
        raw_ms, wk_ms = (c1 - c0) / n * 1000, (c2 - c1) / n * 1000
        (tmp / "huey").mkdir()
        try:
            huey_s: float | None = bench_huey(n, concurrency, tmp / "huey")
        except ImportError:
            huey_s = None
    wk, raw = n / wk_s, n / raw_s
    full = summary["succeeded"] == n and summary["outcomes"] == n and summary["judged"] == n \
        and summary["transitions"] >= 4 * n
    note = (f"{n} runs, concurrency {concurrency}; ledger check: {summary['succeeded']} succeeded, "
            f"{summary['outcomes']} outcomes, {summary['judged']} judged, {summary['transitions']} transitions"
            + (f"; group commit: {summary['writes']:,} writes in {summary['transactions']:,} transactions"
               f" ({summary['writes'] / summary['transactions']:.1f} per transaction)" if "writes" in summary else "")
            + ("" if full else " — INCOMPLETE"))
    figs = [Figure("runner throughput vs raw spawn", wk, "runs/s", raw, "raw asyncio spawn", wk / raw,
                   "≥ 0.8x raw", full and wk / raw >= 0.8, note)]
    # The GIL serialises the runner's Python work, so runs/s is bounded by 1 / (CPU per run):
    # the floor, and where it goes, is in README "Runner internals and costs".
    figs.append(Figure("runner CPU per run (this process)", wk_ms, "ms", raw_ms, "raw asyncio spawn",
                       raw_ms / wk_ms if wk_ms else None, "", None,
                       f"user+system CPU of the benchmark process per run; ceiling ≈ {1000 / wk_ms:.0f} runs/s"
                       " on one core of Python"))
    if huey_s is not None:
        hu = n / huey_s
        figs.append(Figure("runner throughput vs Huey", wk, "runs/s", hu, "SqliteHuey threads", wk / hu,
                           "≥ 1.0x Huey", full and wk / hu >= 1.0))
    else:
        figs.append(Figure("runner throughput vs Huey", wk, "runs/s", None, "huey not installed", None,
                           "≥ 1.0x Huey", None, "install the bench extra (pip install -e '.[bench]')"))
    return figs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    figs = run(a.quick, a.runs, a.concurrency)
    print(json.dumps([f.to_dict() for f in figs], indent=2) if a.json else table(figs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
