"""Crash recovery end to end: the real runner as a subprocess, real jobs, real signals."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from core import monitor
from core.ledger import lifecycle
from core.sweep.doctor import check
from core.sweep.sweep import Sweeper
from core.vocabulary import EndReason
from tests.kit.runners import PY, QUICK_RETRY
from tests.kit.sweep import events, pid_alive, wait_for


def run_state(rig, run_id):
    return rig.query("SELECT state FROM runs WHERE id = ?", (run_id,))[0]["state"]


def test_job_killed_with_sigkill_ends_terminal_with_signal_9(rig, tmp_path):
    rig.write('name = "victim"\ncommand = ["sleep", "60"]\nonce = true\n')
    rig.start()
    assert wait_for(lambda: [r for r in rig.runs("victim") if r["state"] == "running"])
    run = rig.runs("victim")[0]
    os.kill(run["pid"], signal.SIGKILL)
    assert wait_for(lambda: rig.runs("victim")[0]["state"] in lifecycle.TERMINAL)
    row = rig.runs("victim")[0]
    assert row["state"] == "failed" and row["signal"] == 9 and row["exit_code"] is None


def test_runner_and_monitor_killed_mid_run_is_orphaned_at_restart_and_retried(rig, tmp_path):
    """Nothing can tell how the run ends (its runner and its monitor are gone): the next
    runner kills the job, orphans the run and retries it."""
    marker = tmp_path / "first-attempt-ran"
    rig.write(f'''
name = "crashy"
command = ["{PY}", "-c", "import os,sys,time; p=r'{marker}'; sys.exit(0) if os.path.exists(p) else (open(p,'w').close(), time.sleep(60))"]
once = true
max_attempts = 2
{QUICK_RETRY}''')
    runner = rig.start()
    assert wait_for(lambda: [r for r in rig.runs("crashy") if r["state"] == "running"])
    first = rig.runs("crashy")[0]
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait()
    assert pid_alive(first["pid"]), "the job outlives its runner (own session)"
    monitor_pid = monitor.monitor_pid(Path(first["artifacts_dir"]))
    assert monitor_pid is not None
    os.killpg(monitor_pid, signal.SIGKILL)  # its monitor too: nothing keeps the exit status

    rig.start()
    assert wait_for(lambda: len(rig.runs("crashy")) == 2 and rig.runs("crashy")[1]["state"] in lifecycle.TERMINAL)
    one, two = rig.runs("crashy")
    assert (one["attempt"], one["state"], one["reason"]) == (1, "orphaned", "runner_gone")
    assert (two["attempt"], two["state"]) == (2, "succeeded")
    assert not pid_alive(first["pid"]), "the gone runner's job was killed, not left running unsupervised"
    moved = [e for e in events_of(rig, one["id"]) if e["to_state"] == "orphaned"]
    assert len(moved) == 1 and moved[0]["actor"].startswith("runner:") and moved[0]["actor"] != f"runner:{one['runner_id']}"

    # Fencing: attempt 1's late arrivals lose, attempt 2 stays as it is.
    led = rig.led
    assert not lifecycle.transition(led, one["id"], 1, "running", "verifying", actor="runner:stale")
    assert not lifecycle.transition(led, two["id"], 1, "verifying", "failed", reason_code=EndReason.EXIT_CODE, actor="runner:stale")
    assert check(led, rig.settings()) == []
    assert rig.runs("crashy")[1]["state"] == "succeeded"


def events_of(rig, run_id):
    return rig.query("SELECT * FROM events WHERE run_id = ? AND kind = 'transition' ORDER BY id", (run_id,))


@pytest.mark.slow
def test_stopped_runner_beyond_its_lease_is_not_falsely_orphaned(rig, tmp_path):
    gate = tmp_path / "go"
    rig.write(f'''
name = "patient"
command = ["{PY}", "-c", "import os,time\\nwhile not os.path.exists(r'{gate}'): time.sleep(0.05)"]
once = true
''')
    runner = rig.start()
    assert wait_for(lambda: [r for r in rig.runs("patient") if r["state"] == "running"])
    run_id = rig.runs("patient")[0]["id"]
    os.kill(runner.pid, signal.SIGSTOP)
    try:
        time.sleep(2.5)  # > lease (1 s): the lease and the heartbeat are both stale now
        report = Sweeper(rig.settings(), actor="sweep").sweep_once(rig.led)
        assert report.orphaned == [] and len(report.stalled_runners) == 1
    finally:
        os.kill(runner.pid, signal.SIGCONT)
    gate.touch()
    assert wait_for(lambda: run_state(rig, run_id) in lifecycle.TERMINAL)
    assert run_state(rig, run_id) == "succeeded"
    assert [e for e in events(rig.led, run_id, "transition") if e["to_state"] == "orphaned"] == []


@pytest.mark.slow
def test_two_runners_on_one_ledger_run_each_slot_once(rig, tmp_path):
    seen = tmp_path / "seen.txt"
    rig.write(f'''
name = "tick"
command = ["{PY}", "-c", "import os; open(r'{seen}','a').write(os.environ['WATCHKEEPER_RUN_ID'] + chr(10))"]
every = "1s"
''')
    rig.start()
    rig.start()
    assert wait_for(lambda: len([r for r in rig.runs("tick") if r["state"] == "succeeded"]) >= 6, timeout=30)
    rig.stop_all()
    runs = rig.runs("tick")
    slots = [r["slot"] for r in runs]
    assert len(slots) == len(set(slots)), "a slot was queued twice"
    ids = seen.read_text().split()
    assert len(ids) == len(set(ids)), "a run executed twice"
    assert len({r["runner_id"] for r in runs if r["runner_id"]}) >= 1


def test_job_that_kills_itself_runs_exactly_max_attempts(rig, tmp_path):
    rig.write(f'''
name = "suicidal"
command = ["{PY}", "-c", "import os,signal; os.kill(os.getpid(), signal.SIGKILL)"]
once = true
max_attempts = 3
{QUICK_RETRY}''')
    rig.start()
    assert wait_for(lambda: len(rig.runs("suicidal")) == 3
                    and all(r["state"] in lifecycle.TERMINAL for r in rig.runs("suicidal")))
    time.sleep(0.5)  # room for a (wrong) fourth attempt to appear
    runs = rig.runs("suicidal")
    assert [(r["attempt"], r["state"], r["signal"]) for r in runs] == [(a, "failed", 9) for a in (1, 2, 3)]
    last = rig.query("SELECT reason FROM events WHERE run_id = ? AND kind = 'retry_decision'", (runs[-1]["id"],))
    assert [e["reason"] for e in last] == ["max_attempts_reached"]


def test_exit_after_the_run_was_orphaned_is_a_late_result(rig, tmp_path):
    gate = tmp_path / "go"
    rig.write(f'''
name = "late"
command = ["{PY}", "-c", "import os,sys,time\\nwhile not os.path.exists(r'{gate}'): time.sleep(0.05)\\nsys.exit(3)"]
once = true
''')
    rig.start()
    assert wait_for(lambda: [r for r in rig.runs("late") if r["state"] == "running"])
    run = rig.runs("late")[0]
    # Declared dead elsewhere (e.g. a sweep on another host) while the process still runs.
    assert lifecycle.transition(rig.led, run["id"], 1, "running", "orphaned", reason_code=EndReason.LEASE_EXPIRED, actor="sweep", reason="test")
    gate.touch()
    assert wait_for(lambda: rig.query("SELECT * FROM events WHERE run_id = ? AND kind = 'late_result'", (run["id"],)))
    late = rig.query("SELECT * FROM events WHERE run_id = ? AND kind = 'late_result'", (run["id"],))[0]
    assert '"exit_code": 3' in late["detail"]
    assert run_state(rig, run["id"]) == "orphaned"
