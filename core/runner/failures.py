"""One log line per kind of failure, not a traceback a second.

The runner's loops (scheduling, dispatch, missions, the periodic pass, the sweep) retry
forever. When the ledger's disk fills or its folder turns read-only, every turn of every loop
fails the same way; logging each with a traceback buried the cause under a screenful a
second. ``FailureLog`` logs a failure once per kind (loop, exception class and message) per
``every_s`` seconds, as one line naming the cause for errors of the environment (SQLite,
OS errors) and with its traceback for anything else (a bug), counts what it held back, and
says once when the loop works again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from core.ledger.connection import StorageError

#: Errors of the environment (disk full, read-only, locked, permission): the cause is the message.
ENVIRONMENT_ERRORS: tuple[type[BaseException], ...] = (StorageError, OSError)


class FailureLog:
    """Rate-limited failure lines for retrying loops; thread-safe.

    Args:
        logger: where the lines go (warnings for environment errors, errors with a traceback
            for anything else).
        every_s: the same failure is logged at most once per this many seconds.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(self, logger: logging.Logger, *, every_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.every_s = every_s
        self.clock = clock
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str, str], float] = {}
        self._held: dict[tuple[str, str, str], int] = {}
        self._failing: set[str] = set()

    def failed(self, what: str, exc: BaseException) -> None:
        """``what`` (e.g. "scheduler tick") failed with ``exc``; logs it unless the same
        failure was logged less than ``every_s`` seconds ago."""
        key = (what, type(exc).__name__, str(exc))
        now = self.clock()
        with self._lock:
            self._failing.add(what)
            last = self._last.get(key)
            if last is not None and now - last < self.every_s:
                self._held[key] = self._held.get(key, 0) + 1
                return
            self._last[key] = now
            held = self._held.pop(key, 0)
        more = f" ({held} more time(s) since the last line)" if held else ""
        if isinstance(exc, ENVIRONMENT_ERRORS):
            self.logger.warning("%s failed: %s: %s%s; retrying", what, type(exc).__name__, exc, more)
        else:
            self.logger.error("%s failed%s; retrying", what, more, exc_info=exc)

    def ok(self, what: str) -> None:
        """``what`` worked; says so once if it was failing."""
        with self._lock:
            if what not in self._failing:
                return
            self._failing.discard(what)
            for key in [k for k in self._last if k[0] == what]:
                self._last.pop(key, None)
                self._held.pop(key, None)
        self.logger.warning("%s works again", what)
