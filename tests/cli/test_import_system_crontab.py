"""import-crontab on real-world crontabs: system crontabs (a user column before the command)
are told from user crontabs and keep their user (as the job's ``user``, and before the
wrapper in ``--rewrite``); names say what does the work; ``cwd`` is where cron runs the job;
template comments are no intent; six-field lines are refused unless ``--force``; a rewrite
keeps carriage returns and a missing last newline byte for byte."""

from __future__ import annotations

import pwd
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.spec import crontab
from core.spec.loader import load_dir

HERE = Path(__file__).parent / "crontabs"
DEBIAN_ETC = HERE / "debian_etc_crontab"      # Debian's stock /etc/crontab, tabs and all
CRON_D = HERE / "etc_cron_d_server"           # an /etc/cron.d file: several users
USER_TAB = HERE / "debian_user_crontab"       # `crontab -e`'s template above a user's jobs
ROOT_HOME = pwd.getpwnam("root").pw_dir


def _run(*args: str, input: bytes | None = None):
    res = CliRunner().invoke(cli, ["import-crontab", *args], input=input)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res


def test_debian_etc_crontab_is_read_as_a_system_crontab(tmp_path: Path):
    res = _run(str(DEBIAN_ETC), "--write", str(tmp_path / "jobs"))
    assert res.exit_code == 0, res.output
    assert "as a system crontab (user column): its lines have a user column" in res.stderr
    loaded = load_dir(tmp_path / "jobs")
    assert not loaded.errors
    assert sorted(loaded.jobs) == ["cron.daily", "cron.hourly", "cron.monthly", "cron.weekly"]
    hourly = loaded.jobs["cron.hourly"].spec
    assert hourly.user == "root" and hourly.cwd == ROOT_HOME and hourly.schedule == "17 * * * *"
    assert hourly.command == "cd / && run-parts --report /etc/cron.hourly"   # no 'root' in front
    daily = loaded.jobs["cron.daily"].spec
    assert daily.command == "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }"
    # The template above the jobs ("Example of job definition", the ascii ruler) is no intent.
    assert all(j.spec.intent is None for j in loaded.jobs.values())


def test_rewrite_of_a_system_crontab_keeps_the_user_before_the_wrapper():
    res = _run(str(DEBIAN_ETC), "--rewrite")
    assert res.exit_code == 0, res.output
    before = DEBIAN_ETC.read_bytes().splitlines(keepends=True)
    after = res.stdout_bytes.splitlines(keepends=True)
    assert len(after) == len(before)
    for no, (old, new) in enumerate(zip(before, after, strict=True), 1):
        if no not in (19, 20, 21, 22):
            assert new == old  # comments, SHELL, the template: byte for byte
    words = shlex.split(after[18].decode())
    assert words[:6] == ["17", "*", "*", "*", "*", "root"]   # cron still finds its user column
    assert words[6].endswith("watchkeeper") and words[7:10] == ["exec", "--job", "cron.hourly"]
    assert words[-4:] == ["--", "/bin/sh", "-c", "cd / && run-parts --report /etc/cron.hourly"]


def test_a_cron_d_file_keeps_each_lines_user():
    imp = crontab.parse(CRON_D.read_text(), fmt="system")
    jobs = {j.name: j.fields for j in imp.jobs}
    assert {n: f["user"] for n, f in jobs.items()} == {
        "arkmanager": "root", "cron": "www-data", "dump-db": "backup", "schedule-run": "root"}
    assert jobs["arkmanager"]["command"] == "arkmanager update --update-mods"
    assert jobs["arkmanager"]["intent"] == "keep the server and its mods current"
    assert jobs["arkmanager"]["owner"] == "ops@example.com"
    assert jobs["schedule-run"]["schedule"] == "0 0 * * 0"
    assert not imp.refused


def test_the_format_is_told_by_path_then_flag_then_content():
    lines = CRON_D.read_text().splitlines()
    assert crontab.detect(lines, "/etc/crontab")[0] == "system"
    assert crontab.detect(lines, "/etc/cron.d/server")[0] == "system"
    assert crontab.detect(["* * * * * true"], "/etc/cron.d/x")[0] == "system"
    assert crontab.detect(lines, "/var/spool/cron/crontabs/pi")[0] == "user"
    assert crontab.detect(lines, None)[0] == "system"
    assert crontab.detect(USER_TAB.read_text().splitlines(), None)[0] == "user"
    # --user wins over the content: the first word after the schedule is then the command.
    res = _run(str(CRON_D), "--user")
    assert "line 5: root  30 10 * * *  root arkmanager update --update-mods" in res.stdout.splitlines()
    # A spool file names the user it belongs to.
    imp = crontab.parse("0 5 * * * /home/pi/bin/backup.sh\n", path="/var/spool/cron/crontabs/root")
    assert imp.jobs[0].fields["user"] == "root" and imp.jobs[0].fields["cwd"] == ROOT_HOME


def test_an_unclear_crontab_is_read_as_a_user_crontab_with_a_warning():
    text = "0 * * * * backup nightly\n0 1 * * * /usr/bin/true\n"
    res = _run("-", input=text.encode())
    assert res.exit_code == 0, res.output
    assert "warning: could not tell whether it has a user column" in res.stderr
    assert "--system or --user" in res.stderr


def test_a_user_crontab_names_jobs_after_their_work_and_skips_the_template(tmp_path: Path):
    res = _run(str(USER_TAB), "--write", str(tmp_path / "jobs"))
    assert res.exit_code == 1  # the six-field line is refused
    loaded = load_dir(tmp_path / "jobs")
    assert not loaded.errors
    assert sorted(loaded.jobs) == ["backup", "backup-2", "dht22webavg", "schedule-run", "sync_feeds"]
    feeds = loaded.jobs["sync_feeds"].spec
    # cron runs a user's job in the home folder: so does the imported job.
    assert feeds.cwd == pwd.getpwuid(__import__("os").getuid()).pw_dir and feeds.user is None
    assert feeds.intent is None  # "m h dom mon dow command" and the rest of crontab's template
    assert loaded.jobs["dht22webavg"].spec.intent == "read the DHT22 sensor and average it"
    assert loaded.jobs["backup-2"].spec.command == "/home/pi/bin/backup.sh --photos"


def test_a_home_line_is_the_folder_cron_runs_in():
    imp = crontab.parse("HOME=/srv/site\n*/5 * * * * bin/console app:sync\n")
    assert imp.jobs[0].fields["cwd"] == "/srv/site" and imp.jobs[0].name == "app-sync"


@pytest.mark.parametrize("force", [False, True])
def test_a_six_field_line_is_refused_with_its_number_unless_forced(force: bool):
    text = "0 */5 * * * * /home/pi/bin/every-five-hours.sh\n0 1 * * * /usr/bin/true\n"
    res = _run("-", *(["--force"] if force else []), input=text.encode())
    why = ("line 1: six time fields ('0 */5 * * * *': a seconds field, Quartz style?); cron reads the sixth ('*')"
           " as the start of the command")
    if force:
        assert res.exit_code == 0 and f"warning: {why}; taken as cron reads it (--force)" in res.stderr
        assert "line 1: every-five-hours  0 */5 * * *  * /home/pi/bin/every-five-hours.sh" in res.stdout
    else:
        assert res.exit_code == 1 and f"skipped {why}; left out (--force takes it as cron reads it)" in res.stderr
        assert "line 1:" not in res.stdout and "line 2: true" in res.stdout


def test_rewrite_keeps_carriage_returns_and_a_missing_last_newline(tmp_path: Path):
    tab = tmp_path / "crontab"
    tab.write_bytes(b"MAILTO=ana@example.com\r\n# nightly\r\n30 2 * * * /usr/local/bin/backup.sh\r\n"
                    b"@reboot /usr/local/bin/start\r\n0 * * * * /usr/bin/true")
    res = _run(str(tab), "--rewrite")
    out = res.stdout_bytes
    lines = out.split(b"\n")
    assert lines[0] == b"MAILTO=ana@example.com\r" and lines[1] == b"# nightly\r"
    assert lines[2].endswith(b" -- /bin/sh -c /usr/local/bin/backup.sh\r") and b"exec --job backup" in lines[2]
    assert lines[3] == b"@reboot /usr/local/bin/start\r"  # refused: as it was
    assert b"exec --job true" in lines[4] and not out.endswith(b"\n")  # no newline added
    assert len(lines) == 5
    # The written spec has the command without the carriage return.
    imp = crontab.parse(tab.read_bytes().decode())
    assert imp.jobs[0].fields["command"] == "/usr/local/bin/backup.sh"
