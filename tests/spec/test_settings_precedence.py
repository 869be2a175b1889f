"""Settings precedence: command-line flags > WATCHKEEPER_* environment > watchkeeper.toml."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from core.spec.settings import SettingsError, load_settings


def test_flag_beats_environment_beats_file(tmp_path, monkeypatch):
    (tmp_path / "watchkeeper.toml").write_text('ledger = "file.db"\nconcurrency = 3\nheartbeat = 2\n')
    s = load_settings(tmp_path)
    assert s.ledger.name == "file.db" and s.concurrency == 3
    monkeypatch.setenv("WATCHKEEPER_LEDGER", str(tmp_path / "env.db"))
    monkeypatch.setenv("WATCHKEEPER_CONCURRENCY", "5")
    s = load_settings(tmp_path)
    assert s.ledger.name == "env.db" and s.concurrency == 5 and s.heartbeat == 2
    s = load_settings(tmp_path, ledger=str(tmp_path / "flag.db"), concurrency=None)
    assert s.ledger.name == "flag.db" and s.concurrency == 5


def test_empty_variable_is_unset_not_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("WATCHKEEPER_LEDGER", "")
    assert load_settings(tmp_path).ledger.name == "watchkeeper.db"
    assert load_settings(tmp_path, ledger=str(tmp_path / "x.db")).ledger.name == "x.db"


def test_errors_name_where_the_bad_value_came_from(tmp_path, monkeypatch):
    (tmp_path / "watchkeeper.toml").write_text("concurrency = 0\n")
    with pytest.raises(SettingsError, match=r"watchkeeper.toml:1: field 'concurrency'"):
        load_settings(tmp_path)
    monkeypatch.setenv("WATCHKEEPER_CONCURRENCY", "-1")
    with pytest.raises(SettingsError, match=r"WATCHKEEPER_CONCURRENCY: field 'concurrency'"):
        load_settings(tmp_path)
    with pytest.raises(SettingsError, match=r"--concurrency: field 'concurrency'"):
        load_settings(tmp_path, concurrency=0)


def test_cli_ledger_flag_wins_over_the_variable(tmp_path, monkeypatch):
    Ledger(tmp_path / "env.db").close()  # a healthy ledger the variable points at
    monkeypatch.setenv("WATCHKEEPER_LEDGER", str(tmp_path / "env.db"))
    assert CliRunner().invoke(cli, ["doctor"]).exit_code == 0
    res = CliRunner().invoke(cli, ["doctor", "--ledger", "/dev/null"])
    assert res.exit_code == 2, res.output  # it checked the flag's ledger, not the variable's


def test_settings_durations_take_the_same_words_as_job_specs(tmp_path):
    (tmp_path / "watchkeeper.toml").write_text('heartbeat = "2s"\nlease = "1m"\nsweep_interval = 1.5\n')
    s = load_settings(tmp_path)
    assert (s.heartbeat, s.lease, s.sweep_interval) == (2.0, 60.0, 1.5)


def test_check_judges_settings_from_the_environment_as_run_will(tmp_path, monkeypatch):
    (tmp_path / "ok.toml").write_text('name = "ok"\ncommand = "true"\nevery = "1m"\n')
    assert CliRunner().invoke(cli, ["check", str(tmp_path)]).exit_code == 0
    monkeypatch.setenv("WATCHKEEPER_HEARTBEAT", "20")
    res = CliRunner().invoke(cli, ["check", str(tmp_path)])
    assert res.exit_code == 1, res.output
    assert "WATCHKEEPER_HEARTBEAT" in res.output and "heartbeat" in res.output



def test_two_ledgers_in_one_folder_get_their_own_artifacts(tmp_path):
    a = load_settings(None, ledger=str(tmp_path / "a.db"))
    b = load_settings(None, ledger=str(tmp_path / "b.db"))
    assert a.artifacts_dir != b.artifacts_dir
    assert a.artifacts_dir == tmp_path / "a-artifacts"


def test_sink_timeouts_take_words_and_errors_give_file_line_and_field(tmp_path):
    toml = ('[[notify]]\ntype = "command"\nname = "a"\ncommand = ["true"]\ntimeout = "3s"\n\n'
            '[[notify]]\ntype = "webhook"\nname = "b"\nurl = "http://x"\ntimeout = "soon"\n')
    (tmp_path / "watchkeeper.toml").write_text(toml)
    with pytest.raises(SettingsError) as info:
        load_settings(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'watchkeeper.toml'}:11: field 'notify[1].timeout': ")
    assert info.value.problems[0]["line"] == 11
    (tmp_path / "watchkeeper.toml").write_text(toml.replace('"soon"', '"1m"'))
    got = load_settings(tmp_path)
    assert [s.timeout for s in got.notify] == [3.0, 60.0]


def test_check_says_run_would_not_start_on_a_settings_error(tmp_path):
    from click.testing import CliRunner

    from console.cli.main import cli

    (tmp_path / "job.toml").write_text('name = "j"\ncommand = "true"\n')
    (tmp_path / "watchkeeper.toml").write_text("heartbeat = 1\nlease = 30\nconcurrency = 0\n")
    res = CliRunner().invoke(cli, ["check", str(tmp_path)])
    assert res.exit_code == 1
    assert "watchkeeper.toml:3: field 'concurrency'" in res.output
    assert "would not start" in res.stderr and "would still run" not in res.stderr


def test_postgresql_ledgers_that_share_a_database_name_get_their_own_artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    for var in ("PGHOST", "PGPORT", "PGDATABASE"):
        monkeypatch.delenv(var, raising=False)
    urls = ["postgresql:///watchkeeper", "postgresql://ops:secret@db1.example/watchkeeper",
            "postgresql://ops@db2.example:6543/watchkeeper",
            "postgresql://ops@db2.example:6543/watchkeeper?options=-csearch_path%3Dteam_b",
            "postgresql://ops@/watchkeeper?host=db2.example&port=6544",  # host and port as parameters
            "postgresql://ops@db2.example:6543/watch-keeper", "postgresql://ops@db2.example:6543/watch_keeper"]
    dirs = [load_settings(None, ledger=url).artifacts_dir for url in urls]
    assert len(set(dirs)) == len(urls)
    assert all(d.parent == tmp_path / "watchkeeper" for d in dirs)
    names = [d.name.rsplit("-", 2)[0] for d in dirs]  # without the hash and "artifacts"
    assert names == ["local-5432-watchkeeper", "db1.example-5432-watchkeeper", "db2.example-6543-watchkeeper",
                     "db2.example-6543-watchkeeper-team_b", "db2.example-6544-watchkeeper",
                     "db2.example-6543-watch_keeper", "db2.example-6543-watch_keeper"]
    assert not any("secret" in str(d) or "ops" in str(d) for d in dirs)
    # libpq's environment fills what the URL leaves out, as it does for the connection.
    monkeypatch.setenv("PGPORT", "6545")
    assert load_settings(None, ledger=urls[0]).artifacts_dir.name.startswith("local-6545-watchkeeper-")
