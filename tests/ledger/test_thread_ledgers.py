"""A stopping runner's per-thread ledgers (``core.ledger.thread_ledgers``): closing them never
pulls a connection from under a thread still reading on it — CPython's sqlite3 takes the whole
process down when that happens (a CI worker died of it, with every test it still had)."""

from __future__ import annotations

import contextlib
import gc
import sqlite3
import subprocess
import sys
import threading
import weakref
from pathlib import Path

import pytest

from core.ledger.thread_ledgers import ThreadLedgers
from core.ledger.writer import Writer

# A read that keeps SQLite stepping for a while without any table: most of the reader's time
# is spent inside a statement, where a close from another thread crashes the process.
LONG_READ = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000) SELECT x FROM c"

# Run in a child process: were the close unsafe, the child would die of SIGSEGV, which this
# test reports as such instead of losing its xdist worker. 60 rounds: closing every ledger
# regardless crashed within the first 20 here, every time.
STOP_WHILE_READING = f"""
import sys, threading
from core.ledger.thread_ledgers import ThreadLedgers
from core.ledger.writer import Writer

writer = Writer(sys.argv[1])
for _ in range(60):
    ledgers = ThreadLedgers(writer)
    reading, stop = threading.Event(), threading.Event()

    def read():
        led = ledgers.get()
        while not stop.is_set():
            led.query({LONG_READ!r})
            reading.set()

    t = threading.Thread(target=read)
    t.start()
    reading.wait()
    ledgers.get()   # the stopping thread's own, which it does close
    ledgers.close()  # while the other thread is inside its next read
    stop.set()
    t.join()
writer.close()
print("stopped 60 times")
"""


def test_closing_while_a_thread_reads_never_crashes_the_process(tmp_path: Path):
    done = subprocess.run([sys.executable, "-c", STOP_WHILE_READING, str(tmp_path / "wk.db")],
                          capture_output=True, text=True, timeout=100, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert "stopped 60 times" in done.stdout


@pytest.fixture
def writer(tmp_path: Path):
    w = Writer(tmp_path / "wk.db")
    yield w
    w.close()


def _closed(led) -> bool:
    try:
        led.query("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


def test_the_callers_ledger_and_those_of_ended_threads_are_closed(writer):
    ledgers = ThreadLedgers(writer)
    mine = ledgers.get()
    assert ledgers.get() is mine  # one per thread
    theirs = []
    t = threading.Thread(target=lambda: theirs.append(ledgers.get()))
    t.start()
    t.join()
    assert theirs[0] is not mine
    ledgers.close()
    assert _closed(mine) and _closed(theirs[0])
    assert ledgers.open() == []


@contextlib.contextmanager
def holding_thread(ledgers: ThreadLedgers, after=None):
    """A thread that takes its ledger and holds it until the ``with`` block ends, then runs
    ``after(its ledger)``; yields that ledger."""
    got, release = [], threading.Event()

    def hold():
        got.append(ledgers.get())
        held.set()
        release.wait(30)
        if after is not None:
            after(got[0])

    held = threading.Event()
    t = threading.Thread(target=hold)
    t.start()
    assert held.wait(30)
    try:
        yield got[0]
    finally:
        release.set()
        t.join()


def test_a_busy_threads_ledger_stays_open_and_closes_when_its_thread_ends(writer):
    ledgers = ThreadLedgers(writer)
    after: list[int] = []
    with holding_thread(ledgers, after=lambda led: after.append(led.query("SELECT 7")[0][0])) as led:
        gone = weakref.ref(led)
        del led
        ledgers.close()  # while that thread holds its ledger: it stays usable
    assert after == [7]
    gc.collect()
    assert gone() is None  # dropped with its thread: sqlite3 closes a freed connection


def test_give_up_reaches_every_open_ledger(writer):
    ledgers = ThreadLedgers(writer)
    mine = ledgers.get()
    with holding_thread(ledgers) as theirs:
        ledgers.give_up()
    assert mine.given_up and theirs.given_up
    ledgers.close()
