"""A run survives its runner: kill -9, a clean stop or an upgrade of the runner never harms a
job, and the next runner records its true exit status, full output and verdict. Real runner
processes, real jobs, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from core import monitor
from core.ledger import runners
from tests.kit.runners import PY, ROOT
from tests.kit.sweep import pid_alive, wait_for

TERMINAL = ("succeeded", "failed", "blocked", "timed_out", "orphaned", "abandoned")


def chatty(ticks: int, *, every: float = 0.2, code: int = 3) -> str:
    """A job printing ``tick N`` lines, then exiting with ``code``."""
    return (f'name = "chatty"\nonce = true\ntimeout = "60s"\n'
            f'command = ["sh", "-c", "i=1; while [ $i -le {ticks} ]; do echo tick $i; i=$((i+1)); sleep {every}; done;'
            f' echo done >&2; exit {code}"]\n')


def the_run(rig) -> dict:
    return rig.query("SELECT * FROM runs WHERE job = 'chatty'")[0]


def running(rig) -> dict:
    assert wait_for(lambda: rig.query("SELECT 1 FROM runs WHERE job = 'chatty' AND state = 'running'"), timeout=60)
    return the_run(rig)


def output_so_far(run: dict) -> str:
    log = Path(run["artifacts_dir"]) / "stdout.log"
    return log.read_text() if log.exists() else ""


def ended(rig, run_id: int) -> dict:
    assert wait_for(lambda: rig.query("SELECT state FROM runs WHERE id = ?", (run_id,))[0]["state"] in TERMINAL,
                    timeout=60)
    assert wait_for(lambda: rig.query("SELECT 1 FROM job_outcomes WHERE run_id = ? AND judged_by IS NOT NULL",
                                      (run_id,)), timeout=60)
    return rig.query("SELECT r.*, o.stdout_bytes, o.stdout_head, o.stderr_head FROM runs r"
                     " JOIN job_outcomes o ON o.run_id = r.id WHERE r.id = ?", (run_id,))[0]


def full_ticks(n: int) -> str:
    return "".join(f"tick {i}\n" for i in range(1, n + 1))


def kinds_paged(rig) -> set[str]:
    return {e["kind"] for e in rig.query("SELECT kind FROM escalations")}


@pytest.mark.slow
def test_kill_9_of_the_runner_mid_job_the_job_completes_and_the_next_runner_records_it(rig):
    rig.write(chatty(10))
    first = rig.start()
    run = running(rig)
    # Readable while it runs: the output file grows as the job prints.
    assert wait_for(lambda: "tick 2" in output_so_far(run), timeout=10)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    # No runner is alive; the job goes on printing and ends under its monitor.
    assert wait_for(lambda: monitor.exit_status(Path(run["artifacts_dir"])) is not None, timeout=20)
    assert not pid_alive(run["pid"])
    exited_at = (Path(run["artifacts_dir"]) / "exit").stat().st_mtime
    assert wait_for(lambda: time.time() > exited_at + 1.5, timeout=10)  # a re-attach clearly later
    rig.start()
    end = ended(rig, run["id"])
    assert (end["state"], end["exit_code"], end["signal"]) == ("failed", 3, None)
    # Its true end (the monitor's exit file), not when the next runner came round to it.
    assert end["ended_at"] == pytest.approx(exited_at, abs=0.5)
    outcome = rig.query("SELECT duration_s FROM job_outcomes WHERE run_id = ?", (run["id"],))[0]
    assert outcome["duration_s"] == pytest.approx(end["ended_at"] - end["started_at"], abs=0.01)
    assert end["stdout_head"] == full_ticks(10) and end["stdout_bytes"] == len(full_ticks(10))
    assert end["stderr_head"] == "done\n"
    found = rig.query("SELECT reason FROM events WHERE kind = 'reattached' AND run_id = ?", (run["id"],))
    assert found and "ended while no runner was there" in found[0]["reason"]
    assert not rig.query("SELECT 1 FROM events WHERE run_id = ? AND to_state = 'orphaned'", (run["id"],))


@pytest.mark.slow
def test_an_upgrade_stop_then_start_during_a_job_is_followed_to_its_true_end(rig, tmp_path):
    gate = tmp_path / "go"
    rig.write(f'name = "chatty"\nonce = true\ntimeout = "60s"\n'
              f'command = ["sh", "-c", "i=0; until [ -e {gate} ]; do i=$((i+1)); echo tick $i; sleep 0.1; done;'
              f' echo finished"]\n')
    first = rig.start()
    run = running(rig)
    assert wait_for(lambda: "tick 1" in output_so_far(run), timeout=10)
    os.killpg(first.pid, signal.SIGTERM)  # a clean stop: systemctl restart, Ctrl-C
    assert first.wait(timeout=20) == 0
    stopped = rig.query("SELECT detail FROM events WHERE kind = 'runner_stopped'")
    assert run["id"] in json.loads(stopped[0]["detail"])["left_running"]
    assert pid_alive(run["pid"]), "a clean stop leaves the job running"
    rig.start()  # the new version, while the job still runs
    assert wait_for(lambda: rig.query("SELECT 1 FROM events WHERE kind = 'reattached'"), timeout=60)
    found = rig.query("SELECT reason FROM events WHERE kind = 'reattached' AND run_id = ?", (run["id"],))
    assert found and "still running" in found[0]["reason"]
    gate.touch()
    end = ended(rig, run["id"])
    assert (end["state"], end["exit_code"]) == ("succeeded", 0)
    lines = end["stdout_head"].splitlines()
    assert lines[-1] == "finished" and lines[:-1] == [f"tick {i}" for i in range(1, len(lines))]
    assert not kinds_paged(rig) & {"runner_gap", "orphaned"}


@pytest.mark.slow
def test_a_kill_stop_ends_the_runs_as_abandoned_by_the_operator(rig, tmp_path):
    rig.write(chatty(200, code=0))
    log = open(tmp_path / "killer.log", "w")  # noqa: SIM115 - closed with the test's tmp folder
    p = subprocess.Popen([PY, "-m", "console.cli", "run", str(rig.specs), "--ledger", str(rig.db), "--kill"],
                         cwd=ROOT, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    rig.procs.append(p)
    rig.wait_ready()
    run = running(rig)
    os.killpg(p.pid, signal.SIGINT)
    assert p.wait(timeout=20) == 0
    end = rig.query("SELECT * FROM runs WHERE id = ?", (run["id"],))[0]
    assert (end["state"], end["reason"]) == ("abandoned", "interrupted")
    assert not pid_alive(run["pid"])
    said = (tmp_path / "killer.log").read_text()
    assert "ending 1 running job(s)" in said


@pytest.mark.slow
def test_a_second_ctrl_c_during_a_kill_stop_kills_at_once_and_says_so(rig, tmp_path):
    """A job that ignores SIGTERM would hold a ``--kill`` stop for its whole grace (30 s here);
    a second Ctrl-C sends SIGKILL at once — and says that, not that the job is left running."""
    rig.write('name = "chatty"\nonce = true\ntimeout = "120s"\n'
              'command = ["sh", "-c", "trap \'\' TERM; echo ready; while true; do sleep 0.1; done"]\n')
    (rig.specs / "watchkeeper.toml").write_text('shutdown_grace = "30s"\n')
    log = tmp_path / "killer.log"
    p = subprocess.Popen([PY, "-m", "console.cli", "run", str(rig.specs), "--ledger", str(rig.db), "--kill"],
                         cwd=ROOT, start_new_session=True, stdout=log.open("w"), stderr=subprocess.STDOUT)
    rig.procs.append(p)
    rig.wait_ready()
    run = running(rig)
    assert wait_for(lambda: "ready" in output_so_far(run), timeout=10)  # its trap is set
    os.kill(p.pid, signal.SIGINT)
    assert wait_for(lambda: "SIGTERM now, SIGKILL after 30s" in log.read_text(), timeout=10)
    os.kill(p.pid, signal.SIGINT)
    assert p.wait(timeout=20) == 0  # well inside the 30-s grace
    said = log.read_text()
    assert "SIGINT again: no longer waiting; SIGKILL now to what still runs" in said, said
    assert "is left running" not in said, said
    assert "Ctrl-C again to SIGKILL now" in said, said
    end = rig.query("SELECT * FROM runs WHERE id = ?", (run["id"],))[0]
    assert (end["state"], end["reason"]) == ("abandoned", "interrupted")
    assert not pid_alive(run["pid"])


@pytest.mark.slow
def test_a_clean_stop_never_pages_even_with_a_lease_shorter_than_the_grace(rig, tmp_path):
    """heartbeat 2 s, lease 6 s, grace 10 s (the settings that paged a critical runner gap):
    a draining stop keeps heartbeating, so a watcher looking after the lease sees a live
    runner, and the recorded stop pages nothing."""
    rig.write(chatty(32, every=0.25, code=0))
    (rig.specs / "watchkeeper.toml").write_text(
        'heartbeat = "2s"\nlease = "6s"\nshutdown_grace = "10s"\nsweep_interval = 1.0\n')
    log = open(tmp_path / "drainer.log", "w")  # noqa: SIM115 - closed with the test's tmp folder
    p = subprocess.Popen([PY, "-m", "console.cli", "run", str(rig.specs), "--ledger", str(rig.db), "--drain"],
                         cwd=ROOT, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    rig.procs.append(p)
    rig.wait_ready()
    run = running(rig)
    os.killpg(p.pid, signal.SIGINT)
    time.sleep(7)  # past the lease while the stop drains: what a watcher (console, sweep) sees then
    assert p.poll() is None, "the drain ended before the lease passed: the check below proves nothing"
    assert rig.led.write(lambda conn: runners.check_gap(conn)) is None
    assert p.wait(timeout=20) == 0
    assert rig.led.write(lambda conn: runners.check_gap(conn)) is None
    end = rig.query("SELECT state FROM runs WHERE id = ?", (run["id"],))[0]
    assert end["state"] in ("succeeded", "verifying")
    assert not kinds_paged(rig)
    assert "waiting up to 10s for 1 running job(s)" in (tmp_path / "drainer.log").read_text()
