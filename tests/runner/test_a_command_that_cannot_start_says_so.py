"""A job whose program cannot start is told in words (``could not start: no such command
'x'``), never with Python's exception text shown as if it were the job's output, and records
the exit status a shell would have given (127 not found, 126 not executable)."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from core.runner.executor import start_failure


def test_the_reason_is_a_sentence_and_the_exit_status_a_shells(tmp_path):
    missing = FileNotFoundError(2, "No such file or directory", "nosuch\x1b[2J")
    assert start_failure(missing, ["nosuch\x1b[2J"], None) == ("could not start: no such command 'nosuch\\x1b[2J'", 127)
    denied = PermissionError(13, "Permission denied", "./x.sh")
    assert start_failure(denied, ["./x.sh"], None) == ("could not start: './x.sh' is not executable (permission denied)", 126)
    no_cwd = FileNotFoundError(2, "No such file or directory", str(tmp_path / "gone"))
    assert start_failure(no_cwd, ["true"], str(tmp_path / "gone")) == (
        f"could not start: no such folder '{tmp_path / 'gone'}' (cwd)", None)


def test_exec_of_a_missing_command_lists_as_could_not_start_with_exit_127(tmp_path):
    db = tmp_path / "wk.db"
    code = subprocess.run([sys.executable, "-m", "console.cli", "exec", "--ledger", str(db), "--job", "x", "--",
                           "no-such-command-zz"], capture_output=True, timeout=60).returncode
    assert code == 127
    res = CliRunner().invoke(cli, ["runs", "--ledger", str(db)])
    row = res.output.splitlines()[1]
    assert row.split()[7] == "127" and row.endswith("x could not start: no such command 'no-such-command-zz' (exit 127)")
    assert "FileNotFound" not in res.output and "last output" not in res.output
    with Ledger(db) as led:
        assert led.one("SELECT reason_code, exit_code FROM runs")["reason_code"] == "spawn_failed"
