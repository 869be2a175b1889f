"""A crontab line with bytes that are not UTF-8 is refused by its line number and left in
the rewritten crontab byte for byte (never turned into U+FFFD)."""

from __future__ import annotations

from click.testing import CliRunner

from console.cli.main import cli


def test_rewrite_refuses_invalid_utf8_and_keeps_its_bytes(tmp_path):
    tab = tmp_path / "crontab"
    tab.write_bytes(b"# \xff comment\n* * * * * echo \xff\xfe\n* * * * * echo ok\n")
    res = CliRunner().invoke(cli, ["import-crontab", "--rewrite", str(tab)])
    assert res.exit_code == 1
    out = res.stdout_bytes.splitlines()
    assert out[0] == b"# \xff comment" and out[1] == b"* * * * * echo \xff\xfe"
    assert b"exec --job echo" in out[2] and "\ufffd".encode() not in res.stdout_bytes
    assert "line 2: not valid UTF-8" in res.stderr


def test_write_skips_the_line_and_takes_the_rest(tmp_path):
    tab = tmp_path / "crontab"
    tab.write_bytes(b"* * * * * echo \xff\n* * * * * echo ok\n")
    res = CliRunner().invoke(cli, ["import-crontab", "--write", str(tmp_path / "jobs"), str(tab)])
    assert res.exit_code == 1 and "line 1: not valid UTF-8" in res.stderr
    assert [p.name for p in (tmp_path / "jobs").iterdir()] == ["echo.toml"]
