"""A supervisor step (settle, judge, note a late result) that fails only because the ledger is
out of reach is tried again until the ledger answers, never replaced by settling on the exit
code (which recorded an unverified run as a success after a PostgreSQL restart)."""

from __future__ import annotations

import sqlite3

import pytest

from core.ledger.dialect import Disconnected
from core.runner import executor


def test_a_lost_ledger_is_waited_for_and_one_line_says_so(monkeypatch, caplog):
    naps: list[float] = []
    monkeypatch.setattr(executor.time, "sleep", naps.append)
    tries = iter([Disconnected("connection to PostgreSQL lost (AdminShutdown)"),
                  sqlite3.OperationalError("database is locked"), Disconnected("still down"), "settled"])

    def step() -> str:
        got = next(tries)
        if isinstance(got, Exception):
            raise got
        return got

    with caplog.at_level("WARNING", logger="core.runner.executor"):
        assert executor._until_ledger_answers(step, "settling run 7") == "settled"
    assert naps == [0.2, 0.4, 0.8]  # backing off, never giving up while the ledger is the cause
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("settling run 7: the ledger is out of reach")


def test_any_other_error_is_raised_at_once(monkeypatch):
    monkeypatch.setattr(executor.time, "sleep", lambda s: pytest.fail("slept on a real error"))

    def broken() -> None:
        raise KeyError("a bug in the supervisor")

    with pytest.raises(KeyError):
        executor._until_ledger_answers(broken, "settling run 8")
