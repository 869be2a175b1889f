"""CLI exit codes as the README gives them: 0 ok, 1 refused or lost a race, 2 not found."""

from __future__ import annotations

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger


def test_acting_on_an_escalation_that_does_not_exist_exits_2(tmp_path):
    db = tmp_path / "wk.db"
    Ledger(db).close()
    for cmd in (["ack", "999"], ["resolve", "999"], ["snooze", "999", "1h"]):
        res = CliRunner().invoke(cli, [*cmd, "--ledger", str(db), "--as", "ana"])
        assert res.exit_code == 2, (cmd, res.output)


def test_durations_stay_compact_so_the_runs_column_keeps_its_width():
    from console.cli.runs import _safe, fmt_duration
    assert [fmt_duration(x) for x in (0.004, 18.84, 95.2, 3725)] == ["0.00s", "18.8s", "1m35s", "1h02m"]
    assert all(len(fmt_duration(x)) <= 8 for x in (0.0, 59.9, 60, 3599.6, 86400 * 3))
    assert _safe("a\u3164b\U000e0041") == "a\\u3164b\\U000e0041"  # invisible fillers and tags show


def test_an_unknown_or_removed_job_exits_2_with_what_happened(tmp_path):
    from core.ledger.jobs import sync_jobs
    from core.spec.loader import load_dir
    db, jobs = tmp_path / "wk.db", tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "slow-one.toml").write_text('name = "slow-one"\ncommand = "sleep 1"\n')
    with Ledger(db) as led:
        sync_jobs(led, load_dir(jobs))
        (jobs / "slow-one.toml").unlink()
        sync_jobs(led, load_dir(jobs))  # its file is gone: the job is removed, its history kept
    for cmd in (["escalations", "--job", "nosuch"], ["escalations", "--state", "all", "--job", "nosuch"],
                ["runs", "--job", "nosuch"]):
        res = CliRunner().invoke(cli, [*cmd, "--ledger", str(db)])
        assert res.exit_code == 2 and "no job 'nosuch'" in res.output, (cmd, res.output)
    res = CliRunner().invoke(cli, ["trigger", "slow-one", "--ledger", str(db)])
    assert res.exit_code == 2 and "job 'slow-one' was removed" in res.output, res.output
    res = CliRunner().invoke(cli, ["pause", "slow-one", "--ledger", str(db), "--yes"])
    assert res.exit_code == 2 and "job 'slow-one' was removed" in res.output, res.output


def test_an_empty_listing_reads_as_words(tmp_path):
    db = tmp_path / "wk.db"
    Ledger(db).close()
    assert CliRunner().invoke(cli, ["escalations", "--state", "all", "--ledger", str(db)]).output == "no escalations\n"
    assert CliRunner().invoke(cli, ["escalations", "--ledger", str(db)]).output == "no active escalations\n"
