"""``watchkeeper status`` shows runner heartbeats and says plainly when no runner is alive."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger import runners as status
from core.ledger.connection import Ledger
from tests.kit.sweep import add_runner, dead_pid


@pytest.fixture
def db(tmp_path):
    return tmp_path / "wk.db"


@pytest.fixture
def ledger(db):
    led = Ledger(db)
    yield led
    led.close()


def test_gap_text_names_the_time_and_how_long_ago():
    now = time.time()
    since = now - 7 * 60
    text = status.gap_text(since, now)
    assert text == f"no runner since {datetime.fromtimestamp(since):%H:%M}, 7m ago"


def test_no_runner_ever(ledger):
    gap = status.runner_gap(ledger)
    assert gap is not None and gap.since is None and "ever" in gap.text


def test_live_runner_means_no_gap(ledger):
    add_runner(ledger, pid=os.getpid())
    assert status.runner_gap(ledger) is None


def test_runner_with_expired_heartbeat_is_a_gap(ledger):
    pid, ctime = dead_pid()
    add_runner(ledger, pid=pid, create_time=ctime, heartbeat_age=420)
    gap = status.runner_gap(ledger)
    assert gap is not None and 419 < gap.seconds < 430 and "7m ago" in gap.text
    assert not gap.stopped_cleanly


def test_killed_runner_is_a_gap_before_its_heartbeat_expires(ledger):
    pid, ctime = dead_pid()
    add_runner(ledger, pid=pid, create_time=ctime, heartbeat_age=0.0, lease_s=30)
    assert status.runner_gap(ledger) is not None


def test_stalled_runner_is_shown_as_stalled_and_is_a_gap(ledger):
    rid = add_runner(ledger, pid=os.getpid(), heartbeat_age=60)
    st = status.status(ledger)
    assert st["stalled"] == [rid] and st["gap"] is not None
    assert any("stalled" in line for line in status.format_status(st))


def test_cli_status_exit_code_and_text(ledger, db):
    pid, ctime = dead_pid()
    add_runner(ledger, pid=pid, create_time=ctime, heartbeat_age=420)
    res = CliRunner().invoke(cli, ["status", "--ledger", str(db)])
    assert res.exit_code == 2 and "no runner since" in res.output
    add_runner(ledger, pid=os.getpid())
    res = CliRunner().invoke(cli, ["status", "--ledger", str(db), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["gap"] is None


def test_status_ages_use_the_one_compact_style(ledger):
    pid, ctime = dead_pid()
    add_runner(ledger, pid=pid, create_time=ctime, heartbeat_age=76)
    beat = ledger.one("SELECT heartbeat_at FROM runners")["heartbeat_at"]
    lines = status.format_status(status.status(ledger, now=beat + 76.5))
    assert lines[0].endswith(", 1m 16s ago"), lines[0]
    assert "last heartbeat 1m 16s ago" in lines[1], lines[1]


def test_status_folds_long_lines_to_the_terminal_at_a_word(ledger, db, monkeypatch):
    import console.cli.sweep as cli_sweep
    add_runner(ledger, pid=os.getpid(), host="build-agent-with-a-rather-long-name.eu-west-1.example.internal")
    monkeypatch.setattr(cli_sweep, "terminal_width", lambda: 80)
    res = CliRunner().invoke(cli, ["status", "--ledger", str(db)])
    lines = res.output.splitlines()
    assert all(len(ln) <= 80 for ln in lines), lines
    runner = next(i for i, ln in enumerate(lines) if "build-agent" in ln)
    assert lines[runner + 1].startswith("      ") and "live run(s)" in " ".join(lines[runner:runner + 3])
    monkeypatch.setattr(cli_sweep, "terminal_width", lambda: None)  # piped: one line each, whole
    whole = CliRunner().invoke(cli, ["status", "--ledger", str(db)]).output.splitlines()
    assert any("build-agent" in ln and "live run(s)" in ln for ln in whole)


def test_a_down_host_is_on_the_first_line_and_runner_ids_line_up():
    now = 1_800_000_000.0
    runner = {"liveness": "alive", "stopped_at": None, "stop_reason": None, "pid": 7, "lease_s": 30.0,
              "live_runs": 0, "heartbeat_at": now - 2}
    st = {"at": now, "gap": None, "runs": {},
          "runners": [{**runner, "id": "db1-7202-89aceb", "hostname": "db1", "liveness": "gone"},
                      {**runner, "id": "web1-7203-0551c8", "hostname": "web1"}],
          "hosts": [{"name": "db1", "up": False, "since": now - 90, "runners": [("db1-7202-89aceb", "gone")],
                     "live_runs": []},
                    {"name": "web1", "up": True, "since": now - 2, "runners": [("web1-7203-0551c8", "alive")],
                     "live_runs": []}]}
    lines = status.format_status(st)
    assert lines[0] == "runner: ok; host(s) down: db1 (last heartbeat 1m 30s ago)"
    assert lines[1].index(" gone ") == lines[2].index(" alive ")


def test_a_host_whose_runner_stopped_cleanly_is_stopped_not_down():
    now = 1_800_000_000.0
    runner = {"liveness": "gone", "stopped_at": now - 60, "stop_reason": "console quit", "pid": 7,
              "lease_s": 30.0, "live_runs": 0, "heartbeat_at": now - 60, "id": "vm-7-1a2b3c", "hostname": "vm"}
    host = {"name": "vm", "up": False, "since": now - 60, "stopped_cleanly": True,
            "runners": [("vm-7-1a2b3c", "gone")], "live_runs": []}
    alone = status.format_status({"at": now, "gap": None, "runs": {}, "runners": [runner], "hosts": [host]})
    assert not any("down" in ln or ln == "hosts:" for ln in alone), alone  # one host, stopped on purpose
    other = {**host, "name": "web1", "up": True, "stopped_cleanly": False, "since": now - 1}
    two = status.format_status({"at": now, "gap": None, "runs": {}, "runners": [runner], "hosts": [host, other]})
    assert two[0] == "runner: ok"
    assert any(ln.split()[:2] == ["vm", "stopped"] for ln in two) and any(ln.split()[:2] == ["web1", "up"] for ln in two)


def test_a_runner_stopped_cleanly_is_listed_stopped_and_a_killed_one_gone(ledger):
    add_runner(ledger, pid=os.getpid(), lease_s=60.0, host="web1", boot_id="w", runner_id="web1-live")
    pid, ctime = dead_pid()
    add_runner(ledger, pid=pid, create_time=ctime, heartbeat_age=5.0, host="db1", boot_id="d", stopped=True,
               runner_id="db1-stop")
    add_runner(ledger, pid=pid, create_time=ctime, heartbeat_age=120.0, lease_s=30.0, host="api1", boot_id="a",
               runner_id="api1-kill")
    lines = status.format_status(status.status(ledger))
    word = {ln.split()[0]: ln.split()[1] for ln in lines if ln.startswith("  ") and "-" in ln.split()[0]}
    assert word == {"web1-live": "alive", "db1-stop": "stopped", "api1-kill": "gone"}, lines
