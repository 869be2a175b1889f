"""`watchkeeper exec`: one command as a recorded run without a runner — queued → running →
terminal, output captured, handoff environment set, judged and escalated, exit status
passed through; the lease renewed while it runs, so the sweep orphans a run whose wrapper
was killed; a failure reaches the owner by email (local SMTP server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.ledger.connection import Ledger
from core.liveness import hostname
from core.spec.settings import Settings
from core.sweep import sweep
from tests.kit.smtp import SmtpServer

WK = str(Path(sys.executable).parent / "watchkeeper")


def wk(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([WK, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_a_command_becomes_a_recorded_run_and_its_exit_status_passes_through(tmp_path):
    db = tmp_path / "wk.db"
    ok = wk("exec", "--job", "hello", "--ledger", str(db), "--", "sh", "-c",
            'echo "hello from $WATCHKEEPER_JOB run $WATCHKEEPER_RUN_ID"; test -n "$WATCHKEEPER_HANDOFF"', cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == ""  # a success is silent
    bad = wk("exec", "--job", "hello", "--ledger", str(db), "--", "sh", "-c", "echo 'Error: disk full' >&2; exit 3",
             cwd=tmp_path)
    assert bad.returncode == 3
    assert "hello run 2 failed" in bad.stderr and "Error: disk full" in bad.stderr
    with Ledger(db) as led:
        runs = [dict(r) for r in led.query("SELECT id, job, state, trigger, exit_code, runner_id, host FROM runs"
                                           " ORDER BY id")]
        assert [(r["state"], r["trigger"], r["exit_code"], r["runner_id"]) for r in runs] == [
            ("succeeded", "exec", 0, None), ("failed", "exec", 3, None)]
        assert {r["host"] for r in runs} == {hostname()}  # listed and filtered by host like a runner's
        moves = [(r["from_state"], r["to_state"]) for r in led.query(
            "SELECT from_state, to_state FROM events WHERE run_id = 1 AND kind = 'transition' ORDER BY id")]
        assert moves == [("queued", "spawned"), ("spawned", "running"), ("running", "verifying"),
                         ("verifying", "succeeded")]
        out = led.one("SELECT stdout_head FROM job_outcomes WHERE run_id = 1")
        assert out["stdout_head"].strip() == "hello from hello run 1"
        esc = led.one("SELECT kind, state, latest_run_id FROM escalations")
        assert (esc["kind"], esc["state"], esc["latest_run_id"]) == ("failed", "open", 2)
        job = led.one("SELECT enabled, source FROM jobs WHERE name = 'hello'")
        assert job["enabled"] == 1 and job["source"] is None  # created on first use


def test_a_failed_run_passes_its_output_on_for_cron_and_a_success_stays_quiet(tmp_path):
    db = str(tmp_path / "wk.db")
    bad = wk("exec", "--job", "mail", "--ledger", db, "--", "sh", "-c", "echo to-out; echo to-err >&2; exit 4",
             cwd=tmp_path)
    assert bad.returncode == 4
    assert bad.stdout == "to-out\n"  # what cron would have mailed without the wrapper
    lines = bad.stderr.splitlines()
    assert lines[0] == "to-err" and lines[-1].startswith("watchkeeper: mail run 1 failed"), bad.stderr
    assert f"— {WK} show 1 --ledger" in lines[-1]  # the full path: cron's PATH may not find a bare name
    ok = wk("exec", "--job", "mail", "--ledger", db, "--", "sh", "-c", "echo fine", cwd=tmp_path)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "", "")  # no mail for a success
    always = wk("exec", "--job", "mail", "--ledger", db, "--output", "always", "--", "sh", "-c", "echo fine",
                cwd=tmp_path)
    assert (always.returncode, always.stdout, always.stderr) == (0, "fine\n", "")
    never = wk("exec", "--job", "mail", "--ledger", db, "--output", "never", "--", "sh", "-c", "echo x; exit 2",
               cwd=tmp_path)
    assert never.returncode == 2 and never.stdout == ""
    assert [ln for ln in never.stderr.splitlines()] == [never.stderr.strip()]  # the one line only
    quiet = wk("exec", "--job", "mail", "--ledger", db, "--quiet", "--", "sh", "-c", "echo x; exit 2", cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (2, "", "")


def test_signals_and_unstartable_commands_map_to_shell_statuses(tmp_path):
    db = str(tmp_path / "wk.db")
    killed = wk("exec", "--job", "k", "--ledger", db, "--", "sh", "-c", "kill -9 $$", cwd=tmp_path)
    assert killed.returncode == 128 + 9
    missing = wk("exec", "--job", "m", "--ledger", db, "--", str(tmp_path / "no-such-program"), cwd=tmp_path)
    assert missing.returncode == 127


@pytest.mark.slow
def test_the_spec_folder_gives_timeout_owner_and_retries(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "flaky.toml").write_text('name = "flaky"\ncommand = "false"\nowner = "ana"\ntimeout = "30s"\n'
                                     'max_attempts = 2\nbackoff = {initial = "1s", jitter = false}\n')
    marker = tmp_path / "ran-once"
    res = wk("exec", "--job", "flaky", "--ledger", str(tmp_path / "wk.db"), "--jobs", str(jobs), "--", "sh", "-c",
             f'if [ -e {marker} ]; then echo second; else touch {marker}; exit 1; fi', cwd=tmp_path)
    assert res.returncode == 0, res.stderr  # the retry its policy queued ran here, after its backoff
    with Ledger(tmp_path / "wk.db") as led:
        rows = led.query("SELECT attempt, state, trigger FROM runs ORDER BY id")
        assert [(r["attempt"], r["state"], r["trigger"]) for r in rows] == [(1, "failed", "exec"),
                                                                             (2, "succeeded", "retry")]
        assert led.one("SELECT owner, source FROM jobs")["owner"] == "ana"


@pytest.mark.slow
def test_a_killed_wrapper_leaves_a_run_the_sweep_orphans(tmp_path):
    db = tmp_path / "wk.db"
    proc = subprocess.Popen([WK, "exec", "--job", "sleeper", "--ledger", str(db), "--", "sleep", "300"],
                            cwd=tmp_path, env={**os.environ, "WATCHKEEPER_LEASE": "3", "WATCHKEEPER_HEARTBEAT": "1"},
                            start_new_session=True)
    deadline = time.time() + 30
    pid = None
    while time.time() < deadline and pid is None:
        if db.exists():
            with Ledger(db) as led:
                row = led.one("SELECT state, pid, lease_until FROM runs")
                if row is not None and row["state"] == "running":
                    pid = row["pid"]
        time.sleep(0.1)
    assert pid is not None
    with Ledger(db) as led:  # the lease moves while the wrapper lives
        first = led.one("SELECT lease_until FROM runs")[0]
        while led.one("SELECT lease_until FROM runs")[0] == first and time.time() < deadline:
            time.sleep(0.2)
        assert led.one("SELECT lease_until FROM runs")[0] > first
    os.kill(proc.pid, signal.SIGKILL)  # the wrapper dies too hard to report anything
    proc.wait()
    settings = Settings(ledger=db, lease=3, heartbeat=1)
    with Ledger(db) as led:
        while time.time() < deadline + 30:
            report = sweep.Sweeper(settings, actor="sweep").sweep_once(led)
            if report.orphaned:
                break
            time.sleep(0.5)
        assert led.one("SELECT state FROM runs")[0] == "orphaned"
    with pytest.raises(ProcessLookupError):  # the job it left behind was killed by the sweep
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)


def test_a_failure_arrives_by_email_with_its_error_line(tmp_path):
    smtp = SmtpServer()
    try:
        (tmp_path / "watchkeeper.toml").write_text(
            f'[[notify]]\ntype = "apprise"\nname = "mail"\nurl = "{smtp.url}"\n')
        res = wk("exec", "--job", "backup", "--ledger", str(tmp_path / "wk.db"),
                 "--config", str(tmp_path / "watchkeeper.toml"), "--", "sh", "-c",
                 "echo 'copying 41 files'; echo 'rsync: write failed: No space left on device (28)' >&2; exit 11",
                 cwd=tmp_path)
        assert res.returncode == 11
        assert smtp.box.arrived.wait(10), "no email arrived"
        text = smtp.box.text()
        assert "[CRITICAL] backup failed: rsync: write failed: No space left on device (28)" in text
        assert "rsync: write failed: No space left on device (28)" in text
        assert "watchkeeper show 1 --ledger" in text
    finally:
        smtp.stop()


def test_a_job_a_spec_file_owns_is_run_but_never_rewritten(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "report.toml").write_text('name = "report"\ncommand = "echo from-the-file"\nowner = "ana"\n')
    db = str(tmp_path / "wk.db")
    assert wk("exec", "--job", "report", "--ledger", db, "--jobs", str(jobs), cwd=tmp_path).returncode == 0
    with Ledger(db) as led:
        before = dict(led.one("SELECT spec, spec_hash, source, owner FROM jobs WHERE name = 'report'"))
    assert before["source"] == str((jobs / "report.toml").resolve()) and before["owner"] == "ana"
    res = wk("exec", "--job", "report", "--ledger", db, "--", "sh", "-c", "echo from-cron", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    with Ledger(db) as led:
        assert dict(led.one("SELECT spec, spec_hash, source, owner FROM jobs WHERE name = 'report'")) == before
        heads = [r[0].strip() for r in led.query("SELECT stdout_head FROM job_outcomes ORDER BY run_id")]
        assert heads == ["from-the-file", "from-cron"]


@pytest.mark.slow
def test_failures_print_one_line_each_even_when_the_breaker_opens(tmp_path):
    # three failures open the job's breaker: its log warning stays off stderr (unless -v)
    lines = []
    for _ in range(3):
        res = wk("exec", "--job", "db", "--ledger", str(tmp_path / "wk.db"), "--", "sh", "-c",
                 "echo 'error: cannot reach db.internal:5432' >&2; exit 3", cwd=tmp_path)
        assert res.returncode == 3
        lines.append(res.stderr.splitlines())
    # the job's own stderr (passed on for cron), then watchkeeper's one line
    assert all(len(ls) == 2 and ls[0] == "error: cannot reach db.internal:5432"
               and ls[1].startswith("watchkeeper: db run ") for ls in lines), lines
    with Ledger(tmp_path / "wk.db") as led:
        assert led.one("SELECT breaker_state FROM jobs WHERE name = 'db'")["breaker_state"] == "open"
    res = wk("-v", "exec", "--job", "db", "--ledger", str(tmp_path / "wk.db"), "--", "true", cwd=tmp_path)
    assert res.returncode == 0


def test_a_job_not_in_the_spec_folder_is_not_found_in_one_line(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "a.toml").write_text('name = "a"\ncommand = "true"\n')
    (tmp_path / "jobs" / "b.toml").write_text('name = "b"\ncommand = "true"\ntimeout = "soon"\n')
    from click.testing import CliRunner

    from console.cli.main import cli
    res = CliRunner().invoke(cli, ["exec", "--job", "nosuch", "--jobs", str(tmp_path / "jobs"),
                                   "--ledger", str(tmp_path / "wk.db")])
    assert res.exit_code == 2 and res.output.strip() == f"error: {tmp_path / 'jobs'}: no job named 'nosuch'"
    res = CliRunner().invoke(cli, ["exec", "--job", "b", "--jobs", str(tmp_path / "jobs"),
                                   "--ledger", str(tmp_path / "wk.db")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1 and "job 'b' is invalid" in res.output
