"""Ledger transition rate and judge cost per outcome.

* Transitions/s through ``core.ledger.lifecycle.transition`` (``BEGIN IMMEDIATE``, compare-and-set
  ``UPDATE … WHERE id=? AND state=? AND attempt=?``, audit event, ``COMMIT``), each run moved
  queued → spawned → running → verifying → succeeded, vs a raw ``UPDATE runs SET state=?``
  per move in its own transaction without CAS or audit (baseline). No goal: the ratio is the
  price of the audit trail and the compare-and-set.
* Ledger bytes per routine run: a quiet success taken through the real write path
  (``runs.create``, the lifecycle moves with their audit events, the runner's outcome record
  with typical output slices, ``supervisor.settle`` → ``terminal.finish`` and the rules
  judgement), measured as file bytes after ``VACUUM`` divided by the runs, with the share of
  each table (``dbstat``); baseline: the same runs as bare ``runs`` rows (state only, no audit
  trail, no outcome). No goal: the ratio is the price of the evidence kept per run.
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
    from core.vocabulary import EndReason

    with Ledger(tmp / "lc.db") as led:
        ids = _seed(led, n_runs)
        t0 = time.perf_counter()
        for a, b in MOVES:
            for rid in ids:
                code = EndReason.COMPLETED if b == "succeeded" else None
                if not lifecycle.transition(led, rid, 1, a, b, actor="bench", reason_code=code):
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


def bench_bytes(n_runs: int, tmp: Path) -> tuple[float, float, dict[str, float]]:
    """(bytes per routine run, bytes per bare runs row, {table: bytes per run})."""
    from core.ledger import lifecycle, outcomes, runs
    from core.ledger.connection import Ledger
    from core.spec.model import JobSpec, spec_json
    from core.supervisor import supervisor

    spec = JobSpec(name="nightly-report", command=["python3", "report.py"], timeout=600,
                   intent="Write the nightly report.", owner="ops@example.org")
    stdout = "".join(f"2026-11-30T04:1{i}:00Z exported {1000 + i} rows to reports/day.csv\n" for i in range(4))

    def size(led: Ledger) -> tuple[int, dict[str, int]]:
        led.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        led.conn.execute("VACUUM")
        pages = {r[0]: int(r[1]) for r in led.conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")}
        return led.path.stat().st_size, pages

    # An empty ledger's schema pages are a fixed cost, not a per-run one.
    with Ledger(tmp / "empty.db") as led:
        empty, empty_pages = size(led)

    with Ledger(tmp / "bytes.db") as led:
        now = time.time()
        led.write(lambda c: c.execute(
            "INSERT INTO jobs (name, spec, spec_hash, updated_at) VALUES (?,?,?,?)",
            (spec.name, spec_json(spec), spec.spec_hash(), now)))
        for i in range(n_runs):
            t = now + i * 86400.0
            rid = led.write(lambda c, t=t, i=i: runs.create(
                c, job=spec.name, slot=f"2026-01-01T04:00:00Z+{i}", trigger="schedule", actor="runner:bench",
                not_before=t, spec_hash=spec.spec_hash(), now=t, detail={"slot": f"s{i}"}))
            assert rid is not None
            fields = {"runner_id": None, "pid": 4242, "pid_create_time": t, "pgid": 4242, "lease_until": t + 30,
                      "spawned_at": t, "artifacts_dir": f"/var/lib/watchkeeper/artifacts/{rid}"}
            lifecycle.transition(led, rid, 1, "queued", "spawned", actor="runner:bench", fields=fields)
            lifecycle.transition(led, rid, 1, "spawned", "running", actor="runner:bench", fields={"started_at": t})
            lifecycle.transition(
                led, rid, 1, "running", "verifying", actor="runner:bench",
                fields={"exit_code": 0, "ended_at": t + 31.5},
                then=lambda c, rid=rid: outcomes.record(
                    c, rid, state="verifying", status="success", exit_code=0, duration_s=31.5,
                    stdout_bytes=len(stdout), stdout_head=stdout, stdout_tail=stdout, handoff_findings=[]))
            supervisor.settle(led, rid, settings=None, actor="supervisor")
        full, pages = size(led)
    with Ledger(tmp / "bare.db") as led:
        ids = _seed(led, n_runs)
        led.write(lambda c: c.executemany("UPDATE runs SET state = 'succeeded' WHERE id = ?", [(i,) for i in ids]))
        bare, _ = size(led)
    tables = {k: (v - empty_pages.get(k, 0)) / n_runs for k, v in pages.items() if v > empty_pages.get(k, 0)}
    return (full - empty) / n_runs, (bare - empty) / n_runs, tables


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
    with tempfile.TemporaryDirectory(prefix="wk-bench-bytes-") as d:
        per_run, bare, tables = bench_bytes(200 if quick else 1000, Path(d))
    top = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(tables.items(), key=lambda kv: -kv[1])[:4])
    figs.append(Figure("ledger bytes per routine run", per_run, "B", bare, "bare runs row, no audit/outcome",
                       bare / per_run, "", None, f"by table (B/run): {top}"))
    for name, us in bench_judge(500 if quick else 3000).items():
        figs.append(Figure(f"judge cost per outcome ({name})", us, "µs", None, "rules judge, 60 outcomes history",
                           None, "", None))
    return figs


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.ledger_bench", run, argv)


if __name__ == "__main__":
    sys.exit(main())
