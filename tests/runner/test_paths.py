"""Each sample-job path end to end through the real runner, with real processes."""

from __future__ import annotations

import json
import sys
import time

import psutil
import pytest

from tests.kit.harness import RunnerThread, fast_settings, query, terminal_runs, wait_for, write_specs

PY = sys.executable


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _run_once(tmp_path, spec: str, job: str, *, count: int = 1, timeout: float = 20, **settings):
    specs = tmp_path / "jobs"
    write_specs(specs, spec)
    s = fast_settings(tmp_path, **settings)
    with RunnerThread(specs, s):
        wait_for(lambda: len(terminal_runs(s.ledger, job)) >= count, timeout=timeout)
    return s.ledger, terminal_runs(s.ledger, job)


def test_quiet_success_records_full_lifecycle(tmp_path):
    db, runs = _run_once(tmp_path, f'''
name = "ok"
command = ["{PY}", "-c", "print('hello')"]
once = true
''', "ok")
    r = runs[0]
    assert (r["state"], r["exit_code"], r["signal"], r["attempt"]) == ("succeeded", 0, None, 1)
    moves = [(e["from_state"], e["to_state"]) for e in query(
        db, "SELECT * FROM events WHERE run_id = ? AND kind = 'transition' ORDER BY id", (r["id"],))]
    assert moves == [("queued", "spawned"), ("spawned", "running"), ("running", "verifying"),
                     ("verifying", "succeeded")]
    o = query(db, "SELECT * FROM job_outcomes WHERE run_id = ?", (r["id"],))[0]
    assert o["stdout_head"] == "hello\n" and o["stdout_bytes"] == 6 and o["duration_s"] > 0
    assert r["pid"] and r["pid_create_time"] and r["pgid"] == r["pid"]


@pytest.mark.slow
def test_timeout_kills_grandchildren(tmp_path):
    pids = tmp_path / "pids.txt"
    code = (
        "import subprocess, sys, time\n"
        "inner = \"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']);"
        f" open(r'{pids}', 'a').write(str(p.pid) + chr(10)); time.sleep(600)\"\n"
        "for _ in range(2):\n"
        "    p = subprocess.Popen([sys.executable, '-c', inner])\n"
        f"    open(r'{pids}', 'a').write(str(p.pid) + chr(10))\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n")
    script = tmp_path / "forky.py"
    script.write_text(code)
    db, runs = _run_once(tmp_path, f'''
name = "forky"
command = ["{PY}", "{script}"]
once = true
timeout = "2s"
grace = "1s"
''', "forky")
    r = runs[0]
    assert r["state"] == "timed_out"
    wait_for(lambda: len(pids.read_text().split()) >= 4 if pids.exists() else False, timeout=15)
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 4
    time.sleep(0.3)
    assert [p for p in children + [r["pid"]] if _alive(p)] == []
    assert r["ended_at"] - r["started_at"] < 2 + 1 + 2


@pytest.mark.slow
def test_sigterm_ignorer_is_killed_within_timeout_plus_grace(tmp_path):
    script = tmp_path / "stubborn.py"
    script.write_text("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                      "print('ignoring', flush=True)\nwhile True: time.sleep(0.1)\n")
    db, runs = _run_once(tmp_path, f'''
name = "stubborn"
command = ["{PY}", "{script}"]
once = true
timeout = "1s"
grace = "1s"
''', "stubborn")
    r = runs[0]
    assert r["state"] == "timed_out" and r["signal"] == 9
    assert r["ended_at"] - r["started_at"] <= 1 + 1 + 1
    assert not _alive(r["pid"])


def test_output_cap_keeps_real_exit_status(tmp_path):
    db, runs = _run_once(tmp_path, f'''
name = "chatty"
command = ["{PY}", "-c", "import sys\\nfor i in range(200000): sys.stdout.write('x' * 99 + chr(10))\\nsys.stdout.write('LAST LINE')\\nsys.exit(3)"]
once = true
''', "chatty", output_cap=65536)
    r = runs[0]
    assert (r["state"], r["exit_code"]) == ("failed", 3)
    o = query(db, "SELECT * FROM job_outcomes WHERE run_id = ?", (r["id"],))[0]
    assert o["stdout_bytes"] == 200000 * 100 + 9
    assert o["output_truncated"] == 1
    from pathlib import Path
    log = Path(r["artifacts_dir"]) / "stdout.log"
    data = log.read_bytes()
    assert len(data) < 65536 + 200 and data.endswith(b"LAST LINE") and b"bytes omitted]" in data


def _handoff_job(tmp_path, body: str) -> dict:
    script = tmp_path / "worker.py"
    script.write_text("import os\n" + body)
    db, runs = _run_once(tmp_path, f'''
name = "worker"
command = ["{PY}", "{script}"]
once = true
''', "worker")
    return query(db, "SELECT * FROM job_outcomes WHERE run_id = ?", (runs[0]["id"],))[0] | {"run": runs[0]}


def test_handoff_valid(tmp_path):
    o = _handoff_job(tmp_path, "import json\njson.dump({'status': 'success', 'confidence': 0.8, 'steps_used': 3},"
                               " open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))\n")
    assert json.loads(o["handoff"])["confidence"] == 0.8 and json.loads(o["handoff_findings"]) == []
    assert o["run"]["state"] == "succeeded"


def test_handoff_malformed(tmp_path):
    o = _handoff_job(tmp_path, "open(os.environ['WATCHKEEPER_HANDOFF'], 'w').write('{\"status\": oops')\n")
    assert o["handoff"] is None and o["handoff_raw"] == '{"status": oops'
    assert [f["code"] for f in json.loads(o["handoff_findings"])] == ["invalid_json"]


def test_handoff_missing(tmp_path):
    o = _handoff_job(tmp_path, "print('plain job')\n")
    assert [f["code"] for f in json.loads(o["handoff_findings"])] == ["missing"]
    assert o["run"]["state"] == "succeeded"


def test_handoff_oversized(tmp_path):
    o = _handoff_job(tmp_path, "f = open(os.environ['WATCHKEEPER_HANDOFF'], 'w')\n"
                               "f.write('{\"status\": \"success\", \"notes\": \"' + 'n' * (2 * 1024 * 1024) + '\"}')\n")
    assert [f["code"] for f in json.loads(o["handoff_findings"])] == ["oversized"]
    assert o["handoff"] is None and len(o["handoff_raw"]) <= 64 * 1024


def test_handoff_env_is_given(tmp_path):
    o = _handoff_job(tmp_path, "import json\njson.dump({'status': 'success', 'result': {k: os.environ[k] for k in"
                               " ('WATCHKEEPER_RUN_ID', 'WATCHKEEPER_ATTEMPT', 'WATCHKEEPER_JOB')}},"
                               " open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))\n")
    res = json.loads(o["handoff"])["result"]
    assert res == {"WATCHKEEPER_RUN_ID": str(o["run"]["id"]), "WATCHKEEPER_ATTEMPT": "1", "WATCHKEEPER_JOB": "worker"}


@pytest.mark.slow
def test_command_not_found_is_a_failed_run(tmp_path):
    db, runs = _run_once(tmp_path, '''
name = "typo"
command = ["/nonexistent/definitely-not-here"]
once = true
''', "typo")
    r = runs[0]
    assert r["state"] == "failed" and r["reason"].startswith("could not start: no such command")
    assert r["exit_code"] == 127
    assert "/nonexistent/definitely-not-here" in r["reason"]


def test_bad_spec_does_not_stop_good_jobs(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, 'name = "bad"\ncommand = ["true"]\ntimeout = -4\nonce = true\n', "bad.toml")
    write_specs(specs, "this is [ not toml", "broken.toml")
    write_specs(specs, f'name = "good"\ncommand = ["{PY}", "-c", "pass"]\nonce = true\n', "good.toml")
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: terminal_runs(s.ledger, "good"), timeout=15)
    assert terminal_runs(s.ledger, "good")[0]["state"] == "succeeded"
    errors = query(s.ledger, "SELECT * FROM events WHERE kind = 'spec_error'")
    assert any("timeout" in (e["reason"] or "") for e in errors)


@pytest.mark.slow
def test_retries_and_not_before_survive_a_runner_restart(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "always-fails"
command = ["{PY}", "-c", "import sys; sys.exit(1)"]
once = true
max_attempts = 3
[backoff]
initial = "5s"  # room for a slow machine to stop the first runner before the retry is due
factor = 1
jitter = false
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: terminal_runs(s.ledger, "always-fails"), timeout=15)
    first = terminal_runs(s.ledger, "always-fails")[0]
    queued = query(s.ledger, "SELECT * FROM runs WHERE state = 'queued' AND job = 'always-fails'")
    assert len(queued) == 1
    q = queued[0]
    assert (q["attempt"], q["lineage"], q["trigger"]) == (2, first["lineage"], "retry")
    assert abs(q["not_before"] - (first["ended_at"] + 5.0)) < 0.5
    # A new runner instance picks the schedule up from the ledger.
    with RunnerThread(specs, s):
        wait_for(lambda: len(terminal_runs(s.ledger, "always-fails")) >= 3, timeout=40)
        time.sleep(0.5)
    runs = terminal_runs(s.ledger, "always-fails")
    assert [r["attempt"] for r in runs] == [1, 2, 3]
    assert all(r["state"] == "failed" for r in runs)
    assert runs[1]["started_at"] >= q["not_before"] - 0.05
    assert query(s.ledger, "SELECT COUNT(*) n FROM runs WHERE state = 'queued'")[0]["n"] == 0
    decision = query(s.ledger, "SELECT * FROM events WHERE kind = 'retry_decision' AND run_id = ?", (runs[2]["id"],))
    assert decision[-1]["reason"] == "max_attempts_reached"


def test_no_retry_on_ends_the_lineage(tmp_path):
    db, runs = _run_once(tmp_path, f'''
name = "permanent"
command = ["{PY}", "-c", "import sys; sys.exit(2)"]
once = true
max_attempts = 5
no_retry_on = [2]
''', "permanent")
    time.sleep(0.2)
    assert len(terminal_runs(db, "permanent")) == 1
    assert query(db, "SELECT COUNT(*) n FROM runs WHERE state = 'queued'")[0]["n"] == 0


@pytest.mark.slow
def test_every_job_runs_once_per_slot(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "tick"\ncommand = ["{PY}", "-c", "pass"]\nevery = "1s"\n')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: len(terminal_runs(s.ledger, "tick")) >= 3, timeout=15)
    rows = query(s.ledger, "SELECT slot, COUNT(*) n FROM runs WHERE job = 'tick' GROUP BY slot, attempt")
    assert all(r["n"] == 1 for r in rows)


def test_relative_ledger_path_gives_jobs_an_absolute_handoff_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "rel"
command = ["{PY}", "-c", "import json, os; json.dump({{'status': 'success'}}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))"]
cwd = "/"
once = true
''')
    from core.spec.settings import load_settings
    from tests.kit.harness import FAST
    s = load_settings(None, ledger="rel/wk.db", **FAST)
    assert s.ledger.is_absolute() and s.artifacts_dir.is_absolute()
    with RunnerThread(specs, s):
        wait_for(lambda: terminal_runs(s.ledger, "rel"), timeout=15)
    assert terminal_runs(s.ledger, "rel")[0]["state"] == "succeeded"


@pytest.mark.slow
def test_unusable_artifacts_folder_degrades_capture_not_the_verdict(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the artifacts folder should be")
    db, runs = _run_once(tmp_path, f'''
name = "plain"
command = ["{PY}", "-c", "print('still ran')"]
once = true
''', "plain", artifacts=str(blocker))
    r = runs[0]
    assert (r["state"], r["exit_code"]) == ("succeeded", 0)
    o = query(db, "SELECT * FROM job_outcomes WHERE run_id = ?", (r["id"],))[0]
    codes = [f["code"] for f in json.loads(o["handoff_findings"])]
    assert "capture_degraded" in codes
    assert o["stdout_bytes"] == len("still ran\n") and o["stdout_head"] == "still ran\n"


@pytest.mark.slow
def test_fast_jobs_never_get_a_negative_duration(tmp_path):
    """``true`` can exit before spawn returns; the duration is measured from before the spawn."""
    db, runs = _run_once(tmp_path, '''
name = "blink"
command = ["true"]
every = "1s"
concurrency = 1
''', "blink", count=6, timeout=30)
    durations = [r["duration_s"] for r in query(db, "SELECT duration_s FROM job_outcomes")]
    assert durations and all(d is not None and d >= 0 for d in durations), durations
    assert all(r["started_at"] <= r["ended_at"] for r in runs)
