"""CLI exit codes as the README gives them: 0 ok, 1 refused or lost a race, 2 not found."""

from __future__ import annotations

from click.testing import CliRunner

from console.cli import cli
from core.ledger import Ledger


def test_acting_on_an_escalation_that_does_not_exist_exits_2(tmp_path):
    db = tmp_path / "wk.db"
    Ledger(db).close()
    for cmd in (["ack", "999"], ["resolve", "999"], ["snooze", "999", "1h"]):
        res = CliRunner().invoke(cli, [*cmd, "--ledger", str(db), "--as", "ana"])
        assert res.exit_code == 2, (cmd, res.output)
