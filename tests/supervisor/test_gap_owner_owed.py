"""A runner gap seen first by a process without settings (``tail``, ``sweep --ledger``, a
console) is owned by the gone runner's owner, and its notification is sent by the next
process that delivers (``sweep --config``, a runner): the outbox owes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from console.app import ConsoleConfig, WatchkeeperApp
from console.cli.main import cli
from core.ledger.connection import Ledger
from core.spec.settings import load_settings
from core.sweep import watch
from tests.kit.gap import sent, sink_toml
from tests.kit.pilot import TEST_REFRESH_S
from tests.kit.runners import ROOT
from tests.kit.sweep import add_runner, dead_pid

PY = sys.executable


def _gone_runner(db, owner: str | None) -> None:
    with Ledger(db) as led:
        pid, ctime = dead_pid()
        rid = add_runner(led, pid=pid, create_time=ctime, heartbeat_age=1)
        led.write(lambda c: c.execute("UPDATE runners SET owner = ? WHERE id = ?", (owner, rid)))


def _escalations(db) -> list[dict]:
    with Ledger(db) as led:
        return [dict(r) for r in led.query("SELECT * FROM escalations ORDER BY id")]


def _notifications(db) -> list[dict]:
    with Ledger(db) as led:
        return [dict(r) for r in led.query("SELECT * FROM notifications ORDER BY id")]


def test_sweep_without_config_opens_the_gap_for_the_runners_owner_and_a_later_sweep_pages(tmp_path):
    db = tmp_path / "wk.db"
    _gone_runner(db, "ops")
    res = CliRunner().invoke(cli, ["sweep", "--ledger", str(db)])
    assert res.exit_code == 0, res.output
    (esc,) = _escalations(db)
    assert esc["kind"] == "runner_gap" and esc["owner"] == "ops"
    assert _notifications(db) == []
    out = tmp_path / "pager.jsonl"
    (tmp_path / "watchkeeper.toml").write_text(sink_toml(out, owner="ops"))
    settings = load_settings(tmp_path, ledger=str(db))
    with Ledger(db) as led:
        got = watch.watch_once(led, settings)
    assert got.sent == 1
    (note,) = sent(out)
    assert note["kind"] == "runner_gap" and note["owner"] == "ops" and note["event"] == "opened"
    with Ledger(db) as led:  # owed once: a second pass sends nothing more
        assert watch.watch_once(led, settings).sent == 0
    assert len(sent(out)) == 1


def test_owed_notifications_respect_the_sinks_routing(tmp_path):
    db = tmp_path / "wk.db"
    _gone_runner(db, "someone-else")
    CliRunner().invoke(cli, ["sweep", "--ledger", str(db)])
    out = tmp_path / "pager.jsonl"
    (tmp_path / "watchkeeper.toml").write_text(sink_toml(out) + 'owners = ["ops"]\n')
    settings = load_settings(tmp_path, ledger=str(db))
    with Ledger(db) as led:
        assert watch.watch_once(led, settings).sent == 0
    assert sent(out) == []


async def test_console_alone_opens_the_gap(tmp_path, monkeypatch):
    import console.app as app_mod

    monkeypatch.setattr(app_mod, "RUNNER_GAP_CHECK_S", 0.05)
    db = tmp_path / "wk.db"
    _gone_runner(db, "ops")
    app = WatchkeeperApp(ConsoleConfig(ledger=db, operator="ana", refresh=TEST_REFRESH_S, watch_runner=True))
    async with app.run_test() as pilot:
        deadline = time.monotonic() + 15
        while not _escalations(db) and time.monotonic() < deadline:
            await pilot.pause(0.05)
    (esc,) = _escalations(db)
    assert esc["kind"] == "runner_gap" and esc["owner"] == "ops"


@pytest.mark.slow
def test_tail_sees_the_crash_first_and_sweep_config_still_pages_the_owner(rig, tmp_path):
    out = tmp_path / "pager.jsonl"
    rig.write('name = "tick"\ncommand = ["true"]\nevery = "1h"\n')
    (rig.specs / "watchkeeper.toml").write_text(sink_toml(out, owner="ops"))
    proc = rig.start()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    tail = subprocess.Popen([PY, "-m", "console.cli", "tail", "--ledger", str(rig.db), "--json"], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = tail.stdout.readline()  # the escalation tail opened
    finally:
        os.killpg(tail.pid, signal.SIGTERM)
        tail.wait(timeout=10)
    assert json.loads(line)["kind"] == "runner_gap"
    esc = [e for e in _escalations(rig.db) if e["kind"] == "runner_gap"]
    assert [e["owner"] for e in esc] == ["ops"]
    res = subprocess.run([PY, "-m", "console.cli", "sweep", "--ledger", str(rig.db),
                          "--config", str(rig.specs / "watchkeeper.toml"), "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    (note,) = sent(out)
    assert note["kind"] == "runner_gap" and note["owner"] == "ops"


def test_owed_escalations_a_sink_never_hears_do_not_hide_newer_ones(tmp_path):
    from core.ledger import escalations, outbox
    from core.spec.settings import CommandSink

    with Ledger(tmp_path / "wk.db") as led:
        for i in range(5):  # five open escalations of someone else, older than ours
            led.write(lambda c, i=i: escalations.raise_escalation(
                c, job=f"other{i}", kind="failed", severity="critical", reason="x", run_id=None, owner="dev"))
        led.write(lambda c: escalations.raise_escalation(
            c, job="db", kind="failed", severity="critical", reason="x", run_id=None, owner="ops"))
        sink = CommandSink(name="pager", command=["true"], owners=["ops"])
        ids = led.write(lambda c: outbox.enqueue_owed(c, [sink], limit=2))
        assert len(ids) == 1
        (row,) = led.query("SELECT e.job FROM notifications n JOIN escalations e ON e.id = n.escalation_id")
        assert row["job"] == "db"
