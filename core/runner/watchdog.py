"""Run deadlines enforced by a thread of their own.

The runner's event loop also writes the ledger, and a ledger write waits while another
process holds the write lock (seconds, in the worst case). A timeout must not wait with it:
this thread sends SIGTERM to a run's process group at its deadline and SIGKILL after its
grace, whatever the loop is doing. The loop records the outcome when it gets there, asking
``fired`` whether the kill was a timeout. Times are ``time.monotonic()`` seconds.
"""

from __future__ import annotations

import heapq
import itertools
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from core.processes import signal_group


@dataclass
class Deadline:
    """One watched run: its process group, deadline and grace (seconds)."""

    key: int
    pgid: int
    deadline: float
    grace: float
    on_kill: Callable[[int], None] | None = None
    on_term: Callable[[int], None] | None = None
    term_sent_at: float | None = None
    kill_sent: bool = False
    done: bool = False
    fired_at: float | None = field(default=None)


class Watchdog:
    """Enforces deadlines from a daemon thread. ``watch`` a run when it starts; ``cancel``
    when it ended on its own; ``fired`` tells whether the deadline was reached first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, int]] = []
        self._items: dict[int, Deadline] = {}
        self._seq = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._main, name="watchkeeper-watchdog", daemon=True)
        self._thread.start()

    def watch(self, key: int, pgid: int, timeout: float, grace: float,
              on_kill: Callable[[int], None] | None = None, on_term: Callable[[int], None] | None = None) -> None:
        """Start watching run ``key`` (process group ``pgid``): SIGTERM after ``timeout``
        seconds, SIGKILL ``grace`` seconds later. ``on_term(pgid)`` runs on this thread just
        before the SIGTERM (e.g. to mark the run's folder timed out, so a later runner knows);
        ``on_kill(pgid)`` after the SIGKILL (e.g. to hunt processes that escaped the group)."""
        with self._cond:
            d = Deadline(key, pgid, time.monotonic() + timeout, grace, on_kill, on_term)
            self._items[key] = d
            heapq.heappush(self._heap, (d.deadline, next(self._seq), key))
            self._cond.notify()

    def cancel(self, key: int) -> None:
        """The run ended by itself: stop watching it (a no-op when already fired)."""
        with self._cond:
            d = self._items.pop(key, None)
            if d is not None:
                d.done = True

    def fired(self, key: int) -> bool:
        """True once the deadline of ``key`` was reached (SIGTERM sent)."""
        with self._cond:
            d = self._items.get(key)
            return d is not None and d.fired_at is not None

    def forget(self, key: int) -> None:
        with self._cond:
            self._items.pop(key, None)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def _main(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    wait = None if not self._heap else max(0.0, self._heap[0][0] - time.monotonic())
                    self._cond.wait(wait)
                if self._stopped:
                    return
                _, _, key = heapq.heappop(self._heap)
                d = self._items.get(key)
                if d is None or d.done:
                    continue
                now = time.monotonic()
                if d.term_sent_at is None:
                    d.term_sent_at = d.fired_at = now
                    action = signal.SIGTERM
                    heapq.heappush(self._heap, (now + d.grace, next(self._seq), key))
                elif not d.kill_sent:
                    d.kill_sent = True
                    action = signal.SIGKILL
                else:
                    continue
            if action == signal.SIGTERM and d.on_term is not None:
                try:
                    d.on_term(d.pgid)
                except Exception:  # a mark that fails must not stop the kill
                    pass
            signal_group(d.pgid, action)  # outside the lock: a signal never waits on the loop
            if action == signal.SIGKILL and d.on_kill is not None:
                try:
                    d.on_kill(d.pgid)
                except Exception:  # a hunt that fails must not stop the watchdog
                    pass
