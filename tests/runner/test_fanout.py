"""Fan-out / fan-in: all-settled, isolated sub-tasks, synthesis gets exactly the results."""

from __future__ import annotations

import json
import sys
import time

from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs

PY = sys.executable


def _parent(db):
    rows = query(db, "SELECT * FROM runs WHERE task = '' AND state IN ('succeeded','failed','timed_out')")
    return rows[0] if rows else None


def test_all_settled_with_one_crashing_and_one_hanging(tmp_path):
    synth_in = tmp_path / "synth_in.json"
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "research"
kind = "fanout"
once = true
timeout = "30s"
concurrency = 3
synthesize = ["{PY}", "-c", "import sys, shutil; shutil.copyfileobj(sys.stdin.buffer, open(r'{synth_in}', 'wb')); print('synth ok')"]

[[tasks]]
name = "good"
command = ["{PY}", "-c", "import json, os, time; time.sleep(0.5); json.dump({{'status': 'success', 'result': {{'n': 7}}}}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))"]

[[tasks]]
name = "crash"
command = ["{PY}", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]

[[tasks]]
name = "hang"
command = ["{PY}", "-c", "import time; time.sleep(600)"]
timeout = "1.5s"
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        parent = wait_for(lambda: _parent(s.ledger), timeout=30)
    assert parent["state"] == "succeeded"
    o = query(s.ledger, "SELECT * FROM job_outcomes WHERE run_id = ?", (parent["id"],))[0]
    assert o["status"] == "partial"
    handoff = json.loads(o["handoff"])
    assert sorted(handoff["result"]["missing"]) == ["crash", "hang"]
    assert "crash" in handoff["notes"] and "hang" in handoff["notes"]
    kids = {r["task"]: r for r in query(s.ledger, "SELECT * FROM runs WHERE parent_run_id = ?", (parent["id"],))}
    assert kids["good"]["state"] == "succeeded"
    assert kids["crash"]["state"] == "failed" and kids["crash"]["signal"] == 9
    assert kids["hang"]["state"] == "timed_out"
    # synthesis received exactly the results, one per sub-task
    doc = json.loads(synth_in.read_text())
    assert doc["succeeded"] == ["good"] and sorted(doc["failed"]) == ["crash", "hang"]
    by = {t["task"]: t for t in doc["tasks"]}
    assert by["good"]["result"] == {"n": 7} and by["crash"]["signal"] == 9 and by["hang"]["state"] == "timed_out"
    # siblings ran in parallel: the good one finished long before the hanging one was killed
    assert kids["good"]["ended_at"] < kids["hang"]["ended_at"]
    # the supervisor pages once, on the parent, naming what is missing; sub-tasks stay silent
    wait_for(lambda: query(s.ledger, "SELECT 1 FROM escalations"), timeout=15)
    esc = query(s.ledger, "SELECT * FROM escalations")
    assert [(e["kind"], e["latest_run_id"]) for e in esc] == [("partial", parent["id"])]
    assert "crash" in esc[0]["reason"] and "hang" in esc[0]["reason"]


def test_all_succeeded_is_success_and_parallel(tmp_path):
    specs = tmp_path / "jobs"
    tasks = "\n".join(f'''
[[tasks]]
name = "t{i}"
command = ["{PY}", "-c", "import time; time.sleep(1.0)"]
''' for i in range(3))
    write_specs(specs, f'name = "par"\nkind = "fanout"\nonce = true\nconcurrency = 3\n{tasks}')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        parent = wait_for(lambda: _parent(s.ledger), timeout=30)
    assert parent["state"] == "succeeded"
    o = query(s.ledger, "SELECT status FROM job_outcomes WHERE run_id = ?", (parent["id"],))[0]
    assert o["status"] == "success"
    kids = query(s.ledger, "SELECT * FROM runs WHERE parent_run_id = ?", (parent["id"],))
    starts = sorted(k["started_at"] for k in kids)
    assert starts[-1] - starts[0] < 0.9  # all three started before the first could finish


def test_failed_without_synthesis_fails_parent(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "nosynth"
kind = "fanout"
once = true
concurrency = 2
[[tasks]]
name = "ok"
command = ["{PY}", "-c", "pass"]
[[tasks]]
name = "bad"
command = ["{PY}", "-c", "raise SystemExit(3)"]
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        parent = wait_for(lambda: _parent(s.ledger), timeout=30)
    assert parent["state"] == "failed"


def test_subtask_retries_within_its_own_attempts(tmp_path):
    counter = tmp_path / "count"
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "retrying"
kind = "fanout"
once = true
[backoff]
initial = "0.1s"
jitter = false
[[tasks]]
name = "flaky"
max_attempts = 3
command = ["{PY}", "-c", "import os, sys; p = r'{counter}'; n = int(open(p).read()) if os.path.exists(p) else 0; open(p, 'w').write(str(n + 1)); sys.exit(0 if n >= 1 else 1)"]
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        parent = wait_for(lambda: _parent(s.ledger), timeout=30)
        time.sleep(0.2)
    assert parent["state"] == "succeeded"
    kids = query(s.ledger, "SELECT attempt, state FROM runs WHERE parent_run_id = ? ORDER BY attempt", (parent["id"],))
    assert [(k["attempt"], k["state"]) for k in kids] == [(1, "failed"), (2, "succeeded")]
