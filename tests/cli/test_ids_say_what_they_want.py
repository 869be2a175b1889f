"""A run or escalation id that is not one is a usage error (exit 2) that says what was wanted
("'abc' is not a run id"), not click's "not a valid integer range"."""

from __future__ import annotations

from click.testing import CliRunner

from console.cli.main import cli


def test_a_word_where_an_id_goes_names_the_id_wanted(tmp_path):
    for args, wanted in ((["show", "abc"], "'abc' is not a run id (the ID `watchkeeper runs` lists"),
                         (["logs", "0"], "'0' is not a run id"),
                         (["ack", "x1"], "'x1' is not an escalation id (the ID `watchkeeper escalations` lists")):
        res = CliRunner().invoke(cli, [*args, "--ledger", str(tmp_path / "wk.db")])
        assert res.exit_code == 2 and wanted in res.output and "integer range" not in res.output, res.output
