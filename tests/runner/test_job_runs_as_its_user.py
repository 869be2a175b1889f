"""A job's ``user`` is honoured only when the runner may switch to it: a root runner runs it
as that account (groups, group, user, and HOME/USER/LOGNAME as cron sets them); any other
runner refuses it — at ``check`` and at the run, with one clear line — and never runs it as
its own user instead."""

from __future__ import annotations

import json
import os
import pwd
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger

JOB = """[[job]]
name = "who"
command = "id -un; id -u; echo $HOME; printf '{{\\"status\\": \\"success\\"}}' > $WATCHKEEPER_HANDOFF"
user = "{user}"
"""


def _specs(tmp_path: Path, user: str) -> Path:
    tmp_path.chmod(0o755)
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "jobs.toml").write_text(JOB.format(user=user))
    return specs


def _exec(tmp_path: Path, specs: Path):
    res = CliRunner().invoke(cli, ["exec", "--job", "who", "--jobs", str(specs), "--ledger", str(tmp_path / "wk.db")])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    with Ledger(tmp_path / "wk.db", read_only=True) as led:
        run = dict(led.one("SELECT id, state, reason, artifacts_dir FROM runs ORDER BY id DESC LIMIT 1"))
    return res, run


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root runner can switch users")
def test_a_root_runner_runs_the_job_as_its_user():
    nobody = pwd.getpwnam("nobody")
    # A folder 'nobody' can reach (pytest's own tmp folders are private to the tester).
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        _check_root_runner(Path(d), nobody)


def _check_root_runner(tmp_path: Path, nobody: pwd.struct_passwd) -> None:
    res, run = _exec(tmp_path, _specs(tmp_path, "nobody"))
    assert run["state"] == "succeeded", (run, res.output)
    out = (Path(run["artifacts_dir"]) / "stdout.log").read_text().split()
    assert out == ["nobody", str(nobody.pw_uid), nobody.pw_dir]
    assert Path(run["artifacts_dir"]).stat().st_uid == nobody.pw_uid  # its handoff could be written
    assert (Path(run["artifacts_dir"]).stat().st_mode & 0o777) == 0o700


def test_an_unknown_user_is_an_error_at_check_and_at_the_run(tmp_path: Path):
    specs = _specs(tmp_path, "no-such-user-here")
    res = CliRunner().invoke(cli, ["check", str(specs)])
    assert res.exit_code == 1
    assert (f"{specs / 'jobs.toml'}:4: job 'who': field 'user': no user 'no-such-user-here' on this machine:"
            " the run would fail to start") in res.stdout.splitlines()
    res, run = _exec(tmp_path, specs)
    assert run["state"] == "failed" and run["reason"] == "could not start as its user: no user 'no-such-user-here' on this machine"
    assert not (Path(run["artifacts_dir"]) / "stdout.log").exists() or not (
        Path(run["artifacts_dir"]) / "stdout.log").read_text()  # nothing ran


def test_a_runner_that_is_not_root_refuses_another_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A runner started as uid 4242 (not root): a job for 'root' must not run as uid 4242.
    monkeypatch.setattr("core.runas.os.geteuid", lambda: 4242)
    specs = _specs(tmp_path, "root")
    res = CliRunner().invoke(cli, ["check", str(specs), "--json"])
    assert res.exit_code == 1
    err = json.loads(res.stdout)["errors"][0]
    assert err["field"] == "user" and err["message"] == (
        "runs as user 'root', but the runner runs as '4242' and only a runner started as root can switch users;"
        " run it under that user, or remove 'user': the run would fail to start")
    res, run = _exec(tmp_path, specs)
    assert run["state"] == "failed" and run["reason"].startswith("could not start as its user: runs as user 'root', but")


def test_the_runners_own_user_needs_no_switch(tmp_path: Path):
    me = pwd.getpwuid(os.geteuid()).pw_name
    specs = _specs(tmp_path, me)
    assert CliRunner().invoke(cli, ["check", str(specs)]).exit_code == 0
    res, run = _exec(tmp_path, specs)
    assert run["state"] == "succeeded", (run, res.output)
    assert (Path(run["artifacts_dir"]) / "stdout.log").read_text().split()[0] == me
