"""`watchkeeper jobs` never shows a time that cannot happen: no negative breaker cool-down, no
"in 0s", and a note when no runner is up to start the next runs (a new user saw `open -5m 28s`
and `in 29s` on a ledger whose runner had stopped 14 minutes before)."""

from __future__ import annotations

import os

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from core.supervisor.policy.words import breaker_word, next_run_word
from tests.kit.sweep import add_job, add_runner


def test_a_breaker_past_its_cool_down_is_due_never_a_negative_time():
    assert breaker_word("open", 1000.0 + 240, 1000.0) == "open 4m"
    assert breaker_word("open", 1000.0 - 328, 1000.0) == "open (due)"
    assert breaker_word("open", 1000.3, 1000.0) == "open (due)"
    assert breaker_word(None, None, 1000.0) == "closed"


def test_a_next_run_less_than_a_second_away_is_due_not_in_0s():
    assert next_run_word(1000.4, None, 1000.0) == "due"
    assert next_run_word(1035.0, None, 1000.0) == "in 35s"


def test_jobs_says_when_no_runner_is_up_to_start_them(tmp_path):
    path = tmp_path / "wk.db"
    with Ledger(path) as led:
        add_job(led, "backup", every="30s")
        add_runner(led, pid=os.getpid(), heartbeat_age=600.0, lease_s=30.0, stopped=True)
    res = CliRunner().invoke(cli, ["jobs", "--ledger", str(path)])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[-1].startswith("note: runner stopped ")
    assert "nothing runs until a runner starts" in res.output


def test_jobs_has_no_note_while_a_runner_is_up(tmp_path):
    path = tmp_path / "wk.db"
    with Ledger(path) as led:
        add_job(led, "backup", every="30s")
        add_runner(led, pid=os.getpid(), lease_s=30.0)
    res = CliRunner().invoke(cli, ["jobs", "--ledger", str(path)])
    assert res.exit_code == 0 and "note:" not in res.output, res.output
