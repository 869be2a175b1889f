"""Retention under load: prune a 1,000,000-run ledger to 100,000 while a runner keeps running
a job every second on the same ledger; report the ledger's size and the runner's lag.

    python -m bench.retention_bench [--quick] [--json]

The ledger is generated with batched inserts (runs, one outcome and two audit events each,
spread 2 s apart over the past, 50 jobs). A real runner (``watchkeeper run``, its own process,
as under systemd) runs ``tick`` (``every = "1s"``) against it. Lag is how late each ``tick``
run started after its slot (``runs.started_at - runs.not_before``), measured first for a
while with no prune (the baseline, in the same run), then while ``retention.prune`` — what
``watchkeeper prune`` and the runner's daily prune call — deletes 900,000 runs and gives the
space back. ``--quick`` does the same at a tenth of the size.

Artifact folders are not generated: removing one costs a file system ``rmdir``, outside the
ledger's transactions, so it does not bear on the runner's lag.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import GENERATED_STATES, INSERT_FINISHED_RUN, Figure, bench_main, finished_run, insert_jobs
from core.ledger import retention
from core.ledger.connection import Ledger

SPACING_S = 2.0
GOAL_LAG_P95_S = 1.0  # a job due every second still starts within its second, p95
GOAL_TX_MS = 50.0


def generate(path: Path, runs: int, *, jobs: int = 50, seed: int = 7) -> float:
    """``runs`` finished runs (outcome + 2 events each) ending ``SPACING_S`` apart up to now.
    Returns seconds taken."""
    rng = random.Random(seed)
    t0 = time.perf_counter()
    now = time.time()
    with Ledger(path) as db:
        c = db.conn
        c.execute("PRAGMA synchronous=OFF")
        c.execute("BEGIN")
        names = insert_jobs(c, jobs, now)
        batch = 50_000
        for start in range(0, runs, batch):
            rows, outs, evs = [], [], []
            for i in range(start, min(runs, start + batch)):
                job = names[i % jobs]
                state = rng.choice(GENERATED_STATES)
                ended = now - (runs - i) * SPACING_S
                rows.append(finished_run(i, job, state, ended))
                outs.append((i + 1, job, f"{job}:{i}", 1, state, "success" if state == "succeeded" else state,
                             9.0, "copied 41 files\n", ended, ended))
                evs.append((ended - 10, i + 1, job, 1, "runner:bench", "run_queued", None, "queued"))
                evs.append((ended, i + 1, job, 1, "runner:bench", "transition", "verifying", state))
            c.executemany(INSERT_FINISHED_RUN, rows)
            c.executemany(
                "INSERT INTO job_outcomes (run_id, job, lineage, attempt, state, status, duration_s, stdout_tail,"
                " created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)", outs)
            c.executemany(
                "INSERT INTO events (at, run_id, job, attempt, actor, kind, from_state, to_state)"
                " VALUES (?,?,?,?,?,?,?,?)", evs)
        c.execute("COMMIT")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return time.perf_counter() - t0


def _lags(path: Path, since: float, until: float) -> list[float]:
    with Ledger(path, read_only=True) as db:
        rows = db.query("SELECT started_at - not_before FROM runs WHERE job = 'tick' AND started_at IS NOT NULL"
                        " AND not_before >= ? AND not_before < ? LIMIT 100000", (since, until))
    return [max(0.0, r[0]) for r in rows]


def _p(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run(quick: bool) -> list[Figure]:
    total = 100_000 if quick else 1_000_000
    keep = total // 10
    baseline_s = 15.0 if quick else 30.0
    with tempfile.TemporaryDirectory(prefix="wk-bench-retention-") as tmp:
        root = Path(tmp)
        db = root / "wk.db"
        gen_s = generate(db, total)
        specs = root / "jobs"
        specs.mkdir()
        (specs / "tick.toml").write_text('name = "tick"\nevery = "1s"\ncommand = ["true"]\n')
        size_before = retention.total_size(Ledger(db, read_only=True), None)
        exe = Path(sys.executable).parent / "watchkeeper"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        runner = subprocess.Popen([str(exe), "run", str(specs), "--ledger", str(db), "--quiet"],
                                  stdout=subprocess.DEVNULL, stderr=open(root / "runner.log", "w"), env=env,
                                  start_new_session=True)
        try:
            # Wait for the runner's first tick, then measure a quiet stretch as the baseline.
            deadline = time.time() + 120
            while time.time() < deadline and not _lags(db, 0, 2e10):
                time.sleep(0.5)
            base_from = time.time()
            time.sleep(baseline_s)
            base_to = time.time()
            with Ledger(db) as led:
                rep = retention.prune(led, max_age=keep * SPACING_S - 1, max_size=None, keep_per_job=60,
                                      artifacts_dir=None, batch=5000)
            prune_to = time.time()
            time.sleep(2.0)
        finally:
            os.killpg(runner.pid, signal.SIGTERM)
            runner.wait(60)
        base = _lags(db, base_from, base_to)
        during = _lags(db, base_to, prune_to)
        with Ledger(db, read_only=True) as led:
            left = led.one("SELECT COUNT(*) FROM runs WHERE job != 'tick'")[0]
        size_after = os.path.getsize(db) + (os.path.getsize(f"{db}-wal") if os.path.exists(f"{db}-wal") else 0)
    where = f"{total:,}-run ledger generated in {gen_s:.0f} s"
    longest = max(rep.max_tx_s, rep.max_vacuum_step_s)
    mb = 1024 * 1024
    return [
        Figure(f"retention: runs left after prune of {total:,}", left, "runs", None, "", None,
               f"≈ {keep:,}", abs(left - keep) <= keep * 0.01, f"{rep.runs:,} runs removed in {rep.elapsed_s:.0f} s"
               f" ({rep.batches:,} batches, {rep.events:,} events); {where}"),
        Figure("retention: ledger size after prune", size_after / mb, "MB", size_before / mb, "before prune",
               size_before / size_after if size_after else None, "", None,
               f"{rep.vacuumed_pages:,} pages given back by incremental vacuum"),
        Figure("retention: longest prune write (delete batch or vacuum step)", longest * 1000, "ms", None, "", None,
               f"≤ {GOAL_TX_MS:g} ms", longest * 1000 <= GOAL_TX_MS,
               f"delete batches: p99 {rep.p99_tx_s * 1000:.0f} ms, max {rep.max_tx_s * 1000:.0f} ms over"
               f" {rep.batches:,}; longest vacuum step {rep.max_vacuum_step_s * 1000:.0f} ms (wall time: on a"
               f" shared machine the longest is a batch that lost its core, see p99)"),
        Figure("retention: runner lag p95 while pruning", _p(during, 0.95), "s", _p(base, 0.95),
               "same runner, no prune", (_p(base, 0.95) / _p(during, 0.95)) if during and _p(during, 0.95) else None,
               f"≤ {GOAL_LAG_P95_S:g} s", bool(during) and _p(during, 0.95) <= GOAL_LAG_P95_S,
               f"{len(during)} tick runs while pruning: median {statistics.median(during) if during else 0:.3f} s,"
               f" max {max(during, default=0):.3f} s; baseline {len(base)} runs, max {max(base, default=0):.3f} s"),
    ]


if __name__ == "__main__":
    sys.exit(bench_main("python -m bench.retention_bench", run))
