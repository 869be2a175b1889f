"""CLI: escalations, ack/snooze/resolve with --as, report, and tail over a pipe."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from core.supervisor import supervisor
from tests.kit.supervisor import add_job, new_run, to_verifying

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "wk.db"
    with Ledger(path) as ledger:
        add_job(ledger, tmp_path, owner="ana")
        rid = new_run(ledger)
        to_verifying(ledger, rid, exit_code=4)
        supervisor.settle(ledger, rid)
    return path


def _cli(*args):
    return CliRunner().invoke(cli, [*args], catch_exceptions=False)


def test_list_ack_race_message_and_resolve(db):
    res = _cli("escalations", "--ledger", str(db))
    assert res.exit_code == 0 and " failed " in res.output and "critical" in res.output and "ana" in res.output
    row = json.loads(_cli("escalations", "--json", "--ledger", str(db)).output.splitlines()[0])
    esc_id = row["id"]
    assert _cli("ack", str(esc_id), "--as", "ana", "--ledger", str(db)).exit_code == 0
    lost = _cli("ack", str(esc_id), "--as", "bob", "--ledger", str(db))
    assert lost.exit_code == 1 and "already acknowledged by ana at" in lost.output
    assert _cli("snooze", str(esc_id), "--for", "2h", "--as", "bob", "--ledger", str(db)).exit_code == 0
    assert "snoozed" in _cli("escalations", "--ledger", str(db)).output
    assert _cli("resolve", str(esc_id), "--as", "bob", "--ledger", str(db)).exit_code == 0
    listed = _cli("escalations", "--state", "resolved", "--ledger", str(db)).output
    assert listed.count("\n") == 2 and listed.startswith("TIME (UTC)")  # the heading, then the one row
    bad = _cli("snooze", str(esc_id), "--for", "soon", "--ledger", str(db))
    assert bad.exit_code == 2


def test_one_escalation_whole_with_its_reason_acts_and_hints(db, monkeypatch):
    import console.cli.escalations as cli_esc
    import console.cli.table as table
    esc_id = json.loads(_cli("escalations", "--json", "--ledger", str(db)).output.splitlines()[0])["id"]
    with Ledger(db) as led:  # a reason longer than any terminal line
        led.write(lambda c: c.execute("UPDATE escalations SET reason = ? WHERE id = ?",
                                      ("backup exited 4: " + "word " * 40 + "END", esc_id)))
    monkeypatch.setattr(table, "terminal_width", lambda: 80)
    monkeypatch.setattr(cli_esc.table, "terminal_width", lambda: 80)
    listed = CliRunner().invoke(cli, ["escalations", "--ledger", str(db)])
    assert "END" not in listed.stdout and "`watchkeeper escalations ID` shows one whole" in listed.stderr
    assert _cli("ack", str(esc_id), "--as", "ana", "--ledger", str(db)).exit_code == 0
    one = _cli("escalations", f"#{esc_id}", "--ledger", str(db))
    assert one.exit_code == 0
    lines = one.output.splitlines()
    assert lines[0].startswith(f"escalation #{esc_id}  critical  acknowledged  failed  job ")
    assert all(len(ln) <= 80 for ln in lines), lines
    assert "END" in one.output and "owner ana" in one.output  # the whole reason, folded
    assert "acknowledged by ana at" in one.output and "opened" in one.output
    assert f"watchkeeper resolve {esc_id}" in lines[-1] and "watchkeeper ack" not in lines[-1]  # acknowledged already
    assert not [ln for ln in lines if "by operator:" in ln]  # the operator named one way throughout
    doc = json.loads(_cli("escalations", str(esc_id), "--json", "--ledger", str(db)).output)
    assert doc["id"] == esc_id and doc["acked_by"] == "ana" and doc["occurrences"] and "notifications" in doc
    missing = CliRunner().invoke(cli, ["escalations", "9999", "--ledger", str(db)])
    assert missing.exit_code == 2 and "no escalation 9999" in missing.output


def test_report(db):
    res = _cli("report", "--since", "1h", "--ledger", str(db))
    assert res.exit_code == 0
    assert "runs judged     1" in res.output and "failed" in res.output and "sent 0, failed 0" in res.output
    assert res.output.splitlines()[0].endswith("(1h ago)")  # the one compact age style
    rep = json.loads(_cli("report", "--json", "--ledger", str(db)).output)
    assert rep["escalated"] == 1 and rep["silent_share"] == 0


def test_missing_ledger_is_a_clear_error(tmp_path):
    res = CliRunner().invoke(cli, ["escalations", "--ledger", str(tmp_path / "none.db")])
    assert res.exit_code == 2 and "no ledger" in res.output


def _tail(db, *extra):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "console.cli", "tail", "--ledger", str(db), *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


@pytest.mark.slow
def test_tail_streams_changes_and_exits_quietly_on_ctrl_c(db, tmp_path):
    proc = _tail(db, "--since", "1h", "--json")
    try:
        first = json.loads(proc.stdout.readline())
        assert first["kind"] == "failed" and first["count"] == 1
        with Ledger(db) as ledger:  # a second failure: the same escalation, count 2, streams live
            rid = new_run(ledger)
            to_verifying(ledger, rid, exit_code=4)
            supervisor.settle(ledger, rid)
        second = json.loads(proc.stdout.readline())
        assert second["id"] == first["id"] and second["count"] == 2
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) in (0, -signal.SIGINT, 130)
        assert b"Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_tail_exits_on_closed_pipe(db):
    proc = _tail(db, "--since", "1h")
    try:
        line = proc.stdout.readline().decode()
        assert "critical" in line and "x1" in line
        proc.stdout.close()
        with Ledger(db) as ledger:  # the next write makes tail print into the closed pipe
            for _ in range(3):
                rid = new_run(ledger)
                to_verifying(ledger, rid, exit_code=4)
                supervisor.settle(ledger, rid)
                time.sleep(0.3)
        proc.wait(timeout=10)
        assert b"Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_report_rows_stay_aligned_with_a_long_kind(db):
    from core.ledger import escalations
    with Ledger(db) as led:
        led.write(lambda c: escalations.raise_escalation(c, job="job", kind="mission_worker_failed",
                                                         severity="warning", reason="worker 2 failed",
                                                         run_id=None, owner=None))
    out = _cli("report", "--since", "1h", "--ledger", str(db)).output
    rows = [ln for ln in out.splitlines() if "escalation(s)" in ln]
    assert len(rows) == 2 and len({ln.index(" escalation(s)") for ln in rows}) == 1, rows
    assert len({ln.index(" occurrence(s)") for ln in rows}) == 1, rows


def test_snooze_takes_ids_as_listed_needs_a_unit_and_says_a_later_day(db):
    esc_id = json.loads(_cli("escalations", "--json", "--ledger", str(db)).output.splitlines()[0])["id"]
    bare = _cli("snooze", str(esc_id), "--for", "30", "--ledger", str(db))
    assert bare.exit_code == 2 and "give a unit" in bare.output
    week = _cli("snooze", f"#{esc_id}", "--for", "1w", "--as", "bob", "--ledger", str(db))
    assert week.exit_code == 0, week.output
    # a week away: the answer names the day, not only a time that reads as today
    assert re.search(r"snoozed escalation \d+ \(.*\) until \w{3} \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", week.output), \
        week.output
    assert _cli("ack", f"#{esc_id}", "--as", "bob", "--ledger", str(db)).exit_code == 0


def test_a_runless_escalation_says_what_each_occurrence_saw(db, monkeypatch):
    import console.cli.escalations as cli_esc
    from core.ledger.escalations import raise_escalation

    monkeypatch.setattr(cli_esc.table, "terminal_width", lambda: 80)
    with Ledger(db) as led:
        esc_id, _ = led.write(lambda c: raise_escalation(
            c, job="(host db1)", kind="host_down", severity="critical", run_id=None, owner="ops",
            reason="host db1 down: no heartbeat from its runner(s) db1-1 since 01:54:15 UTC; its runs none"))
    lines = _cli("escalations", str(esc_id), "--ledger", str(db)).output.splitlines()
    seen = lines[lines.index("occurrences (newest first):") + 1]
    assert "opened" in seen and "host db1 down" in seen and len(seen) <= 80, seen


def test_the_listing_shows_each_row_at_the_time_it_is_ordered_by(db):
    """Listed last seen first, each with its last-seen time: an escalation acted on later
    (here resolved an hour after it was last seen) keeps its place and shows when it was seen,
    so the times read in the listing's order."""
    with Ledger(db) as led:
        led.write(lambda c: c.execute("UPDATE escalations SET last_seen = 1767225600, updated_at = 1767229200"))
    listed = _cli("escalations", "--state", "all", "--ledger", str(db)).output
    row = listed.splitlines()[1]
    assert row.startswith("2026-01-01T00:00:00Z"), row  # last seen, not 01:00 (the later change)
