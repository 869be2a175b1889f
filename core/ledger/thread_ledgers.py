"""One ``WriterLedger`` per thread, and a close that never pulls a connection from under a
thread still reading on it.

Why not simply close every thread's ledger at the stop: CPython's ``sqlite3`` (3.11) takes
the whole process down (SIGSEGV) when a connection is closed while another thread is
executing on it, and a stopping runner can have such a thread — a ``to_thread`` call whose
task was cancelled goes on reading until its statement ends. It took a CI worker down with
every test it still had. So ``close`` closes only the ledgers of the calling thread and of
threads that have ended; the others close when their thread ends (the thread's locals go with
it, and with the last reference the connection closes, on that very thread).
"""

from __future__ import annotations

import contextlib
import threading
import weakref

from core.ledger.connection import Ledger, StorageError
from core.ledger.writer import Writer, WriterLedger


class ThreadLedgers:
    """The per-thread ledgers of one runner (or ``watchkeeper exec``): reads on each thread's
    own connection, writes through ``writer`` (its group commits). Thread-safe."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self._local = threading.local()
        self._lock = threading.Lock()
        # Weak: a ledger whose thread ended is gone (closed) without us.
        self._opened: list[tuple[threading.Thread, weakref.ref[Ledger]]] = []

    def get(self) -> Ledger:
        """The calling thread's ledger, opened on its first call (may raise what ``Ledger``
        raises: ``sqlite3.DatabaseError``, a PostgreSQL connection error)."""
        led = getattr(self._local, "ledger", None)
        if led is None:
            led = WriterLedger(self.writer)
            self._local.ledger = led
            with self._lock:
                self._opened.append((threading.current_thread(), weakref.ref(led)))
        return led

    def open(self) -> list[Ledger]:
        """The ledgers still open (their threads may be running or not)."""
        with self._lock:
            refs = [ref() for _thread, ref in self._opened]
        return [led for led in refs if led is not None]

    def give_up(self) -> None:
        """Every ledger stops retrying (``Ledger.give_up``): a stopping runner's ledger down."""
        for led in self.open():
            led.give_up()

    def close(self) -> None:
        """Close the calling thread's ledger and those of ended threads; forget the rest,
        which close when their threads end (see the module docstring). Errors of a close
        (``StorageError``) are not raised: the stop goes on."""
        me = threading.current_thread()
        with self._lock:
            opened, self._opened = self._opened, []
        if getattr(self._local, "ledger", None) is not None:
            del self._local.ledger
        for thread, ref in opened:
            led = ref()
            if led is None or (thread is not me and thread.is_alive()):
                continue
            with contextlib.suppress(StorageError):
                led.close()
