"""Done-criterion: a clean restart in the middle of the demo (the sample jobs, as `make demo`
runs them) pages nothing for the restart. The runs the stop left behind keep running under
their monitors; the next runner re-attaches them and records each as it really ended; no
orphaned or runner_gap escalation appears at all."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.ledger.connection import Ledger
from core.ledger.runs import trigger
from tests.kit.runners import end_leftover_jobs
from tests.kit.sweep import wait_for

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
TERMINAL = ("succeeded", "failed", "blocked", "timed_out", "orphaned", "abandoned")


@pytest.mark.slow
def test_clean_restart_during_the_demo_opens_no_critical_escalation(tmp_path):
    specs = tmp_path / "sample_jobs"
    shutil.copytree(ROOT / "sample_jobs", specs, ignore=shutil.ignore_patterns("out", "missions*"))
    db = tmp_path / "demo" / "watchkeeper.db"
    env = {**os.environ, "WATCHKEEPER_SHUTDOWN_GRACE": "0.5", "PATH": f"{Path(PY).parent}:{os.environ['PATH']}"}
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        log = open(tmp_path / f"runner{len(procs)}.log", "w")  # noqa: SIM115 - the runner's, closed at exit
        p = subprocess.Popen([PY, "-m", "console.cli", "run", str(specs), "--ledger", str(db)], cwd=ROOT, env=env,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p

    def q(sql: str, params: tuple = ()) -> list[dict]:
        with Ledger(db) as led:
            return [dict(r) for r in led.query(sql, params)]

    try:
        first = start()
        wait_for(lambda: db.exists() and Path(f"{db}-wal").exists(), timeout=30)
        # Mid-demo: long jobs are running (the demo's hanging export, and a worker that ignores
        # SIGTERM; triggered now rather than waiting for their slots, as an operator would).
        wait_for(lambda: q("SELECT 1 FROM jobs WHERE name = 'stubborn-worker'"), timeout=30)
        with Ledger(db) as led:
            long_runs = [trigger(led, job, actor="operator:test") for job in ("hung-export", "stubborn-worker")]
        wait_for(lambda: len(q(f"SELECT 1 FROM runs WHERE id IN ({long_runs[0]}, {long_runs[1]})"
                               " AND state = 'running'")) == 2, timeout=30)
        os.killpg(first.pid, signal.SIGTERM)  # what Ctrl-C or `systemctl restart` does
        first.wait(timeout=60)
        (stopped,) = q("SELECT * FROM events WHERE kind = 'runner_stopped'")
        left = json.loads(stopped["detail"])["left_running"]
        assert set(long_runs) <= set(left), "the long runs were not left behind by the stop"
        start()
        marks = ",".join(map(str, left))
        wait_for(lambda: all(r["state"] in TERMINAL for r in q(f"SELECT state FROM runs WHERE id IN ({marks})")),
                 timeout=60)
        ended = q(f"SELECT id, state, reason FROM runs WHERE id IN ({marks})")
        # Each ran on under its monitor and was recorded as it really ended (the demo's hanging
        # export and stubborn worker really time out), never as interrupted or orphaned.
        assert all(r["state"] != "orphaned" and r["reason"] != "interrupted" for r in ended), ended
        assert {r["id"] for r in ended if r["state"] == "timed_out"} >= set(long_runs), ended
        reattached = {e["run_id"] for e in q("SELECT run_id FROM events WHERE kind = 'reattached'")}
        assert set(long_runs) <= reattached
        # Let the restarted runner judge and sweep for a few passes before looking.
        wait_for(lambda: not q(f"SELECT 1 FROM job_outcomes WHERE run_id IN ({marks}) AND judged_by IS NULL"),
                 timeout=30)
        kinds = {e["kind"] for e in q("SELECT kind FROM escalations")}
        assert not kinds & {"orphaned", "runner_gap"}, kinds
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        if db.exists():
            end_leftover_jobs(db)
