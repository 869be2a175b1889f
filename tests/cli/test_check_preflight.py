"""``watchkeeper check`` reports, before anything runs, a job whose ``cwd`` is missing and
a program that cannot be found or executed — as ``file:line: job: field: message`` lines,
exit 1 — and stays quiet about what only the shell resolves."""

from __future__ import annotations

import json
import sys

from click.testing import CliRunner

from console.cli.main import cli
from core.spec.loader import load_dir
from core.spec.preflight import preflight


def check(folder, *extra: str):
    return CliRunner().invoke(cli, ["check", str(folder), *extra])


def test_missing_cwd_and_programs_are_reported_with_their_lines(tmp_path):
    (tmp_path / "jobs.toml").write_text(
        '[[job]]\nname = "a"\ncommand = ["backupp", "x"]\ncwd = "work"\n'
        '[[job]]\nname = "b"\ncommand = "nosuchprog --x && echo hi"\n'
        '[[job]]\nname = "c"\ncommand = ["./run.sh"]\nverify = [["./check.sh"]]\n')
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")  # exists, not executable
    res = check(tmp_path)
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    f = tmp_path / "jobs.toml"
    assert lines == [  # all of a job's problems at once: a bad cwd does not hide a missing program
        f"{f}:3: job 'a': field 'command': 'backupp' not found on PATH: the run would fail to start",
        f"{f}:4: job 'a': field 'cwd': {tmp_path / 'work'} does not exist: the run would fail to start",
        f"{f}:7: job 'b': field 'command': 'nosuchprog' not found on PATH (first word of the shell command):"
        " the run would fail to start",
        f"{f}:10: job 'c': field 'command': './run.sh' is not executable (chmod +x?): the run would fail to start",
        f"{f}:11: job 'c': field 'verify[0]': './check.sh' does not exist (relative to {tmp_path}):"
        " this check would fail",
    ]
    doc = json.loads(check(tmp_path, "--json").stdout)
    assert {e["check"] for e in doc["errors"]} == {"preflight"} and not doc["ok"]

    (tmp_path / "work").mkdir()
    res = check(tmp_path)
    assert f"{f}:3: job 'a': field 'command': 'backupp' not found on PATH: the run would fail to start" in res.stdout


def test_what_the_shell_resolves_and_a_spec_path_are_respected(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "mytool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    (tmp_path / "j.toml").write_text(
        '[[job]]\nname = "builtins"\ncommand = "cd /tmp && FOO=1 $HOME/x; exit 0"\n'
        f'[[job]]\nname = "own-path"\ncommand = ["mytool"]\nenv = {{ PATH = "{bindir}" }}\n'
        f'[[job]]\nname = "python"\ncommand = ["{sys.executable}", "-c", "pass"]\n')
    res = load_dir(tmp_path)
    assert not res.errors
    assert {name: preflight(job, environ={"PATH": "/nonexistent"}) for name, job in res.jobs.items()} == {
        "builtins": [], "own-path": [], "python": []}
    assert check(tmp_path).exit_code == 0


def test_a_shell_c_argv_is_checked_like_a_shell_string(tmp_path):
    # import-crontab writes ["/bin/bash", "-c", LINE]: the line's program is checked, not only bash
    (tmp_path / "crontab").write_text("SHELL=/bin/bash\n30 2 * * * /usr/local/bin/nosuch-backup.sh --full\n"
                                      "0 3 * * * cd /tmp && echo fine\n")
    jobs = tmp_path / "jobs"
    res = CliRunner().invoke(cli, ["import-crontab", "--write", str(jobs), str(tmp_path / "crontab")])
    assert res.exit_code == 0, res.output
    (job,) = [j for j in load_dir(jobs).jobs.values() if "nosuch" in str(j.spec.command)]
    assert job.spec.command == ["/bin/bash", "-c", "/usr/local/bin/nosuch-backup.sh --full"]
    res = check(jobs)
    assert res.exit_code == 1
    (line,) = res.stdout.splitlines()
    assert line.endswith(f"job {job.spec.name!r}: field 'command': '/usr/local/bin/nosuch-backup.sh' does not exist"
                         " (first word of the shell command): the run would fail to start")
