"""The reads a busy runner makes for every run use an index on a ledger with history.

Each was once a whole-table scan on PostgreSQL that a small test ledger hid: the dispatcher's
due runs (a self-join for the fan-out parent's state: 35 ms a tick on 200,000 runs) and the
judging case's history keys (``EXISTS`` planned as a hashed subplan over every retry run: 23
ms a judgement; and, on a new ledger before autovacuum's first statistics, a join that scanned
``runs`` once per outcome). The tests fill a ledger with 20,000 finished runs and 1,000 queued
and let PostgreSQL gather its statistics as autovacuum would, or with 600 runs and none (SQLite's
ledger is never analysed, so it plans without), then ask each backend for the plan of every
statement those reads send, through the same connection and the same dialect translation.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from core.ledger import outcomes, queue
from core.ledger.connection import Ledger

HISTORY = 20_000

_FILL = (
    "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)"
    " INSERT INTO runs (job, lineage, attempt, state, slot, task, trigger, not_before, created_at,"
    " updated_at, started_at, ended_at)"
    " SELECT CASE WHEN n % 2 = 0 THEN 'noop' ELSE 'other' END, 'l' || n, 1, 'succeeded', 'manual:' || n, '',"
    " 'manual', n, n, n, n, n + 1 FROM g")
_OUTCOMES = (
    "INSERT INTO job_outcomes (run_id, job, lineage, attempt, state, status, created_at, updated_at, judged_by,"
    " duration_s) SELECT id, job, lineage, attempt, 'succeeded', 'success', created_at, updated_at, 'rules', 1.0"
    " FROM runs")
_QUEUED = (
    "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)"
    " INSERT INTO runs (job, lineage, attempt, state, slot, task, trigger, not_before, created_at, updated_at)"
    " SELECT 'noop', 'q' || n, 1, CASE WHEN n <= 4 THEN 'running' ELSE 'queued' END, 'manual:q' || n, '',"
    " 'manual', 1, 1, 1 FROM g")


class _Recording:
    """A ledger connection that keeps every statement (and its parameters) sent through it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.sent: list[tuple[str, tuple[Any, ...]]] = []

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.sent.append((sql, tuple(params or ())))
        return self.conn.execute(sql, params)


def _plan(led: Ledger, sql: str, params: tuple[Any, ...]) -> str:
    if led.backend == "postgresql":
        rows = led.conn.execute("EXPLAIN " + sql, params).fetchall()
        return "\n".join(str(r[0]) for r in rows)
    rows = led.conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
    return "\n".join(str(r[3]) for r in rows)


def _full_scans_of_runs(led: Ledger, plan: str) -> list[str]:
    """The plan lines that read every row of ``runs`` or ``job_outcomes``."""
    if led.backend == "postgresql":
        return [ln for ln in plan.splitlines() if re.search(r"Seq Scan on (runs|job_outcomes)\b", ln)]
    # SQLite: "SCAN r" is a walk over the whole table (or a whole index, "USING … INDEX");
    # "SEARCH r USING INDEX …" is a lookup. The tables are named by their aliases.
    return [ln for ln in plan.splitlines()
            if re.match(r"\s*SCAN (runs|job_outcomes|r|r2|p|o)\b", ln)]


def _fill(ledger: Ledger, history: int, queued: int, *, analyse: bool) -> Ledger:
    ledger.write(lambda c: c.execute("INSERT INTO jobs (name, spec, spec_hash, updated_at) VALUES"
                                     " ('noop', '{}', 'h', 0), ('other', '{}', 'h', 0)"))
    ledger.write(lambda c: c.execute(_FILL, (history,)))
    ledger.write(lambda c: c.execute(_OUTCOMES))
    ledger.write(lambda c: c.execute(_QUEUED, (queued,)))
    if analyse and ledger.backend == "postgresql":
        ledger.conn.execute("ANALYZE")
    return ledger


@pytest.fixture
def filled(ledger: Ledger) -> Ledger:
    return _fill(ledger, HISTORY, 1_000, analyse=True)


READS = {
    "due runs (every dispatcher wake)": lambda c: queue.due_queued(c, time.time(), 64),
    "earliest queued run (the dispatcher's sleep)": lambda c: queue.next_queued_at(c),
    "live runs of a job (its concurrency)": lambda c: queue.live_runs_of_job(c, "noop"),
    "history keys (every judgement)": lambda c: outcomes.job_history_keys(c, "noop", 10 ** 9, 60),
    "history (a judgement of a job not cached)": lambda c: outcomes.job_history(c, "noop", 10 ** 9, 60),
}


def _scans(led: Ledger) -> list[str]:
    scans = []
    for read, call in READS.items():
        rec = _Recording(led.conn)
        call(rec)
        assert rec.sent, f"{read}: sent no statement"
        for sql, params in rec.sent:
            plan = _plan(led, sql, params)
            if _full_scans_of_runs(led, plan):
                scans.append(f"{read}: {sql}\n{plan}")
    return scans


def test_the_hot_reads_do_not_scan_the_runs_of_the_whole_ledger(filled: Ledger) -> None:
    scans = _scans(filled)
    assert not scans, "\n\n".join(scans)


def test_nor_on_a_new_ledger_before_its_first_statistics(ledger: Ledger) -> None:
    """A fleet's first minute (and every benchmark round): a few hundred runs, and PostgreSQL
    has not analysed the tables yet, so it guesses that a filter keeps one row in 200. The
    history reads once joined ``runs`` there with a scan of the table per outcome."""
    led = _fill(ledger, 600, 40, analyse=False)
    scans = _scans(led)
    assert not scans, "\n\n".join(scans)
