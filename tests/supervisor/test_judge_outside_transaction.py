"""The judge never holds the ledger: settle() works the verdict out (history read, rules)
with no write transaction open, then writes the terminal move and the verdict in one
transaction; a move that loses its compare-and-set discards the verdict."""

from __future__ import annotations

import sqlite3

import pytest

from core.ledger import outcomes
from core.ledger.sql_store import SqlStore
from core.ledger.writer import Writer, WriterLedger
from core.supervisor import supervisor
from core.supervisor.policy.retry import RETRY
from core.vocabulary import EndReason
from tests.kit.supervisor import add_job, new_run, to_verifying


@pytest.fixture
def db(tmp_path):
    return tmp_path / "wk.db"


@pytest.fixture
def wled(db):
    writer = Writer(db)
    led = WriterLedger(writer)
    try:
        yield led
    finally:
        led.close()
        writer.close()


def _write_lock_free(db) -> bool:
    """Whether another connection can take the ledger's write lock right now (no wait)."""
    other = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


def test_rules_run_while_another_connection_can_write(wled, db, tmp_path, monkeypatch):
    add_job(wled, tmp_path)
    rid = new_run(wled)
    to_verifying(wled, rid, exit_code=0)
    seen: list[bool] = []
    real = supervisor.evaluate

    def judging(*args, **kwargs):
        seen.append(_write_lock_free(db))
        return real(*args, **kwargs)
    monkeypatch.setattr(supervisor, "evaluate", judging)
    before = wled.writer.transactions
    assert supervisor.settle(wled, rid, settings=None) == "succeeded"
    assert seen == [True]
    # Still one commit: the move, its audit event and the verdict together.
    assert wled.writer.transactions == before + 1
    out = outcomes.get(wled.conn, rid)
    assert out["judged_by"] == "rules" and out["verdict_kind"] is not None


def test_failure_is_judged_for_the_retry_the_move_queues(wled, tmp_path):
    add_job(wled, tmp_path, max_attempts=2)
    rid = new_run(wled)
    to_verifying(wled, rid, exit_code=3)
    assert supervisor.settle(wled, rid, settings=None) == "failed"
    assert outcomes.get(wled.conn, rid)["verdict_kind"] == "retry_pending"

    add_job(wled, tmp_path, name="once", max_attempts=1)
    rid = new_run(wled, job="once")
    to_verifying(wled, rid, exit_code=3)
    assert supervisor.settle(wled, rid, settings=None) == "failed"
    assert outcomes.get(wled.conn, rid)["verdict_kind"] not in (None, "retry_pending")


def test_move_that_loses_discards_the_verdict(wled, tmp_path, monkeypatch):
    add_job(wled, tmp_path)
    rid = new_run(wled)
    to_verifying(wled, rid, exit_code=0)
    real = supervisor.evaluate

    def judging(*args, **kwargs):
        # An operator abandons the run while the judge works: the settle's move must lose.
        SqlStore(wled, retry=RETRY).finish_run(rid, 1, "verifying", "abandoned", actor="operator",
                                               reason_code=EndReason.OPERATOR, reason="abandoned")
        monkeypatch.setattr(supervisor, "evaluate", real)
        return real(*args, **kwargs)
    monkeypatch.setattr(supervisor, "evaluate", judging)
    assert supervisor.settle(wled, rid, settings=None) == "abandoned"
    out = outcomes.get(wled.conn, rid)
    assert out["state"] == "abandoned" and out["judged_by"] is None
    kinds = [r["kind"] for r in wled.query("SELECT kind FROM events WHERE run_id = ? ORDER BY id", (rid,))]
    assert "verdict" not in kinds and kinds.count("transition") >= 1
