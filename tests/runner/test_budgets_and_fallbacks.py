"""Budgets and dual termination, fallback workers, rate_limit retries."""

from __future__ import annotations

import json
import sys

from tests.kit.harness import RunnerThread, fast_settings, query, terminal_runs, wait_for, write_specs

PY = sys.executable


def _once(tmp_path, spec, job, count=1):
    specs = tmp_path / "jobs"
    write_specs(specs, spec)
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: len(terminal_runs(s.ledger, job)) >= count, timeout=30)
        wait_for(lambda: not query(s.ledger, "SELECT 1 FROM runs WHERE state NOT IN ('succeeded','failed',"
                                             "'timed_out','orphaned','blocked','abandoned')"), timeout=30)
    return s.ledger, terminal_runs(s.ledger, job)


def test_wall_budget_ends_the_run(tmp_path):
    db, runs = _once(tmp_path, f'''
name = "slow-agent"
command = ["{PY}", "-c", "import time; time.sleep(60)"]
once = true
timeout = "1h"
grace = "0.5s"
[budget]
wall = "1s"
''', "slow-agent")
    r = runs[0]
    assert r["state"] == "timed_out" and "budget.wall" in r["reason"]
    assert r["ended_at"] - r["started_at"] < 3


def test_max_steps_is_passed_and_overrun_flagged(tmp_path):
    db, runs = _once(tmp_path, f'''
name = "stepper"
command = ["{PY}", "-c", "import json, os; n = int(os.environ['WATCHKEEPER_MAX_STEPS']); json.dump({{'status': 'success', 'steps_used': n + 5, 'cost': 3.5}}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))"]
once = true
max_steps = 7
[budget]
cost = 1.0
''', "stepper")
    o = query(db, "SELECT * FROM job_outcomes WHERE run_id = ?", (runs[0]["id"],))[0]
    assert json.loads(o["handoff"])["steps_used"] == 12
    msgs = [f["message"] for f in json.loads(o["handoff_findings"]) if f["code"] == "budget_exceeded"]
    assert any("steps_used=12 exceeds max_steps=7" in m for m in msgs)
    assert any("cost=3.5 exceeds budget.cost=1" in m for m in msgs)
    assert o["escalate"] == 1 and "budget" in (o["verdict_kind"] or "") + (o["verdict_reason"] or "")


def test_fallback_used_after_non_transient_failure(tmp_path):
    db, runs = _once(tmp_path, f'''
name = "with-fallback"
command = ["{PY}", "-c", "raise SystemExit(2)"]
fallback = ["{PY}", "-c", "print('fallback worked')"]
once = true
max_attempts = 2
no_retry_on = [2]
[backoff]
initial = "0.1s"
''', "with-fallback", count=2)
    assert [(r["attempt"], r["worker"], r["state"]) for r in runs] == [(1, "primary", "failed"),
                                                                      (2, "fallback", "succeeded")]
    rule = query(db, "SELECT reason FROM events WHERE kind = 'retry_decision' AND run_id = ?", (runs[0]["id"],))
    assert rule[0]["reason"] == "no_retry_on→fallback"


def test_rate_limit_error_retries_same_worker(tmp_path):
    db, runs = _once(tmp_path, f'''
name = "llm"
command = ["{PY}", "-c", "import json, os, sys; a = int(os.environ['WATCHKEEPER_ATTEMPT']); json.dump({{'status': 'failed' if a == 1 else 'success', 'error': 'rate_limit' if a == 1 else None}}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w')); sys.exit(1 if a == 1 else 0)"]
once = true
max_attempts = 3
retry_on = [75]
[backoff]
initial = "0.1s"
''', "llm", count=2)
    assert [(r["attempt"], r["worker"], r["state"]) for r in runs] == [(1, "primary", "failed"),
                                                                      (2, "primary", "succeeded")]


def test_low_confidence_is_escalated_not_retried(tmp_path):
    db, runs = _once(tmp_path, f'''
name = "unsure"
command = ["{PY}", "-c", "import json, os; json.dump({{'status': 'success', 'confidence': 0.2}}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))"]
once = true
max_attempts = 3
''', "unsure")
    assert len(runs) == 1 and runs[0]["state"] == "succeeded"
    esc = query(db, "SELECT * FROM escalations WHERE job = 'unsure'")
    assert esc and esc[0]["kind"] == "low_confidence"
