"""After downtime: never a burst, and skipped slots are recorded; a slow runner drops none."""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from core.ledger.connection import Ledger
from tests.kit.harness import RunnerThread, fast_settings, query, terminal_runs, wait_for, write_specs

PY = sys.executable


def _slots(db, job):
    return [r["not_before"] for r in query(db, "SELECT not_before FROM runs WHERE job = ? AND attempt = 1"
                                               " ORDER BY not_before", (job,))]


def _downtime(tmp_path, misfire: str):
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "tick"\ncommand = ["{PY}", "-c", "pass"]\nevery = "1s"\nmisfire = "{misfire}"\n')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: terminal_runs(s.ledger, "tick"), timeout=15)
    before = len(_slots(s.ledger, "tick"))
    time.sleep(4.5)  # no runner: about four slots fall due
    with RunnerThread(specs, s):
        wait_for(lambda: len(_slots(s.ledger, "tick")) >= before + 2, timeout=15)
    return s.ledger


@pytest.mark.slow
def test_misfire_skip_records_and_never_bursts(tmp_path):
    db = _downtime(tmp_path, "skip")
    ev = query(db, "SELECT * FROM events WHERE kind = 'misfire_skipped'")
    assert len(ev) == 1 and "missed while no runner ran" in ev[0]["reason"]
    assert query(db, "SELECT COUNT(*) n FROM runs WHERE trigger = 'misfire'")[0]["n"] == 0


@pytest.mark.slow
def test_misfire_run_once_never_bursts(tmp_path):
    # run_once queues the newest missed slot — unless a slot is due right at restart anyway,
    # which then is the one run covering the downtime. Either way, never a burst.
    db = _downtime(tmp_path, "run_once")
    assert query(db, "SELECT COUNT(*) n FROM runs WHERE trigger = 'misfire'")[0]["n"] <= 1
    ev = query(db, "SELECT detail FROM events WHERE kind = 'misfire_skipped'")
    assert len(ev) == 1 and json.loads(ev[0]["detail"])["missed"] >= 2


@pytest.mark.slow
def test_slow_runner_drops_no_slot(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "tick"\ncommand = ["{PY}", "-c", "pass"]\nevery = "1s"\n')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: terminal_runs(s.ledger, "tick"), timeout=15)
        holder = Ledger(s.ledger)

        window: list[float] = []

        def hold() -> None:
            # Take the lock just before a slot boundary, so the scheduler's insert of that
            # slot is the write that waits.
            time.sleep((0.7 - time.time() % 1.0) % 1.0)
            holder.conn.execute("BEGIN IMMEDIATE")
            window.append(time.time())
            time.sleep(3.5)
            window.append(time.time())
            holder.conn.execute("COMMIT")
        t = threading.Thread(target=hold)
        t.start()
        t.join()
        holder.close()
        n = len(_slots(s.ledger, "tick"))
        wait_for(lambda: len(_slots(s.ledger, "tick")) >= n + 2, timeout=15)
    # every 1-second slot is accounted for: run once, or recorded as skipped (late/overlap) — none silently
    # lost, and no burst: a stall queues only its newest slot
    from core.spec.schedule import slot_key
    slots = _slots(s.ledger, "tick")
    ran = {slot_key(x) for x in slots}
    skipped = {json.loads(e["detail"])["slot"] for e in query(
        s.ledger, "SELECT detail FROM events WHERE kind = 'skipped_overlap'")}
    for e in query(s.ledger, "SELECT detail FROM events WHERE kind = 'skipped_late'"):
        skipped |= set(json.loads(e["detail"])["slots"])
    expected = {slot_key(slots[0] + i) for i in range(int(round(slots[-1] - slots[0])) + 1)}
    assert expected <= ran | skipped, sorted(expected - ran - skipped)
    assert not ran & skipped
    # the stall's slots (those that fell due while the lock was held) ran at most once in all
    stalled = [x for x in slots if window[0] < x <= window[1]]
    assert len(stalled) <= 1, stalled
    assert query(s.ledger, "SELECT 1 FROM events WHERE kind = 'skipped_late'")  # the stall was coalesced
    assert not query(s.ledger, "SELECT 1 FROM events WHERE kind = 'misfire_skipped'")


def test_slots_a_runner_reported_missed_are_not_reported_again_by_the_next(ledger):
    """A runner that reports missed slots and stops before queuing a newer one: the next runner
    starts after the slots reported (``misfire_skipped``'s ``last``), not after the last slot
    queued, so each missed slot is reported once."""
    from core.ledger import queue
    from core.ledger.connection import add_event
    from core.spec.schedule import slot_key

    queued_at, missed_last = 1_796_000_000.0, 1_796_000_180.0
    ledger.write(lambda c: c.execute(
        "INSERT INTO runs (job, slot, lineage, attempt, state, trigger, not_before, created_at, updated_at)"
        " VALUES ('tick', ?, 'l1', 1, 'succeeded', 'schedule', ?, ?, ?)",
        (slot_key(queued_at), queued_at, queued_at, queued_at)))
    assert queue.last_scheduled_slots(ledger.conn) == {"tick": queued_at}
    ledger.write(lambda c: add_event(c, actor="runner:a", kind="misfire_skipped", job="tick",
                                     reason="3 slot(s) missed while no runner ran (misfire=skip)",
                                     detail={"missed": 3, "first": slot_key(queued_at + 60),
                                             "last": slot_key(missed_last), "policy": "skip"}))
    assert queue.last_scheduled_slots(ledger.conn) == {"tick": missed_last}
    # A newer queued slot wins again.
    ledger.write(lambda c: c.execute(
        "INSERT INTO runs (job, slot, lineage, attempt, state, trigger, not_before, created_at, updated_at)"
        " VALUES ('tick', ?, 'l2', 1, 'queued', 'schedule', ?, ?, ?)",
        (slot_key(missed_last + 60), missed_last + 60, missed_last, missed_last)))
    assert queue.last_scheduled_slots(ledger.conn) == {"tick": missed_last + 60}
