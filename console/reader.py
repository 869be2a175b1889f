"""Ledger access for the console, off the UI thread.

Each ``LedgerThread`` owns one thread and one ``Ledger`` connection opened in that thread
(sqlite connections are same-thread objects). The console keeps three: one for reads and the
ledger watcher (``console.watcher``: its long-lived connection makes ``PRAGMA data_version``
meaningful), one for operator actions (an abandon may wait seconds for a process to die;
reads must not), and one for row counts.
A failed call closes the connection so the next call reopens it; errors reach the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from core.ledger.connection import Ledger
from core.ledger.dialect import is_url

T = TypeVar("T")


class LedgerThread:
    """Run ``fn(ledger)`` in this object's thread: ``await lt.call(fn)``."""

    def __init__(self, path: str | Path, *, read_only: bool = False, name: str = "ledger") -> None:
        self.path: Path | str = path if is_url(path) else Path(path)
        self.read_only = read_only
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"wk-{name}")
        self._ledger: Ledger | None = None

    def _run(self, fn: Callable[[Ledger], T]) -> T:
        if self._ledger is None:
            if self.read_only and isinstance(self.path, Path) and not self.path.exists():
                raise FileNotFoundError(f"no ledger at {self.path}")
            self._ledger = Ledger(self.path, read_only=self.read_only)
            # A job may have stored bytes that are not UTF-8; read them with replacement
            # instead of failing every poll (safe_text then shows U+FFFD).
            self._ledger.decode_leniently()
        try:
            return fn(self._ledger)
        except Exception:
            try:
                self._ledger.rollback()
            except Exception:
                self._reset()
            raise

    def _reset(self) -> None:
        try:
            if self._ledger is not None:
                self._ledger.close()
        finally:
            self._ledger = None

    async def call(self, fn: Callable[[Ledger], T]) -> T:
        """Run ``fn`` with this thread's ledger and return its result (errors re-raised)."""
        return await asyncio.wrap_future(self._pool.submit(self._run, fn))

    def close(self) -> None:
        """Close the connection (in its own thread) and stop the thread."""
        try:
            self._pool.submit(self._reset).result(timeout=5)
        except Exception:
            pass
        self._pool.shutdown(wait=False, cancel_futures=True)
