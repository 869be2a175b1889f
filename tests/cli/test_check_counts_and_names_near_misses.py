"""``watchkeeper check`` counts as valid only the jobs that load and could start, says a
folder with none would run nothing (``would_start`` false in --json as well), names the field
a typo was meant to be, and quotes a value of the wrong type."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from console.cli.main import cli


def _check(folder: Path, *args: str):
    return CliRunner().invoke(cli, ["check", str(folder), *args])


def test_a_job_that_cannot_start_is_not_counted_as_valid(tmp_path):
    for name in ("a", "b", "c"):
        command = "no-such-program-here" if name == "c" else "true"
        (tmp_path / f"{name}.toml").write_text(f'name = "{name}"\ncommand = "{command}"\nevery = "1h"\n')
    res = _check(tmp_path)
    assert res.exit_code == 1
    assert "1 error(s) in" in res.stderr
    assert "; 2 valid job(s) would still run; 1 more would fail to start (preflight errors above)." in res.stderr
    doc = json.loads(_check(tmp_path, "--json").stdout)
    assert doc["valid_jobs"] == 2 and doc["would_start"] is True


def test_a_folder_without_a_valid_job_would_run_nothing(tmp_path):
    (tmp_path / "a.toml").write_text('name = "a"\ncommand = "true"\ntimout = "5m"\nmax_attempts = "three"\n')
    res = _check(tmp_path)
    assert res.stdout.splitlines() == [
        f"{tmp_path / 'a.toml'}:3: job 'a': field 'timout': unknown field (did you mean 'timeout'?)",
        f"{tmp_path / 'a.toml'}:4: job 'a': field 'max_attempts': Input should be a valid integer, got 'three'"]
    assert "no valid job: nothing would run until they are fixed." in res.stderr
    doc = json.loads(_check(tmp_path, "--json").stdout)
    assert doc["would_start"] is False and doc["valid_jobs"] == 0


def test_a_nested_typo_is_matched_against_its_own_table_and_a_long_value_is_cut_and_escaped(tmp_path):
    (tmp_path / "a.toml").write_text('name = "a"\ncommand = "true"\nmax_attempts = "\\u001b[2J' + "x" * 60 + '"\n'
                                     '[backoff]\ninitil = 3\nzzzz = 1\n')
    out = _check(tmp_path).stdout
    assert "field 'backoff.initil': unknown field (did you mean 'initial'?)" in out
    assert "field 'backoff.zzzz': unknown field (typo?)" in out
    line = next(ln for ln in out.splitlines() if "max_attempts" in ln)
    assert line.endswith("got '\\x1b[2J" + "x" * 35 + "…'") and "\x1b" not in line
