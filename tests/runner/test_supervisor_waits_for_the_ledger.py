"""A supervisor step (settle, judge, note a late result) that fails only because the ledger is
out of reach is tried again until the ledger answers, never replaced by settling on the exit
code (which recorded an unverified run as a success after a PostgreSQL restart)."""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import pytest

from core.ledger.dialect import Disconnected
from core.runner import executor

#: A ledger that never gives up (a runner that is not stopping).
LEDGER = SimpleNamespace(given_up=False, name="wk.db")


def test_a_lost_ledger_is_waited_for_and_one_line_says_so(monkeypatch, caplog):
    naps: list[float] = []
    monkeypatch.setattr(executor.time, "sleep", naps.append)
    tries = iter([Disconnected("connection to PostgreSQL lost (AdminShutdown)"),
                  sqlite3.OperationalError("database is locked"), Disconnected("still down"), "settled"])

    def step(_led) -> str:
        got = next(tries)
        if isinstance(got, Exception):
            raise got
        return got

    with caplog.at_level("WARNING", logger="core.runner.executor"):
        assert executor.until_ledger_answers(LEDGER, step, "settling run 7") == "settled"
    assert naps == [0.2, 0.4, 0.8]  # backing off, never giving up while the ledger is the cause
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("settling run 7: the ledger is out of reach")


def test_any_other_error_is_raised_at_once(monkeypatch):
    monkeypatch.setattr(executor.time, "sleep", lambda s: pytest.fail("slept on a real error"))

    def broken(_led) -> None:
        raise KeyError("a bug in the supervisor")

    with pytest.raises(KeyError):
        executor.until_ledger_answers(LEDGER, broken, "settling run 8")


def test_a_stopping_runner_whose_ledger_gave_up_stops_waiting(monkeypatch):
    """A stop that could not reach the ledger gives its ledgers up (``Ledger.give_up``): a
    settle still waiting in a pool thread must end then, or the runner's exit waits on that
    thread for ever (CI: 'did not exit within 90 s'; its stack showed this loop)."""
    led = SimpleNamespace(given_up=False, name="postgresql://db/wk")
    naps: list[float] = []

    def nap(s: float) -> None:
        naps.append(s)
        if len(naps) == 3:
            led.given_up = True  # the stop gives up while the step keeps failing

    monkeypatch.setattr(executor.time, "sleep", nap)

    def down(_led) -> None:
        raise Disconnected("cannot connect to PostgreSQL")

    with pytest.raises(executor.LedgerGaveUp, match="settling run 9: the ledger postgresql://db/wk did not answer"):
        executor.until_ledger_answers(led, down, "settling run 9")
    assert len(naps) == 3
