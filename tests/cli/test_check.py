"""watchkeeper check: one error per line, exit codes, --json, --ledger."""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.testing import CliRunner

from console.cli import check as cli_check
from core.ledger.connection import Ledger
from core.ledger.jobs import sync_jobs
from core.spec.loader import load_dir


def _cli() -> click.Group:
    group = click.Group("watchkeeper")
    for command in cli_check.COMMANDS:
        group.add_command(command)
    return group


def _run(*args: str):
    return CliRunner().invoke(_cli(), ["check", *args])


def _folder(tmp_path: Path, bad: bool) -> Path:
    d = tmp_path / "jobs"
    d.mkdir()
    (d / "ok.toml").write_text('name = "ok"\ncommand = "true"\nschedule = "30 2 * * *"\ntimezone = "UTC"\n')
    if bad:
        (d / "bad.toml").write_text('name = "bad"\ncommand = "true"\ntimeout = 0\ntmeout = 3\n')
    return d


def test_valid_folder_lists_jobs_and_exits_0(tmp_path: Path):
    res = _run(str(_folder(tmp_path, bad=False)))
    assert res.exit_code == 0, res.output
    assert "JOB" in res.output and "30 2 * * * (UTC)" in res.output and "1 job(s) ok" in res.output


def test_errors_one_per_line_and_exit_1(tmp_path: Path):
    d = _folder(tmp_path, bad=True)
    res = _run(str(d))
    assert res.exit_code == 1
    lines = [ln for ln in res.stdout.splitlines() if ln]
    assert lines == [f"{d / 'bad.toml'}:3: job 'bad': field 'timeout': Input should be greater than 0",
                     f"{d / 'bad.toml'}:4: job 'bad': field 'tmeout': unknown field (did you mean 'timeout'?)"]


def test_missing_folder_exits_2(tmp_path: Path):
    assert _run(str(tmp_path / "nope")).exit_code == 2


def test_json_output(tmp_path: Path):
    res = _run(str(_folder(tmp_path, bad=True)), "--json")
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["ok"] is False
    assert [e["field"] for e in doc["errors"]] == ["timeout", "tmeout"]
    assert [j["name"] for j in doc["jobs"]] == ["ok"] and doc["jobs"][0]["next_run"] > 0


def test_bad_settings_file_is_an_error(tmp_path: Path):
    d = _folder(tmp_path, bad=False)
    (d / "watchkeeper.toml").write_text("heartbeat = 10\nlease = 20\n")
    res = _run(str(d))
    assert res.exit_code == 1 and "watchkeeper.toml" in res.stdout and "heartbeat" in res.stdout


def test_ledger_shows_recorded_reload_errors(tmp_path: Path):
    d = _folder(tmp_path, bad=True)
    with Ledger(tmp_path / "l.db") as ledger:
        sync_jobs(ledger, load_dir(d))
    (d / "bad.toml").unlink()  # fixed since: the folder is clean, the history remains
    res = _run(str(d), "--ledger", str(tmp_path / "l.db"))
    assert res.exit_code == 0
    assert "spec errors recorded by the runner" in res.output
    assert "field 'timeout'" in res.output
    doc = json.loads(_run(str(d), "--ledger", str(tmp_path / "l.db"), "--json").stdout)
    assert {e["field"] for e in doc["recorded_errors"]} == {"timeout", "tmeout"}


def test_help_has_an_example():
    res = CliRunner().invoke(_cli(), ["check", "--help"])
    assert res.exit_code == 0 and "Example:" in res.output and "watchkeeper check sample_jobs" in res.output
