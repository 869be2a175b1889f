"""One escaper, one notation: an ESC in a name or an output line reads ``\\x1b`` in every
CLI message, reason and notification — never ``\\\\x1b`` (escaped twice) or ``\\u001b``."""

from __future__ import annotations

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from core.ledger.outbox import payload_for
from core.supervisor.rules import OutcomeFacts, evaluate

NAME = "x\x1b[2J"
ONE = "'x\\x1b[2J'"


def test_trigger_and_runs_name_an_unknown_job_the_same_way(tmp_path):
    db = tmp_path / "wk.db"
    Ledger(db).close()
    outs = [CliRunner().invoke(cli, [*args, "--ledger", str(db)]).output
            for args in (["trigger", NAME], ["runs", "--job", NAME])]
    for out in outs:
        assert ONE in out and "\\\\x1b" not in out and "\x1b" not in out, out


def test_reasons_and_notifications_write_x1b_not_u001b():
    facts = OutcomeFacts(run_id=3, job="j", state="failed", status="failed", exit_code=1,
                         stderr="boom \x1b[31mred\n")
    reason = evaluate(facts, [], None).reason
    assert 'last output: "boom \\x1b[31mred"' in reason and "\\u001b" not in reason
    esc = {"id": 1, "job": NAME, "kind": "failed", "severity": "critical", "reason": reason, "count": 1}
    p = payload_for(esc, "opened", host="h", lines=["out \x1b[2J"])
    for text in (p["text"], p["title"], p["body"]):
        assert "\\u001b" not in text and "\x1b" not in text and "\\\\x1b" not in text
    assert "x\\x1b[2J" in p["title"] and "out \\x1b[2J" in p["body"]
    # The structured fields a command sink reads with ``jq -r`` are escaped the same way.
    assert p["evidence"] == ["out \\x1b[2J"]
    esc["reason"] = "stderr said \x1b]0;PWNED\x07"
    assert payload_for(esc, "opened", host="h")["reason"] == "stderr said \\x1b]0;PWNED\\x07"
