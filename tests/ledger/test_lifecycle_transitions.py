"""The transition table is the only way a run moves; moves are compare-and-set."""

from __future__ import annotations

import threading
import time

import pytest

from core.ledger import lifecycle
from core.ledger.connection import Ledger
from core.ledger.lifecycle import TRANSITIONS, IllegalTransition, State
from core.vocabulary import EndReason
from tests.kit.runs import add_run


def _queued_run(led: Ledger, attempt: int = 1) -> int:
    now = time.time()

    return led.write(lambda conn: add_run(conn, "j", "queued", lineage="L", attempt=attempt, slot="s", at=now))


#: The lifecycle of docs/concepts.md (and core.ledger.lifecycle's docstring), written out by hand: the table under test must equal it, and
#: the illegal cases below come from this literal, never from the table itself (a wrongly
#: allowed move would otherwise be skipped by its own test).
EXPECTED_MOVES = {
    ("queued", "spawned"), ("queued", "abandoned"),
    ("spawned", "running"), ("spawned", "failed"), ("spawned", "orphaned"), ("spawned", "abandoned"),
    ("running", "verifying"), ("running", "timed_out"), ("running", "orphaned"), ("running", "abandoned"),
    ("verifying", "succeeded"), ("verifying", "failed"), ("verifying", "blocked"), ("verifying", "orphaned"),
    ("verifying", "abandoned"),
}
EXPECTED_STATES = {"queued", "spawned", "running", "verifying", "succeeded", "failed", "blocked", "timed_out",
                   "orphaned", "abandoned"}

ALL = list(State)
ILLEGAL = [(State(a), State(b)) for a in sorted(EXPECTED_STATES) for b in sorted(EXPECTED_STATES)
           if (a, b) not in EXPECTED_MOVES]


def test_transition_table_is_exactly_the_designed_lifecycle():
    assert {s.value for s in State} == EXPECTED_STATES
    assert {(a.value, b.value) for a, nxt in TRANSITIONS.items() for b in nxt} == EXPECTED_MOVES
    assert {s.value for s in lifecycle.TERMINAL} == {"succeeded", "failed", "blocked", "timed_out", "orphaned",
                                                     "abandoned"}
    assert {s.value for s in lifecycle.LIVE} == {"spawned", "running", "verifying"}
    assert {s.value for s in lifecycle.FAILED_STATES} == {"failed", "timed_out", "orphaned"}


@pytest.mark.parametrize(("src", "dst"), ILLEGAL, ids=[f"{a}->{b}" for a, b in ILLEGAL])
def test_every_illegal_move_is_refused(tmp_path, src, dst):
    with Ledger(tmp_path / "wk.db") as led:
        run_id = _queued_run(led)
        led.write(lambda c: c.execute("UPDATE runs SET state = ? WHERE id = ?", (src.value, run_id)))
        with pytest.raises(IllegalTransition, match="illegal transition"):
            lifecycle.transition(led, run_id, 1, src, dst, actor="test")
        assert led.one("SELECT state FROM runs WHERE id = ?", (run_id,))[0] == src.value
        assert led.one("SELECT COUNT(*) FROM events WHERE kind = 'transition'")[0] == 0  # only run_queued


def test_terminal_states_have_no_exit():
    for s in lifecycle.TERMINAL:
        assert TRANSITIONS[s] == frozenset()


def test_move_appends_audit_event_in_same_transaction(tmp_path):
    with Ledger(tmp_path / "wk.db") as led:
        run_id = _queued_run(led)
        assert lifecycle.transition(led, run_id, 1, State.QUEUED, State.SPAWNED, actor="runner:x",
                                    fields={"runner_id": None})
        ev = led.one("SELECT * FROM events WHERE run_id = ? AND kind = 'transition'", (run_id,))
        assert (ev["from_state"], ev["to_state"], ev["actor"], ev["kind"]) == ("queued", "spawned", "runner:x",
                                                                               "transition")


def test_wrong_attempt_or_state_loses(tmp_path):
    with Ledger(tmp_path / "wk.db") as led:
        run_id = _queued_run(led, attempt=2)
        assert not lifecycle.transition(led, run_id, 1, State.QUEUED, State.SPAWNED, actor="t")
        assert not lifecycle.transition(led, run_id, 2, State.SPAWNED, State.RUNNING, actor="t")
        assert led.one("SELECT state FROM runs WHERE id = ?", (run_id,))[0] == "queued"


def test_then_callback_rolls_back_with_the_move(tmp_path):
    with Ledger(tmp_path / "wk.db") as led:
        run_id = _queued_run(led)

        def boom(conn):
            raise RuntimeError("follow-up failed")
        with pytest.raises(RuntimeError):
            lifecycle.transition(led, run_id, 1, State.QUEUED, State.ABANDONED, reason_code=EndReason.OPERATOR, actor="t", then=boom)
        assert led.one("SELECT state FROM runs WHERE id = ?", (run_id,))[0] == "queued"
        assert led.one("SELECT COUNT(*) FROM events WHERE kind = 'transition'")[0] == 0  # only run_queued


def test_unknown_column_refused(tmp_path):
    with Ledger(tmp_path / "wk.db") as led:
        run_id = _queued_run(led)
        with pytest.raises(ValueError, match="may not set"):
            lifecycle.transition(led, run_id, 1, State.QUEUED, State.SPAWNED, actor="t", fields={"state": "x"})


def test_two_writers_racing_exactly_one_wins(tmp_path):
    db = tmp_path / "wk.db"
    with Ledger(db) as led:
        # many runs, many racers: each run must be claimed exactly once
        ids = [led.write(lambda c, i=i: add_run(c, "j", "queued", lineage=f"L{i}", slot=f"s{i}")) for i in range(40)]
    wins: list[tuple[int, int]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def racer(n: int) -> None:
        with Ledger(db) as mine:
            barrier.wait()
            for rid in ids:
                to = State.SPAWNED if n % 2 else State.ABANDONED
                code = EndReason.OPERATOR if to == State.ABANDONED else None
                if lifecycle.transition(mine, rid, 1, State.QUEUED, to, actor=f"r{n}", reason_code=code):
                    with lock:
                        wins.append((rid, n))
    threads = [threading.Thread(target=racer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r for r, _ in wins) == sorted(ids)
    with Ledger(db) as led:
        per_run = led.query("SELECT run_id, COUNT(*) n FROM events WHERE kind = 'transition' GROUP BY run_id")
        assert all(r["n"] == 1 for r in per_run)
        assert len(per_run) == len(ids)


def test_ledger_file_is_private_and_versioned(tmp_path):
    import os
    import stat
    with Ledger(tmp_path / "wk.db") as led:
        assert led.schema_version >= 1
        assert led.one("PRAGMA journal_mode")[0] == "wal"
        assert led.one("PRAGMA foreign_keys")[0] == 1
    assert stat.S_IMODE(os.stat(tmp_path / "wk.db").st_mode) == 0o600


def test_locked_write_is_retried_not_dropped(tmp_path):
    db = tmp_path / "wk.db"
    with Ledger(db) as led:
        run_id = _queued_run(led)
    holder = Ledger(db)
    holder.conn.execute("BEGIN IMMEDIATE")
    result: list[bool] = []

    def writer() -> None:
        with Ledger(db, busy_timeout_ms=50) as mine:
            result.append(lifecycle.transition(mine, run_id, 1, State.QUEUED, State.SPAWNED, actor="w"))
    t = threading.Thread(target=writer)
    t.start()
    time.sleep(0.6)  # the writer meets 'database is locked' several times meanwhile
    assert result == []
    holder.conn.execute("COMMIT")
    t.join(10)
    holder.close()
    assert result == [True]


@pytest.mark.parametrize("returning", [True, False], ids=["update-returning", "update-then-select"])
def test_both_write_paths_record_the_move(tmp_path, monkeypatch, returning):
    monkeypatch.setattr(lifecycle, "HAS_RETURNING", returning)
    with Ledger(tmp_path / "wk.db") as led:
        run_id = _queued_run(led)
        assert not lifecycle.transition(led, run_id, 9, State.QUEUED, State.SPAWNED, actor="t")
        assert lifecycle.transition(led, run_id, 1, State.QUEUED, State.SPAWNED, actor="t")
        ev = led.query("SELECT job, to_state FROM events WHERE kind = 'transition'")
        assert [(e["job"], e["to_state"]) for e in ev] == [("j", "spawned")]
