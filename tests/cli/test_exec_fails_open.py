"""`watchkeeper exec` fails open: whatever is wrong with the ledger, the wrapped command runs,
its exit status passes through, and one `warning:` line on stderr says why it is unrecorded.
`import-crontab --rewrite` refuses to write such a ledger into crontab lines. Ctrl-C of an
exec is recorded as interrupted (abandoned), never as the job's failure."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.ledger.connection import Ledger

WK = str(Path(sys.executable).parent / "watchkeeper")


def wk(*args: str, cwd: Path, timeout: float = 60, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([WK, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, input=stdin)


def exec_marker(tmp_path: Path, ledger: Path | str, code: int = 5) -> subprocess.CompletedProcess:
    marker = tmp_path / "ran"
    return wk("exec", "--job", "nightly", "--ledger", str(ledger), "--",
              "sh", "-c", f"echo out; touch {marker}; exit {code}", cwd=tmp_path)


def assert_ran_unrecorded(res: subprocess.CompletedProcess, tmp_path: Path, why: str) -> None:
    assert (tmp_path / "ran").exists(), res.stderr
    assert res.returncode == 5
    assert res.stdout == "out\n"  # unrecorded: the command's own output, straight through
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and why in warnings[0] and "unrecorded" in warnings[0], res.stderr
    assert "Traceback" not in res.stderr


def test_a_ledger_in_a_missing_folder_still_runs_the_command(tmp_path):
    res = exec_marker(tmp_path, tmp_path / "no-such-folder" / "wk.db")
    assert_ran_unrecorded(res, tmp_path, "does not exist")


@pytest.mark.parametrize("wrong, why", [
    (("--ledger", "{tmp}"), "not a Watchkeeper ledger"),  # a folder given as the ledger
    (("--jobs", "{tmp}/no-such-folder"), "--jobs"),
    (("--config", "{tmp}/no-such.toml"), "--config"),
    ((), "no --job NAME given"),
], ids=["ledger-is-a-folder", "missing-jobs-folder", "missing-config", "no-job"])
def test_a_wrong_option_still_runs_the_command(tmp_path, wrong, why):
    # click's own checks (a path that must exist, a required option) used to end exec with a
    # usage error before the command ran: one wrong word in a crontab line stopped the job.
    marker = tmp_path / "ran"
    job = () if not wrong else ("--job", "nightly")
    ledger = () if wrong and wrong[0] == "--ledger" else ("--ledger", str(tmp_path / "wk.db"))
    res = wk("exec", *job, *ledger, *(w.format(tmp=tmp_path) for w in wrong), "--",
             "sh", "-c", f"echo out; touch {marker}; exit 5", cwd=tmp_path)
    assert_ran_unrecorded(res, tmp_path, why)


def test_a_file_that_is_not_a_ledger_still_runs_the_command(tmp_path):
    bogus = tmp_path / "notes.db"
    bogus.write_text("my notes, not a database\n")
    res = exec_marker(tmp_path, bogus)
    assert_ran_unrecorded(res, tmp_path, "not a Watchkeeper ledger")
    assert bogus.read_text() == "my notes, not a database\n"


def test_a_foreign_sqlite_database_still_runs_the_command_and_is_left_alone(tmp_path):
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    res = exec_marker(tmp_path, other)
    assert_ran_unrecorded(res, tmp_path, "not a Watchkeeper ledger")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
def test_an_unwritable_ledger_still_runs_the_command(tmp_path):
    db = tmp_path / "wk.db"
    Ledger(db).close()
    folder_mode = tmp_path.stat().st_mode
    db.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        res = wk("exec", "--job", "nightly", "--ledger", str(db), "--", "sh", "-c", "echo out; exit 5", cwd=Path("/"))
    finally:
        tmp_path.chmod(folder_mode)
    assert res.returncode == 5 and res.stdout == "out\n"
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]


@pytest.mark.slow
def test_a_ledger_locked_past_the_deadline_still_runs_the_command(tmp_path):
    db = tmp_path / "wk.db"
    Ledger(db).close()
    holder = sqlite3.connect(db, timeout=0, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        res = exec_marker(tmp_path, db)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert_ran_unrecorded(res, tmp_path, "locked")


def test_a_usable_ledger_records_the_run(tmp_path):
    db = tmp_path / "wk.db"
    res = exec_marker(tmp_path, db)
    assert res.returncode == 5 and (tmp_path / "ran").exists()
    assert not [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    with Ledger(db) as led:
        assert led.one("SELECT state, exit_code FROM runs")[:] == ("failed", 5)


def test_import_crontab_rewrite_refuses_an_unusable_ledger_and_keeps_the_crontab(tmp_path):
    tab = "MAILTO=ana@example.com\n0 3 * * * /usr/local/bin/backup.sh\n"
    res = wk("import-crontab", "--rewrite", "--ledger", str(tmp_path / "missing" / "wk.db"), "-",
             cwd=tmp_path, stdin=tab)
    # Refused, but `... | crontab -` must reinstall the crontab as it was, not an empty one.
    assert res.returncode == 2 and res.stdout == tab
    assert "missing" in res.stderr and "does not exist" in res.stderr and "Traceback" not in res.stderr
    assert "printed unchanged" in res.stderr


def test_import_crontab_rewrite_with_a_spec_in_the_way_keeps_the_crontab_and_writes_nothing(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "report.toml").write_text("mine")
    tab = "0 3 * * * /usr/local/bin/backup.sh\n5 4 * * * /usr/local/bin/report.sh\n"
    res = wk("import-crontab", "--write", str(tmp_path / "jobs"), "--rewrite", "--ledger", str(tmp_path / "wk.db"),
             "-", cwd=tmp_path, stdin=tab)
    assert res.returncode == 2 and res.stdout == tab and "exists already" in res.stderr
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["report.toml"]  # none half-written
    assert (tmp_path / "jobs" / "report.toml").read_text() == "mine"


@pytest.mark.slow
def test_ctrl_c_of_exec_is_recorded_as_interrupted_not_as_a_failure(tmp_path):
    db = tmp_path / "wk.db"
    proc = subprocess.Popen([WK, "exec", "--job", "long", "--ledger", str(db), "--", "sleep", "300"],
                            cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    running = False
    while time.time() < deadline and not running:
        if Path(f"{db}-wal").exists():
            with Ledger(db) as led:
                row = led.one("SELECT state FROM runs")
                running = row is not None and row["state"] == "running"
        time.sleep(0.1)
    assert running
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 128 + signal.SIGINT
    with Ledger(db) as led:
        row = led.one("SELECT state, reason FROM runs")
        assert (row["state"], row["reason"]) == ("abandoned", "interrupted")
        assert not led.query("SELECT 1 FROM escalations WHERE severity = 'critical'")


@pytest.mark.slow
def test_an_unreachable_postgresql_ledger_still_runs_the_command(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = exec_marker(tmp_path, f"postgresql://127.0.0.1:{port}/wk")
    assert_ran_unrecorded(res, tmp_path, "cannot connect to PostgreSQL")


@pytest.mark.slow
def test_a_postgresql_server_that_never_answers_still_runs_the_command(tmp_path):
    import socket

    with socket.socket() as silent:  # accepts the connection (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        res = exec_marker(tmp_path, f"postgresql://127.0.0.1:{silent.getsockname()[1]}/wk")
    assert_ran_unrecorded(res, tmp_path, "PostgreSQL")


@pytest.mark.parametrize(("args", "says"), [
    (["--write", "{tab}"], "--write {tab}: not a folder"),
    (["--ledger", "{dir}"], "not a regular file"),
    (["--ledger", ""], "--ledger is empty"),
    (["--write", ""], "--write is empty"),
    (["--ledger", "postgresql://ops:hunter2@db.internal/wk"], "carries a password"),
])
def test_import_crontab_rewrite_refusals_keep_the_crontab(tmp_path, args, says):
    tab = "0 3 * * * /usr/local/bin/backup.sh\n"
    (tmp_path / "tab").write_text(tab)
    fill = {"tab": str(tmp_path / "tab"), "dir": str(tmp_path)}
    res = wk("import-crontab", "--rewrite", *[a.format(**fill) for a in args], str(tmp_path / "tab"),
             cwd=tmp_path, stdin="")
    assert res.returncode == 2 and res.stdout == tab
    assert says.format(**fill) in res.stderr and "Traceback" not in res.stderr
    assert "hunter2" not in res.stderr + res.stdout


def test_import_crontab_that_cannot_write_a_spec_writes_none_and_keeps_the_crontab(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from console.cli.main import cli

    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "report.toml").write_text("mine")
    real = Path.write_text
    written: list[str] = []

    def disk_fills(self, *a, **kw):
        if written:  # the second spec finds the disk full
            raise OSError(28, "No space left on device")
        written.append(self.name)
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "write_text", disk_fills)
    tab = "0 3 * * * /usr/local/bin/backup.sh\n5 4 * * * /usr/local/bin/report.sh\n"
    res = CliRunner().invoke(cli, ["import-crontab", "--write", str(tmp_path / "jobs"), "--rewrite", "--force",
                                   "--ledger", str(tmp_path / "wk.db")], input=tab)
    assert res.exit_code == 2 and res.stdout == tab
    assert "No space left on device" in res.stderr and "no spec was written" in res.stderr
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["report.toml"]  # no temporaries left
    assert (tmp_path / "jobs" / "report.toml").read_text() == "mine"  # --force lost nothing


def test_import_crontab_into_a_read_only_folder_refuses_and_keeps_the_crontab(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from console.cli.main import cli

    def read_only(self, *a, **kw):
        raise OSError(30, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "write_text", read_only)
    monkeypatch.setattr(Path, "unlink", read_only)  # the temporary was never made, and cannot be removed
    (tmp_path / "jobs").mkdir()
    tab = "0 3 * * * /usr/local/bin/backup.sh\n"
    res = CliRunner().invoke(cli, ["import-crontab", "--write", str(tmp_path / "jobs"), "--rewrite",
                                   "--ledger", str(tmp_path / "wk.db")], input=tab)
    assert res.exit_code == 2 and res.stdout == tab, res.output
    assert "cannot write there (Read-only file system)" in res.stderr
    assert not (tmp_path / "wk.db").exists()  # refused before the ledger check could create it


def test_import_crontab_refusing_a_write_folder_creates_no_ledger(tmp_path):
    tab = "0 3 * * * /usr/local/bin/backup.sh\n"
    (tmp_path / "afile").write_text("x")
    res = wk("import-crontab", "--rewrite", "--write", str(tmp_path / "afile"), "--ledger", str(tmp_path / "new.db"),
             "-", cwd=tmp_path, stdin=tab)
    assert res.returncode == 2 and res.stdout == tab and "not a folder" in res.stderr
    assert not (tmp_path / "new.db").exists()
