"""``watchkeeper status`` lists each runner once with its last heartbeat; runners gone for
more than a day are counted, not listed, unless ``--all`` (the newest is always listed)."""

from __future__ import annotations

from core.ledger.connection import Ledger
from tests.kit.cli import wk
from tests.kit.sweep import add_runner, dead_pid


def test_status_lists_recent_runners_once_and_long_dead_ones_only_with_all(tmp_path):
    db = tmp_path / "wk.db"
    pid, created = dead_pid()
    with Ledger(db) as led:
        for i, age in enumerate((60.0, 3 * 3600.0, 3 * 86400.0, 9 * 86400.0)):
            add_runner(led, pid=pid, create_time=created, heartbeat_age=age, stopped=True, runner_id=f"run-{i}")
    res = wk("status", "--ledger", str(db), cwd=tmp_path)
    assert res.returncode == 2  # no runner alive: a gap
    lines = res.stdout.splitlines()
    listed = [ln.split()[0] for ln in lines if ln.startswith("  run-")]
    assert listed == ["run-0", "run-1"]
    assert "  … 2 runner(s) gone for more than 1d not shown (--all)" in lines
    assert all("last heartbeat" in ln for ln in lines if ln.startswith("  run-"))
    every = wk("status", "--all", "--ledger", str(db), cwd=tmp_path).stdout.splitlines()
    assert [ln.split()[0] for ln in every if ln.startswith("  run-")] == ["run-0", "run-1", "run-2", "run-3"]
    assert not any("not shown" in ln for ln in every)


def test_the_newest_runner_is_listed_however_long_ago_it_died(tmp_path):
    db = tmp_path / "wk.db"
    pid, created = dead_pid()
    with Ledger(db) as led:
        add_runner(led, pid=pid, create_time=created, heartbeat_age=30 * 86400.0, stopped=True, runner_id="old")
    lines = wk("status", "--ledger", str(db), cwd=tmp_path).stdout.splitlines()
    assert [ln.split()[0] for ln in lines if ln.startswith("  ")] == ["old"]
