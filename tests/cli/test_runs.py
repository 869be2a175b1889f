"""The run-side CLI: run, runs, show, trigger, jobs — against a ledger a real runner wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import click
from click.testing import CliRunner

from console.cli.main import cli
from tests.kit.harness import RunnerThread, fast_settings, query, terminal_runs, wait_for, write_specs

PY = sys.executable


def _ledger_with_runs(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
[[job]]
name = "hello"
command = ["{PY}", "-c", "print('hello \\u001b[31m[bold]red[/bold]')"]
once = true
[[job]]
name = "manual-only"
command = ["{PY}", "-c", "print('by hand')"]
''')
    s = fast_settings(tmp_path)
    return specs, s


def test_runs_show_jobs_and_trigger(tmp_path):
    specs, s = _ledger_with_runs(tmp_path)
    cli_runner = CliRunner()
    with RunnerThread(specs, s):
        wait_for(lambda: terminal_runs(s.ledger, "hello"), timeout=15)
        res = cli_runner.invoke(cli, ["trigger", "manual-only", "--ledger", str(s.ledger), "--as", "ana"])
        assert res.exit_code == 0, res.output
        assert "queued run" in res.output
        wait_for(lambda: terminal_runs(s.ledger, "manual-only"), timeout=15)
    ev = query(s.ledger, "SELECT actor FROM events WHERE kind = 'run_queued' AND job = 'manual-only'")
    assert ev[0]["actor"] == "operator:ana"

    res = cli_runner.invoke(cli, ["runs", "--ledger", str(s.ledger)])
    assert res.exit_code == 0 and "hello" in res.output and "manual-only" in res.output
    res = cli_runner.invoke(cli, ["runs", "--ledger", str(s.ledger), "--json", "--job", "hello"])
    rows = [json.loads(line) for line in res.output.splitlines()]
    assert [r["job"] for r in rows] == ["hello"] and rows[0]["state"] == "succeeded"

    run_id = rows[0]["id"]
    res = cli_runner.invoke(cli, ["show", str(run_id), "--ledger", str(s.ledger)])
    assert res.exit_code == 0
    assert "queued → spawned" in res.output and "verifying → succeeded" in res.output
    assert "\x1b" not in res.output and "\\x1b[31m[bold]red[/bold]" in res.output  # shown literally, escaped
    res = cli_runner.invoke(cli, ["show", str(run_id), "--ledger", str(s.ledger), "--json"])
    doc = json.loads(res.output)
    assert doc["run"]["id"] == run_id and doc["outcome"]["status"] == "success"

    res = cli_runner.invoke(cli, ["jobs", "--ledger", str(s.ledger)])
    assert res.exit_code == 0 and "hello" in res.output and "manual" in res.output


def test_not_found_exit_codes(tmp_path):
    specs, s = _ledger_with_runs(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: terminal_runs(s.ledger, "hello"), timeout=15)
    r = CliRunner()
    assert r.invoke(cli, ["show", "999999", "--ledger", str(s.ledger)]).exit_code == 2
    assert r.invoke(cli, ["trigger", "no-such-job", "--ledger", str(s.ledger)]).exit_code == 2
    assert r.invoke(cli, ["runs", "--ledger", str(tmp_path / "none.db")]).exit_code == 2


def test_every_command_has_help_with_example():
    r = CliRunner()
    for name in cli.list_commands(click.Context(cli)):
        res = r.invoke(cli, [name, "--help"])
        assert res.exit_code == 0, name
        assert "Example" in res.output or "example" in res.output, f"{name} --help has no example"


def test_run_prints_lines_and_stops_cleanly_on_sigint(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "quick"\ncommand = ["{PY}", "-c", "pass"]\nonce = true\n')
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(specs), "--ledger",
                             str(tmp_path / "wk.db")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        wait_for(lambda: terminal_runs(tmp_path / "wk.db", "quick") if (tmp_path / "wk.db").exists() else None,
                 timeout=20)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            print(proc.communicate())  # shown by pytest when the test failed
    assert proc.returncode == 0, err
    assert "quick" in out and "succeeded" in out and "exit 0" in out
    assert "runner stopped" in err
    stopped = query(tmp_path / "wk.db", "SELECT stopped_at FROM runners")
    assert stopped and stopped[0]["stopped_at"] is not None
