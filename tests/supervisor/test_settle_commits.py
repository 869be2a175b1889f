"""settle() commits a routine success's terminal move and its verdict in one transaction,
and a verdict that cannot be written there never holds back the terminal move."""

from __future__ import annotations

import pytest

from core.ledger import outcomes, sql_store
from core.ledger.writer import Writer, WriterLedger
from core.supervisor import supervisor
from tests.kit.supervisor import add_job, new_run, to_verifying


@pytest.fixture
def wled(tmp_path):
    writer = Writer(tmp_path / "wk.db")
    led = WriterLedger(writer)
    try:
        yield led
    finally:
        led.close()
        writer.close()


def events_of(led, rid):
    return [r["kind"] for r in led.query("SELECT kind FROM events WHERE run_id = ? ORDER BY id", (rid,))]


def test_routine_success_is_moved_and_judged_in_one_commit(wled, tmp_path):
    add_job(wled, tmp_path)
    rid = new_run(wled)
    to_verifying(wled, rid, exit_code=0)
    before = wled.writer.transactions
    assert supervisor.settle(wled, rid, settings=None) == "succeeded"
    assert wled.writer.transactions == before + 1
    out = outcomes.get(wled.conn, rid)
    assert out["state"] == "succeeded" and out["judged_by"] == "rules"
    kinds = events_of(wled, rid)
    assert kinds.count("verdict") == 1 and kinds[-2:] == ["transition", "verdict"]


def test_failure_with_retry_is_judged_with_the_retry_queued(wled, tmp_path):
    add_job(wled, tmp_path, max_attempts=2)
    rid = new_run(wled)
    to_verifying(wled, rid, exit_code=3)
    assert supervisor.settle(wled, rid, settings=None) == "failed"
    out = outcomes.get(wled.conn, rid)
    # The judge read the retry queued by the same transaction: not the final attempt.
    assert out["judged_by"] == "rules" and out["verdict_kind"] == "retry_pending"
    assert wled.one("SELECT COUNT(*) FROM runs WHERE attempt = 2")[0] == 1


def test_verdict_that_raises_is_undone_alone_and_written_after_the_commit(wled, tmp_path, monkeypatch):
    add_job(wled, tmp_path)
    rid = new_run(wled)
    to_verifying(wled, rid, exit_code=0)
    real, calls = sql_store._write_verdict, []

    def flaky(conn, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            real(conn, *args, **kwargs)  # written, then undone by the savepoint
            raise RuntimeError("boom")
        return real(conn, *args, **kwargs)
    monkeypatch.setattr(sql_store, "_write_verdict", flaky)
    assert supervisor.settle(wled, rid, settings=None) == "succeeded"
    assert len(calls) == 2
    assert outcomes.get(wled.conn, rid)["judged_by"] == "rules"
    assert events_of(wled, rid).count("verdict") == 1
