"""Ledger transition rate and judge cost per outcome.

* Transitions/s through ``core.ledger.lifecycle.transition`` (``BEGIN IMMEDIATE``, compare-and-set
  ``UPDATE … WHERE id=? AND state=? AND attempt=?``, audit event, ``COMMIT``), each run moved
  queued → spawned → running → verifying → succeeded, vs a raw ``UPDATE runs SET state=?``
  per move in its own transaction without CAS or audit (baseline). No goal: the ratio is the
  price of the audit trail and the compare-and-set.
* µs per ``core.supervisor.rules.evaluate`` (the rules judge, pure) on realistic facts: a routine success
  with 60 outcomes of history (what ``judge_run`` reads), a failure, a soft anomaly.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import Figure, bench_main

MOVES = (("queued", "spawned"), ("spawned", "running"), ("running", "verifying"), ("verifying", "succeeded"))


def _seed(led, n: int) -> list[int]:
    now = time.time()

    def tx(conn):
        conn.execute("INSERT OR IGNORE INTO jobs (name, spec, spec_hash, updated_at) VALUES ('bench','{}','x',?)",
                     (now,))
        ids = []
        for _ in range(n):
            cur = conn.execute(
                "INSERT INTO runs (job, lineage, attempt, state, slot, trigger, not_before, created_at, updated_at)"
                " VALUES ('bench', ?, 1, 'queued', ?, 'manual', ?, ?, ?)",
                (uuid.uuid4().hex, f"manual:{uuid.uuid4().hex}", now, now, now))
            ids.append(int(cur.lastrowid))
        return ids
    return led.write(tx)


def bench_transitions(n_runs: int, tmp: Path) -> tuple[float, float]:
    """(lifecycle transitions/s, raw UPDATE transitions/s)."""
    from core.ledger import lifecycle
    from core.ledger.connection import Ledger

    with Ledger(tmp / "lc.db") as led:
        ids = _seed(led, n_runs)
        t0 = time.perf_counter()
        for a, b in MOVES:
            for rid in ids:
                if not lifecycle.transition(led, rid, 1, a, b, actor="bench"):
                    raise RuntimeError(f"transition {a}->{b} of run {rid} lost")
        lc = len(ids) * len(MOVES) / (time.perf_counter() - t0)
    with Ledger(tmp / "raw.db") as led:
        ids = _seed(led, n_runs)
        conn = led.conn
        t0 = time.perf_counter()
        for _a, b in MOVES:
            for rid in ids:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("UPDATE runs SET state = ? WHERE id = ?", (b, rid))
                conn.execute("COMMIT")
        raw = len(ids) * len(MOVES) / (time.perf_counter() - t0)
    return lc, raw


def bench_judge(iterations: int) -> dict[str, float]:
    """µs per ``judge.evaluate`` for three realistic cases."""
    from core.spec.model import JobSpec
    from core.supervisor.rules import OutcomeFacts, evaluate

    spec = JobSpec(name="nightly-report", command=["python3", "report.py"], timeout=600,
                   intent="Write the nightly report.", owner="ops@example.org")
    history = [OutcomeFacts(run_id=i, job="nightly-report", attempt=1, state="succeeded", status="success",
                            duration_s=30.0 + (i % 7), exit_code=0, ended_at=1.7e9 + i * 86400.0)
               for i in range(60)]
    cases = {
        "routine success": OutcomeFacts(run_id=99, job="nightly-report", duration_s=31.5, exit_code=0,
                                        handoff_status="success", confidence=0.9, verification_ok=True),
        "failure": OutcomeFacts(run_id=99, job="nightly-report", state="failed", status="failed",
                                reason="exit_code", exit_code=2, duration_s=3.0, verification_ok=None),
        "too slow": OutcomeFacts(run_id=99, job="nightly-report", duration_s=400.0, exit_code=0,
                                 verification_ok=True),
    }
    out = {}
    for name, case in cases.items():
        evaluate(case, history, spec)
        t0 = time.perf_counter()
        for _ in range(iterations):
            evaluate(case, history, spec)
        out[name] = (time.perf_counter() - t0) / iterations * 1e6
    return out


def run(quick: bool = False) -> list[Figure]:
    n_runs = 500 if quick else 2500
    with tempfile.TemporaryDirectory(prefix="wk-bench-ledger-") as d:
        lc, raw = bench_transitions(n_runs, Path(d))
    figs = [Figure("ledger transition rate", lc, "transitions/s", raw, "raw UPDATE, no CAS/audit", lc / raw,
                   "", None, f"{n_runs * len(MOVES)} moves through core.ledger.lifecycle.transition, one transaction each")]
    for name, us in bench_judge(500 if quick else 3000).items():
        figs.append(Figure(f"judge cost per outcome ({name})", us, "µs", None, "rules judge, 60 outcomes history",
                           None, "", None))
    return figs


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.ledger_bench", run, argv)


if __name__ == "__main__":
    sys.exit(main())
