"""Cron adoption: a crontab becomes job specs (schedule, command, env, MAILTO → owner,
comments → intent) or is rewritten under `watchkeeper exec`; lines it cannot take are named
with their line numbers."""

from __future__ import annotations

import shlex
from pathlib import Path

from click.testing import CliRunner

from console.cli.main import cli
from core.spec import crontab
from core.spec.loader import load_dir

SAMPLE = (Path(__file__).parent / "crontab_sample.txt").read_text()


def test_jobs_carry_schedule_command_env_owner_and_intent():
    imp = crontab.parse(SAMPLE)
    jobs = {j.name: j for j in imp.jobs}
    assert sorted(jobs) == ["backup", "curl", "find", "mail", "report"]  # echo … | mail: mail does the work
    backup = jobs["backup"].fields
    assert backup["schedule"] == "30 2 * * *" and jobs["backup"].line == 8
    assert backup["command"] == ["/bin/bash", "-c", "/usr/local/bin/backup.sh --full >> /var/log/backup.log 2>&1"]
    assert backup["env"] == {"PATH": "/usr/bin:/bin"} and backup["timezone"] == "Europe/Paris"
    assert backup["owner"] == "ana@example.com" and backup["intent"] == "nightly backup of the db"
    assert jobs["find"].fields["schedule"] == "0 0 * * *"                      # @daily
    assert jobs["mail"].fields["command"][-1] == 'echo "100% done" | mail -s hi x'  # \% unescaped
    assert jobs["report"].fields["owner"] == "bob@example.com"                  # a later MAILTO
    assert jobs["report"].fields["intent"] == "inline comment"


def test_lines_it_cannot_take_are_named_with_their_numbers():
    refused = {r.line: r.reason for r in crontab.parse(SAMPLE).refused}
    assert sorted(refused) == [10, 13, 14]
    assert "@reboot" in refused[10] and "unescaped %" in refused[13] and "not in 0-59" in refused[14]


def test_written_specs_load_as_valid_jobs(tmp_path):
    res = CliRunner().invoke(cli, ["import-crontab", "--write", str(tmp_path / "jobs")], input=SAMPLE)
    assert res.exit_code == 1  # three lines skipped
    assert "skipped line 10: @reboot" in res.output
    loaded = load_dir(tmp_path / "jobs")
    assert not loaded.errors
    assert sorted(loaded.jobs) == ["backup", "curl", "find", "mail", "report"]
    spec = loaded.jobs["backup"].spec
    assert spec.schedule == "30 2 * * *" and spec.owner == "ana@example.com" and spec.timezone == "Europe/Paris"
    again = CliRunner().invoke(cli, ["import-crontab", "--write", str(tmp_path / "jobs")], input=SAMPLE)
    assert again.exit_code == 2 and "exists already" in again.output  # never overwritten silently


def test_rewrite_wraps_each_taken_line_and_keeps_the_rest(tmp_path):
    res = CliRunner().invoke(
        cli, ["import-crontab", "--rewrite", "--ledger", str(tmp_path / "wk.db")], input=SAMPLE)
    lines = res.stdout.splitlines()
    assert len(lines) == len(SAMPLE.splitlines())
    assert lines[1] == "SHELL=/bin/bash" and lines[13] == "61 * * * * bad minute"   # untouched
    sched, rest = lines[7].split(" ", 5)[:5], lines[7].split(" ", 5)[5]
    assert sched == ["30", "2", "*", "*", "*"]
    argv = shlex.split(rest)
    assert argv[1:5] == ["exec", "--job", "backup", "--ledger"] and argv[5] == str(tmp_path / "wk.db")
    assert argv[6:] == ["--", "/bin/bash", "-c", "/usr/local/bin/backup.sh --full >> /var/log/backup.log 2>&1"]
    assert lines[8].startswith("@daily ") and "exec --job find" in lines[8]
    assert "100\\% done" in lines[11]  # still a crontab line: cron reads the escape
    assert "skipped line 13" in res.stderr
    assert "no --ledger" not in res.stderr


def test_rewrite_without_a_ledger_warns_where_the_runs_would_go(tmp_path):
    res = CliRunner().invoke(cli, ["import-crontab", "--rewrite"], input="30 2 * * * /usr/local/bin/backup.sh\n")
    assert res.exit_code == 0 and "exec --job backup" in res.stdout
    assert "warning: no --ledger: the rewritten lines record their runs in ./watchkeeper.db" in res.stderr


def test_a_hash_inside_quotes_or_a_word_stays_in_the_command():
    """cron hands the whole rest of the line to the shell: only a real shell comment (a # that
    begins a word outside quotes) is taken as the intent; a # inside quotes or a word is part
    of the command (python-crontab's own split cut `echo "x # y" > f` into `echo "x`)."""
    tab = ('0 0 * * * echo "x # y" > /tmp/out.txt\n'
           "5 0 * * * echo 'a # b' && curl http://h/p#frag # fetch the page\n"
           '10 0 * * * echo \\# hash\n')
    jobs = crontab.parse(tab, fmt="user").jobs
    assert [j.fields["command"] for j in jobs] == [
        'echo "x # y" > /tmp/out.txt', "echo 'a # b' && curl http://h/p#frag", 'echo \\# hash']
    assert [j.fields.get("intent") for j in jobs] == [None, "fetch the page", None]
    out = crontab.rewrite(crontab.parse(tab, fmt="user"), watchkeeper="/wk", ledger="/l.db", jobs_dir=None)
    first = out.splitlines()[0]
    assert shlex.split(first.split(" -- ", 1)[1])[-1] == 'echo "x # y" > /tmp/out.txt'  # runs as cron would


def test_a_hash_inside_a_command_substitution_stays_in_the_command():
    tab = ("0 0 * * * tar czf /bak/`date +\\%F # day`.tgz /srv\n"
           "5 0 * * * echo $(hostname #short) > /tmp/h # note the host\n")
    jobs = crontab.parse(tab, fmt="user").jobs
    assert [j.fields["command"] for j in jobs] == [
        "tar czf /bak/`date +%F # day`.tgz /srv", "echo $(hostname #short) > /tmp/h"]  # as cron hands it on
    assert [j.fields.get("intent") for j in jobs] == [None, "note the host"]


def test_rewrite_escapes_a_percent_in_its_own_arguments_for_cron(tmp_path):
    out = crontab.rewrite(crontab.parse("0 0 * * * true\n", fmt="user"), watchkeeper="/wk",
                          ledger="/srv/100%/wk.db", jobs_dir=None)
    assert "--ledger /srv/100\\%/wk.db" in out  # cron hands exec /srv/100%/wk.db
