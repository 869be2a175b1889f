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
