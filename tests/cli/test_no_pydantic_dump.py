"""Bad input reaches the operator as one line naming the field, never pydantic's dump."""

from __future__ import annotations

import click
from click.testing import CliRunner

from console.cli.main import cli
from core.spec.model import JobSpec


def test_exec_with_a_bad_job_name_is_one_usage_line(tmp_path):
    res = CliRunner().invoke(cli, ["exec", "--job", "../../etc/passwd", "--ledger", str(tmp_path / "wk.db"),
                                   "--", "true"])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "field 'name'" in lines[0] and "--job" in lines[0]
    assert "pydantic" not in res.output and "validation error" not in res.output


def test_an_unhandled_validation_error_is_one_line_exit_2():
    @cli.command("boom-test")
    def boom() -> None:
        JobSpec(name="../x", command="true")

    try:
        res = CliRunner().invoke(cli, ["boom-test"])
    finally:
        cli.commands.pop("boom-test", None)
    assert res.exit_code == 2, res.output
    assert res.output.strip().startswith("error: field 'name'") and len(res.output.strip().splitlines()) == 1
    assert "errors.pydantic.dev" not in res.output
    assert isinstance(cli, click.Group)
