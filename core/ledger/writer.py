"""One writer thread per runner: every ledger write of the runner, committed in groups.

Callers hand a function ``fn(conn)`` to ``Writer.submit`` (or ``write`` from a thread,
``await run(fn)`` from the event loop) and get its result when the transaction that holds it
has committed. While one transaction commits, new work queues up; the next transaction takes
all of it (up to ``max_batch``), so when the runner is busy several runs' transitions share
one ``BEGIN IMMEDIATE … COMMIT``. Each function runs inside its own ``SAVEPOINT``: one that
raises is rolled back alone and its caller gets the exception, and a compare-and-set that
loses still tells its caller so (``False``), whatever the others in the group did.

'database is locked' (another process holds the write lock) is retried for the whole group
with backoff, never dropped — exactly as ``Ledger.write``. Any other error at ``COMMIT``
(disk full, I/O error) fails every caller of that group with it: nothing was written.

Readers keep their own connections (``WriterLedger``): in WAL mode a reader never waits for
the writer.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import queue
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from core.ledger.connection import Ledger, is_locked_error, worth_saying
from core.ledger.dialect import Conflict, Disconnected

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Most functions committed in one transaction: bounds how long one COMMIT makes the
#: first of them wait, and how much one 'locked' retry repeats.
MAX_BATCH = 256


class WriterClosed(RuntimeError):
    """``submit`` after ``close``: the runner is shutting down."""


class Writer:
    """The writer thread and its connection (see the module docstring).

    Args:
        path: the ledger file (opened, created and migrated as ``Ledger`` does).
        max_batch: most functions per transaction.

    Attributes ``transactions`` and ``writes`` count committed transactions and the
    functions they held (their ratio is the average group size).
    """

    def __init__(self, path: str | os.PathLike[str], *, max_batch: int = MAX_BATCH) -> None:
        self.ledger = Ledger(path)
        self.max_batch = max_batch
        self.transactions = 0
        self.writes = 0
        self._q: queue.SimpleQueue[tuple[Callable[[sqlite3.Connection], Any], Future[Any]] | None] = \
            queue.SimpleQueue()
        self._closed = False
        # Held while a submit checks ``_closed`` and queues, and while close marks the end of
        # the queue: without it a submit could queue behind that mark, and its caller would
        # wait for ever on a write no thread takes up (a stopping runner's last threads).
        self._closing = threading.Lock()
        self._thread = threading.Thread(target=self._main, name="ledger-writer", daemon=True)
        self._thread.start()

    # -- callers -------------------------------------------------------------------------
    def submit(self, fn: Callable[[sqlite3.Connection], T]) -> Future[T]:
        """Queue ``fn(conn)``; the future resolves after its transaction committed.

        ``fn`` may run more than once (a group retried after 'locked'), so it must only
        touch the database. Raises ``WriterClosed`` after ``close``."""
        fut: Future[T] = Future()
        with self._closing:
            if self._closed:
                raise WriterClosed("the ledger writer is closed")
            self._q.put((fn, fut))
        return fut

    def write(self, fn: Callable[[sqlite3.Connection], T], *, max_wait_s: float | None = None) -> T:
        """``submit`` and wait (from any thread but the writer's own); same contract as
        ``Ledger.write``: with ``max_wait_s`` seconds, ``sqlite3.OperationalError`` when the
        write had not been taken up by then (it is withdrawn: nothing is written). A write
        already in a transaction is always waited for, so its caller learns how it ended."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("Writer.write called from inside a write: pass conn down instead")
        fut = self.submit(fn)
        if max_wait_s is None:
            return fut.result()
        try:
            return fut.result(timeout=max_wait_s)
        except TimeoutError:
            if fut.cancel():
                raise sqlite3.OperationalError(
                    f"database is locked (write not started within {max_wait_s:g}s)") from None
            return fut.result()

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``submit`` and await the result on the running event loop (never blocks it)."""
        return await asyncio.wrap_future(self.submit(fn))

    def close(self) -> None:
        """Commit what is queued, stop the thread (waits for it) and close the connection."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
            self._q.put(None)  # after every write queued so far: each is committed or failed
        self._thread.join()
        self.ledger.close()

    # -- the thread ----------------------------------------------------------------------
    def _main(self) -> None:
        stopping = False
        while not stopping:
            first = self._q.get()
            if first is None:
                break
            batch = [first] if first[1].set_running_or_notify_cancel() else []
            while len(batch) < self.max_batch:
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                if item[1].set_running_or_notify_cancel():  # False: withdrawn by its caller
                    batch.append(item)
            if batch:
                try:
                    self._commit(batch)
                except BaseException as exc:  # never leave a caller waiting on a dead thread
                    log.exception("ledger writer: a group of %d write(s) failed unexpectedly", len(batch))
                    for _fn, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)

    def _commit(self, batch: list[tuple[Callable[[sqlite3.Connection], Any], Future[Any]]]) -> None:
        conn = self.ledger.conn
        delay = 0.01
        for attempt in itertools.count(1):
            outcome: list[tuple[bool, Any]] = []
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for fn, _fut in batch:
                        outcome.append(self._one(conn, fn))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                if is_locked_error(exc) and not self.ledger.given_up:
                    if isinstance(exc, Disconnected):
                        self.ledger._note_down(exc)  # one line however long it lasts
                    elif worth_saying(exc, attempt):
                        log.warning("ledger %s locked (attempt %d), retrying %d write(s): %s",
                                    self.ledger.name, attempt, len(batch), exc)
                    if isinstance(exc, Conflict) and attempt == 1:
                        # PostgreSQL cancelled this group so that a concurrent one could commit:
                        # that one has committed or is about to, so run again at once (a few
                        # ms of jitter), not after SQLite's lock-holder wait.
                        delay = 0.002
                    time.sleep(delay * (0.5 + random.random() / 2))
                    delay = min(delay * 2, 1.0)
                    continue
                for _fn, fut in batch:
                    fut.set_exception(exc)
                return
            except BaseException as exc:  # noqa: BLE001 - every caller must hear of it
                for _fn, fut in batch:
                    fut.set_exception(exc)
                return
            self.ledger._note_up()
            self.transactions += 1
            self.writes += len(batch)
            for (ok, value), (_fn, fut) in zip(outcome, batch, strict=True):
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(value)
            return

    @staticmethod
    def _one(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], Any]) -> tuple[bool, Any]:
        conn.execute("SAVEPOINT one_write")
        try:
            value = fn(conn)
        except sqlite3.OperationalError as exc:
            if is_locked_error(exc) or not conn.in_transaction:
                # Locked: the whole group is retried. Not in a transaction: SQLite already
                # rolled the whole group back (disk full, I/O error), so there is no savepoint
                # to roll back to and every caller of the group must hear the real error.
                raise
            conn.execute("ROLLBACK TO one_write")
            conn.execute("RELEASE one_write")
            return False, exc
        except Exception as exc:
            if not conn.in_transaction:
                raise
            conn.execute("ROLLBACK TO one_write")
            conn.execute("RELEASE one_write")
            return False, exc
        conn.execute("RELEASE one_write")
        return True, value


class WriterLedger(Ledger):
    """A ``Ledger`` for one thread: reads on its own connection, writes through ``writer``
    (so they join the runner's group commits). Drop-in wherever code takes a ``Ledger``."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        super().__init__(writer.ledger.target)

    def migrate(self) -> int:
        """The writer's connection migrated the file already: only read the version (no write
        lock taken, so opening a reader never waits behind a busy writer)."""
        return self.schema_version

    def write(self, fn: Callable[[sqlite3.Connection], T], *, max_wait_s: float | None = None) -> T:
        return self.writer.write(fn, max_wait_s=max_wait_s)
