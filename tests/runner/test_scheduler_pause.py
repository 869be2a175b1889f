"""The scheduler and a paused job (fake clock, no processes): each slot that falls due while
paused is skipped and recorded as ``slot_skipped_paused``; after resume the next slot runs
and the skipped ones are not replayed; a one-shot is held, not skipped, and runs once
resumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import actions
from core.ledger.connection import Ledger
from core.ledger.jobs import sync_jobs
from core.ledger.sql_store import SqlStore
from core.runner.scheduler import PAUSED_RECHECK_S, Scheduler
from core.spec.loader import load_dir

T0 = 1_800_000_000.0  # a fixed "now" (Unix seconds), a multiple of 10


@pytest.fixture
def led(tmp_path):
    with Ledger(tmp_path / "wk.db") as ledger:
        yield ledger


def _scheduler(led: Ledger, tmp: Path, text: str) -> tuple[Scheduler, list[int]]:
    folder = tmp / "jobs"
    folder.mkdir()
    (folder / "jobs.toml").write_text(text)
    result = load_dir(folder)
    assert not result.errors
    sync_jobs(led, result)
    queued: list[int] = []
    s = Scheduler(store=lambda: SqlStore(led), actor="runner:test", on_queued=queued.append)
    s.set_jobs(dict(result.jobs))
    return s, queued


def skipped(led: Ledger) -> list[str]:
    return [json.loads(r["detail"])["slot"] for r in led.query(
        "SELECT detail FROM events WHERE kind = 'slot_skipped_paused' ORDER BY id")]


def test_slots_due_while_paused_are_skipped_and_recorded_then_the_next_one_runs(led, tmp_path):
    s, queued = _scheduler(led, tmp_path, 'name = "tick"\ncommand = "true"\nevery = "10s"\n')
    s.tick(T0 + 5)
    assert actions.pause_job(led, "tick", "ana", now=T0 + 6).ok
    s.tick(T0 + 10.01)
    s.tick(T0 + 20.01)
    assert queued == [] and len(skipped(led)) == 2
    assert all("paused by ana" in r["reason"] for r in led.query(
        "SELECT reason FROM events WHERE kind = 'slot_skipped_paused'"))
    assert actions.resume_job(led, "tick", "bob", now=T0 + 25).ok
    s.tick(T0 + 30.01)
    assert len(queued) == 1 and len(skipped(led)) == 2  # the skipped slots are not replayed
    assert led.one("SELECT not_before FROM runs WHERE id = ?", (queued[0],))[0] == T0 + 30


def test_a_one_shot_is_held_while_paused_and_runs_once_resumed(led, tmp_path):
    s, queued = _scheduler(led, tmp_path, 'name = "once"\ncommand = "true"\nonce = true\n')
    actions.pause_job(led, "once", "ana")
    wake = s.tick(T0)
    assert queued == [] and skipped(led) == [] and wake == T0 + PAUSED_RECHECK_S
    s.tick(T0 + PAUSED_RECHECK_S)
    assert queued == []
    actions.resume_job(led, "once", "ana")
    s.tick(T0 + 2 * PAUSED_RECHECK_S)
    assert len(queued) == 1
