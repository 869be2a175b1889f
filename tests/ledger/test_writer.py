"""The runner's writer thread commits in groups: several callers' writes share one
transaction, each caller still learns whether its compare-and-set won, a write that raises
is rolled back alone, and 'locked' is retried, never dropped."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from core.ledger import lifecycle, runs
from core.ledger.connection import Ledger
from core.ledger.writer import Writer, WriterClosed, WriterLedger
from core.vocabulary import RunState


@pytest.fixture
def writer(tmp_path):
    w = Writer(tmp_path / "wk.db")
    yield w
    w.close()


def _queue_run(w: Writer, slot: str = "s") -> int:
    return w.write(lambda conn: runs.create(conn, job="j", slot=slot, trigger="manual", actor="test",
                                            not_before=0.0, spec_hash=None))


def _hold(w: Writer) -> threading.Event:
    """Occupy the writer thread until the returned event is set, so later writes pile up."""
    entered, release = threading.Event(), threading.Event()

    def block(conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait(10)
    w.submit(block)
    assert entered.wait(10)
    return release


def test_writes_queued_while_one_commits_share_the_next_transaction(writer):
    run_id = _queue_run(writer)
    before = writer.transactions
    release = _hold(writer)
    # Two claims of the same run in one group: exactly one wins, and both callers know.
    claims = [writer.submit(lambda conn, i=i: lifecycle.apply(conn, run_id, 1, RunState.QUEUED, RunState.SPAWNED,
                                                              actor=f"runner:{i}")) for i in range(2)]
    others = [writer.submit(lambda conn, i=i: runs.create(conn, job="j", slot=f"x{i}", trigger="manual",
                                                          actor="test", not_before=0.0, spec_hash=None))
              for i in range(10)]
    release.set()
    assert sorted(f.result(10) for f in claims) == [False, True]
    assert len({f.result(10) for f in others}) == 10
    assert writer.transactions - before == 2  # the held one, then all twelve together
    with Ledger(writer.ledger.path) as led:
        assert led.one("SELECT state FROM runs WHERE id = ?", (run_id,))[0] == "spawned"
        assert led.one("SELECT COUNT(*) FROM events WHERE kind = 'transition'")[0] == 1


def test_a_write_that_raises_is_rolled_back_alone(writer):
    release = _hold(writer)
    good = writer.submit(lambda conn: runs.create(conn, job="j", slot="good", trigger="manual", actor="t",
                                                  not_before=0.0, spec_hash=None))

    def half_then_fail(conn: sqlite3.Connection) -> None:
        runs.create(conn, job="j", slot="bad", trigger="manual", actor="t", not_before=0.0, spec_hash=None)
        raise ValueError("boom")
    bad = writer.submit(half_then_fail)
    release.set()
    assert good.result(10) > 0
    with pytest.raises(ValueError, match="boom"):
        bad.result(10)
    with Ledger(writer.ledger.path) as led:
        assert [r[0] for r in led.query("SELECT slot FROM runs ORDER BY id")] == ["good"]


def test_locked_by_another_process_is_waited_out_not_dropped(writer, tmp_path):
    other = sqlite3.connect(tmp_path / "wk.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    fut = writer.submit(lambda conn: runs.create(conn, job="j", slot="late", trigger="manual", actor="t",
                                                 not_before=0.0, spec_hash=None))
    with pytest.raises(TimeoutError):
        fut.result(0.3)  # still waiting for the lock
    other.execute("COMMIT")
    other.close()
    assert fut.result(30) > 0


def test_a_write_withdrawn_before_it_started_is_not_written(writer):
    release = _hold(writer)
    led = WriterLedger(writer)
    try:
        with pytest.raises(sqlite3.OperationalError, match="not started"):
            led.write(lambda conn: runs.create(conn, job="j", slot="never", trigger="manual", actor="t",
                                               not_before=0.0, spec_hash=None), max_wait_s=0.1)
        release.set()
        assert _queue_run(writer, "after") > 0
        assert led.query("SELECT slot FROM runs") and led.one("SELECT COUNT(*) FROM runs WHERE slot = 'never'")[0] == 0
    finally:
        release.set()
        led.close()


def test_awaited_from_the_event_loop_and_closed_cleanly(tmp_path):
    w = Writer(tmp_path / "wk.db")

    async def main() -> list[int]:
        return await asyncio.gather(*(w.run(lambda conn, i=i: runs.create(
            conn, job="j", slot=f"a{i}", trigger="manual", actor="t", not_before=0.0, spec_hash=None))
            for i in range(50)))
    ids = asyncio.run(main())
    assert len(set(ids)) == 50
    assert w.writes >= 50 and w.transactions <= 50
    w.close()
    assert not w._thread.is_alive()
    with pytest.raises(WriterClosed):
        w.submit(lambda conn: None)


def test_a_write_submitted_while_the_writer_closes_is_answered_never_left_waiting(tmp_path):
    """A stopping runner's last threads submit while it closes its writer: each such write is
    committed or refused (``WriterClosed``), never queued behind the end mark where no thread
    takes it up (its caller then waited for ever, and so did the runner's exit)."""
    w = Writer(tmp_path / "wk.db")
    inner = w._q
    queueing, go_on = threading.Event(), threading.Event()

    class SlowQueue:
        """Pauses a submit between its look at the writer and its queueing of the write."""

        def put(self, item):
            if item is not None:
                queueing.set()
                assert go_on.wait(10)
            inner.put(item)

        def get(self):
            return inner.get()

        def get_nowait(self):
            return inner.get_nowait()

    w._q = SlowQueue()
    got: list[object] = []
    submitter = threading.Thread(target=lambda: got.append(w.submit(lambda conn: "written")))
    submitter.start()
    assert queueing.wait(10)
    closer = threading.Thread(target=w.close)
    closer.start()
    closer.join(0.5)  # a close that does not wait for the submit would be done by now
    go_on.set()
    closer.join(10)
    submitter.join(10)
    assert not closer.is_alive() and not submitter.is_alive()
    assert got[0].result(timeout=5) == "written"
