"""Who watches the runner: a dead runner reaches its owner through `watchkeeper sweep` alone,
and a runner that starts after a gap records it after the fact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger import runners
from core.ledger.connection import Ledger
from core.spec.model import JobSpec
from core.spec.settings import load_settings
from core.sweep import watch
from tests.kit.gap import PY, sent, sink_toml
from tests.kit.runners import ROOT
from tests.kit.sweep import add_runner, dead_pid, wait_for


@pytest.mark.slow
def test_kill_9_runner_reaches_the_owner_through_one_cron_sweep(rig, tmp_path):
    out = tmp_path / "pager.jsonl"
    rig.write('name = "tick"\ncommand = ["true"]\nevery = "1h"\n')
    (rig.specs / "watchkeeper.toml").write_text(sink_toml(out))
    proc = rig.start()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    # What a cron entry runs, once: nothing else of Watchkeeper is alive.
    res = subprocess.run([PY, "-m", "console.cli", "sweep", "--ledger", str(rig.db),
                          "--config", str(rig.specs / "watchkeeper.toml"), "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["watch"]["gap"] == "opened" and report["watch"]["sent"] == 1
    (note,) = sent(out)
    assert note["kind"] == "runner_gap" and note["owner"] == "ana" and note["severity"] == "critical"
    assert "process is gone" in note["reason"]
    # A second pass neither opens another escalation nor sends again.
    res = subprocess.run([PY, "-m", "console.cli", "sweep", "--ledger", str(rig.db),
                          "--config", str(rig.specs / "watchkeeper.toml"), "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert json.loads(res.stdout)["watch"]["gap"] is None and len(sent(out)) == 1


@pytest.mark.slow
def test_clean_stop_is_no_gap_for_the_sweep(rig, tmp_path):
    out = tmp_path / "pager.jsonl"
    rig.write('name = "tick"\ncommand = ["true"]\nevery = "1h"\n')
    (rig.specs / "watchkeeper.toml").write_text(sink_toml(out))
    proc = rig.start()
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=20)
    res = subprocess.run([PY, "-m", "console.cli", "sweep", "--ledger", str(rig.db),
                          "--config", str(rig.specs / "watchkeeper.toml"), "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and json.loads(res.stdout)["watch"]["gap"] is None
    assert sent(out) == []


def test_gap_after_a_clean_stop_is_not_recorded(tmp_path):
    with Ledger(tmp_path / "wk.db") as led:
        pid, ctime = dead_pid()
        add_runner(led, pid=pid, create_time=ctime, heartbeat_age=60, stopped=True)
        assert runners.past_gap(led, runner_id="new", started_at=time.time()) is None
        add_runner(led, pid=pid, create_time=ctime, heartbeat_age=30)
        gap = runners.past_gap(led, runner_id="new", started_at=time.time())
        assert gap is not None and 29 < gap.seconds < 40


def test_slots_in_gap_follow_the_misfire_policy():
    skip = JobSpec(name="a", command="true", every="10s")
    once = JobSpec(name="b", command="true", every="10s", misfire="run_once")
    manual = JobSpec(name="c", command="true")
    got = watch.slots_in_gap([once, skip, manual], 1000.0, 1035.0)
    assert [(g["job"], g["count"], g["outcome"]) for g in got] == [
        ("a", 3, "skipped"), ("b", 2, "skipped; the newest runs late once")]


def test_gap_slots_are_the_ones_not_run_as_the_scheduler_counts_them():
    """Slots queued before the runner died (they ran, or were orphaned) and the slot due at the
    new runner's first tick are not skipped; the count agrees with the scheduler's
    misfire_skipped event (plan_slots) and a long list says it is truncated."""
    from core.spec import schedule

    spec = JobSpec(name="exporter", command="true", every="2s")
    since = 1000.0  # the dead runner's last heartbeat
    last_queued = schedule.next_fire(spec, schedule.next_fire(spec, schedule.next_fire(spec, since)))
    until = last_queued + 60.0
    (got,) = watch.slots_in_gap([spec], since, until, last_slots={"exporter": last_queued})
    plan = schedule.plan_slots(spec, last_queued, until, tolerance=watch.FIRST_TICK_TOLERANCE_S)
    assert got["count"] == plan.missed == 28
    assert got["truncated"] and len(got["slots"]) == watch.MAX_SLOTS_LISTED
    assert got["slots"][-1] == schedule.slot_key(plan.missed_last)
    assert schedule.slot_key(plan.missed_first) not in got["slots"]  # the oldest fell off the list
    assert schedule.slot_key(last_queued) not in got["slots"] and all(
        schedule.slot_key(t) not in got["slots"] for t in plan.due)


def test_owner_defaults_to_the_operator(tmp_path, monkeypatch):
    monkeypatch.setenv("USER", "olga")
    assert load_settings(None, ledger=str(tmp_path / "wk.db")).runner_owner == "olga"
    (tmp_path / "watchkeeper.toml").write_text('owner = "ops-team"\n')
    assert load_settings(tmp_path, ledger=str(tmp_path / "wk.db")).runner_owner == "ops-team"


def test_sweep_cli_prints_the_gap(tmp_path):
    db = tmp_path / "wk.db"
    with Ledger(db) as led:
        pid, ctime = dead_pid()
        add_runner(led, pid=pid, create_time=ctime, heartbeat_age=1)
    res = CliRunner().invoke(cli, ["sweep", "--ledger", str(db)])
    assert res.exit_code == 0 and "runner gap" in res.output
    with Ledger(db) as led:
        (esc,) = [dict(r) for r in led.query("SELECT * FROM escalations")]
        assert esc["kind"] == "runner_gap" and esc["owner"]


def escalations_all(rig) -> list[dict]:
    return rig.query("SELECT * FROM escalations ORDER BY id")


@pytest.mark.slow
def test_clean_stop_leaves_runs_that_the_next_runner_reattaches_and_pages_nothing(rig, tmp_path):
    gate = tmp_path / "go"
    wait_gate = f"until [ -e {gate} ]; do sleep 0.1; done"
    rig.write(f'[[job]]\nname = "long"\ncommand = ["sh", "-c", "{wait_gate}"]\nonce = true\nmax_attempts = 2\n'
              f'[[job]]\nname = "single"\ncommand = ["sh", "-c", "{wait_gate}; exit 4"]\nonce = true\n')
    first = rig.start()
    wait_for(lambda: len(rig.query("SELECT 1 FROM runs WHERE state = 'running'")) == 2)
    left = sorted(r["id"] for r in rig.query("SELECT id FROM runs WHERE state = 'running'"))
    os.killpg(first.pid, signal.SIGTERM)
    first.wait(timeout=20)
    (stopped,) = rig.query("SELECT * FROM events WHERE kind = 'runner_stopped'")
    detail = json.loads(stopped["detail"])
    assert sorted(detail["left_running"]) == left and detail["signal"] == "SIGTERM"  # attributed
    assert stopped["actor"].startswith("runner:") and "SIGTERM" in stopped["reason"]
    # `run` says which runs it left behind when it stops, and that they keep running.
    said = (tmp_path / "runner0.log").read_text()
    assert "runner stopped (SIGTERM); 2 run(s) left running; the next runner re-attaches them" in said
    assert all(f"run {i} " in said for i in left)
    rig.start()
    wait_for(lambda: len(rig.query("SELECT 1 FROM events WHERE kind = 'reattached'")) == 2)
    gate.touch()
    marks = ",".join(map(str, left))
    wait_for(lambda: all(r["state"] in ("succeeded", "failed") for r in rig.query(
        f"SELECT state FROM runs WHERE id IN ({marks})")))
    rows = {r["job"]: r for r in rig.query(f"SELECT * FROM runs WHERE id IN ({marks})")}
    assert (rows["long"]["state"], rows["single"]["state"], rows["single"]["exit_code"]) == ("succeeded", "failed", 4)
    wait_for(lambda: escalations_all(rig))
    esc = escalations_all(rig)
    # The job's own failure pages as such; the stop and restart page nothing.
    assert [(e["job"], e["kind"]) for e in esc] == [("single", "failed")]


@pytest.mark.slow
def test_restart_after_a_crash_records_the_gap_and_resolves_it(rig, tmp_path):
    rig.write('name = "tick"\ncommand = ["true"]\nevery = "1s"\nmisfire = "run_once"\n')
    first = rig.start()
    wait_for(lambda: rig.query("SELECT 1 FROM runs WHERE job = 'tick' AND state = 'succeeded'"))
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    # The gap itself: slots fall due while no runner runs.
    last_beat = rig.query("SELECT MAX(heartbeat_at) AS t FROM runners")[0]["t"]
    wait_for(lambda: time.time() - last_beat >= 3.0, timeout=10)
    rig.start()
    wait_for(lambda: rig.query("SELECT 1 FROM escalations WHERE kind = 'runner_gap'"))
    (esc,) = rig.query("SELECT * FROM escalations WHERE kind = 'runner_gap'")
    assert esc["job"] == "(runner)" and esc["severity"] == "warning"
    assert "no runner from" in esc["reason"] and "tick:" in esc["reason"] and "skipped" in esc["reason"]
    (ev,) = rig.query("SELECT * FROM events WHERE kind = 'runner_gap_recorded'")
    detail = json.loads(ev["detail"])
    (ticks,) = detail["slots"]
    assert detail["seconds"] >= 3 and ticks["job"] == "tick" and ticks["count"] >= 1
    # Only slots that were not run: none of them has a run, and the scheduler (whose first
    # tick comes a little after the start) skipped at least as many.
    assert not rig.query(f"SELECT 1 FROM runs WHERE job = 'tick' AND slot IN ({','.join('?' * len(ticks['slots']))})",
                         tuple(ticks["slots"]))
    wait_for(lambda: rig.query("SELECT 1 FROM events WHERE kind = 'misfire_skipped' AND job = 'tick'"))
    (skipped,) = rig.query("SELECT detail FROM events WHERE kind = 'misfire_skipped' AND job = 'tick'")
    assert ticks["count"] <= json.loads(skipped["detail"])["missed"] and not ticks["truncated"]
    # The new runner's heartbeat resolves it; the record stays.
    wait_for(lambda: rig.query("SELECT 1 FROM escalations WHERE kind = 'runner_gap' AND state = 'resolved'"))




@pytest.mark.slow
def test_processes_that_left_the_group_are_ended_when_the_run_succeeds(rig, tmp_path):
    """setsid and a double fork: the runner (child subreaper) adopts them, ends them when the
    run ends — a success — records them in the outcome and escalates a warning."""
    rig.write('name = "leaky"\ncommand = ["sh", "-c", "setsid sleep 60 & (setsid sleep 61 &) ; echo done"]\nonce = true\n')
    rig.start()
    wait_for(lambda: rig.query("SELECT 1 FROM runs WHERE job = 'leaky' AND state = 'succeeded'"))
    (run,) = rig.query("SELECT * FROM runs WHERE job = 'leaky'")
    (out,) = rig.query("SELECT handoff_findings FROM job_outcomes WHERE run_id = ?", (run["id"],))
    (finding,) = [f for f in json.loads(out["handoff_findings"]) if f["code"] == "escaped_processes"]
    assert "sleep 60" in finding["message"] and "sleep 61" in finding["message"]
    assert finding["message"].startswith("ended (SIGTERM) when the run ended")
    wait_for(lambda: rig.query("SELECT 1 FROM escalations WHERE kind = 'escaped_processes'"))
    (esc,) = rig.query("SELECT * FROM escalations WHERE kind = 'escaped_processes'")
    assert esc["severity"] == "warning" and esc["job"] == "leaky" and esc["latest_run_id"] == run["id"]
    # Nothing of the run is alive, and nothing is left a zombie under the runner either.
    import psutil
    left = [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [])[:1] == ["sleep"]
            and p.info["cmdline"][1:] in (["60"], ["61"]) and p.status() != psutil.STATUS_ZOMBIE]
    # This test's run only: another test session on the machine (a second clone's suite) has
    # a run 1 of its own, whose sleeps carry the same run id.
    assert [p for p in left if p.environ().get("WATCHKEEPER_RUN_ID") == str(run["id"])
            and str(tmp_path) in p.environ().get("WATCHKEEPER_HANDOFF", "")] == []
