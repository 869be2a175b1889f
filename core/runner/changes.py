"""Ledger changes as one broadcast on the runner's event loop: a loop that waits for runs
it does not own to settle (a fan-out parent waiting on its sub-tasks) sleeps until a run of
this runner ends (``Executor.announce``) or any connection commits to the ledger
(``core.ledger.wake``: the WAL's change on SQLite, ``LISTEN``/``NOTIFY`` on PostgreSQL),
instead of reading the ledger on a timer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from core.runner.waits import wait_event


class LedgerChanges:
    """Broadcast "the ledger may have changed" to every current waiter (loop thread only).

    A waiter subscribes before it looks, clears its event, looks, then waits: a change that
    lands between its look and its wait still wakes it.
    """

    def __init__(self) -> None:
        self._waiters: set[asyncio.Event] = set()

    def notify(self) -> None:
        """Wake every current waiter (on the loop thread)."""
        for ev in self._waiters:
            ev.set()

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[asyncio.Event]:
        """An event set by each ``notify`` while the block runs; the caller clears it before
        each look at the ledger and waits on it (with its own timeout) after."""
        ev = asyncio.Event()
        self._waiters.add(ev)
        try:
            yield ev
        finally:
            self._waiters.discard(ev)


async def wait(ev: asyncio.Event, timeout_s: float) -> None:
    """Wait until ``ev`` is set or ``timeout_s`` seconds pass, whichever comes first."""
    await wait_event(ev, timeout_s)
