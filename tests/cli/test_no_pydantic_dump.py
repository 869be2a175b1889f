"""Bad input reaches the operator as one line naming the field, never pydantic's dump."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from console.cli.main import cli
from core.spec.model import JobSpec


def test_exec_with_a_bad_job_name_runs_the_command_after_one_warning_line(tmp_path):
    # exec fails open (the command still runs, unrecorded) and says why in one line.
    res = subprocess.run([str(Path(sys.executable).parent / "watchkeeper"), "exec", "--job", "../../etc/passwd",
                          "--ledger", str(tmp_path / "wk.db"), "--", "sh", "-c", "echo ran; exit 4"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 4 and res.stdout == "ran\n"
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "field 'name'" in lines[0] and "--job" in lines[0] and "unrecorded" in lines[0]
    assert "pydantic" not in res.stderr and "validation error" not in res.stderr


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
