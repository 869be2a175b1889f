"""The console's one ledger watcher: the only code that decides when the console reads the
ledger again, reads the header's figures, and knows whether the ledger can be read at all.

The app runs ``LedgerWatcher.run`` as a Textual worker. It wakes

* at once when another connection commits: ``core.ledger.wake.follow`` (``watchfiles`` on a
  SQLite ledger's WAL, ``LISTEN`` on PostgreSQL), the same feed that wakes the runner;
* on its pulse, every ``ConsoleConfig.refresh`` seconds: a runner killed with SIGKILL
  writes nothing (only its dead process tells), a running job's output grows in its files,
  not in the ledger, and a wake-up the feed missed is caught by ``PRAGMA data_version``;
* when a screen asks (``wake``), e.g. after an operator action or a failed read.

Each time it reads, on the console's read thread, the data version and the runner status,
and the whole header summary when the ledger changed (or every ``IDLE_REFRESH_S``); then it
posts one ``console.messages.LedgerRead`` to every screen of the stack. Screens read their
own data in reply; none runs a timer or a poll of its own. A failed read never ends the
console: the header says ``STALE since …`` and keeps the last figures, every screen keeps
what it shows, and the next read tries again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from textual.message_pump import MessagePump

from console.messages import HeaderFacts, LedgerRead
from console.reader import LedgerThread
from core.ledger import reads, wake
from core.ledger.connection import Ledger
from core.runner.waits import wait_event

#: Seconds between two reads of the whole header summary when nothing was committed (the
#: silent share and counts do not move then, but "runner stalled for …" does); screens
#: re-read what they show at the same time, so ages computed in a read move too.
IDLE_REFRESH_S = 5.0


class LedgerWatcher:
    """Watches the ledger at ``target`` (a SQLite path or a ``postgresql://`` URL) for the
    console and tells the screens. ``reader``: the console's read thread; ``clock``: Unix
    seconds; ``pulse_s``: seconds between two reads when nothing wakes it; ``screens()``:
    where to post (the app's screen stack); ``follow_commits``: False leaves out the wake-up
    feed (the pulse alone then notices commits)."""

    def __init__(self, target: str | Path, reader: LedgerThread, *, clock: Callable[[], float], pulse_s: float,
                 screens: Callable[[], Iterable[MessagePump]], follow_commits: bool = True) -> None:
        self.target = target
        self.reader = reader
        self.clock = clock
        self.pulse_s = pulse_s
        self.screens = screens
        self.follow_commits = follow_commits
        #: The header's figures and staleness, as last posted.
        self.facts = HeaderFacts()
        #: Completed reads, good and failed (tests and benchmarks wait on these).
        self.reads = 0
        self.failures = 0
        self._version: int | None = None
        self._summary_at = float("-inf")  # time.monotonic() of the last summary read
        self._force = True  # the first read takes everything
        self._wake = asyncio.Event()

    @property
    def has_read(self) -> bool:
        """True once a read finished (well or not): a screen's header has something to say."""
        return self.reads + self.failures > 0

    def wake(self, *, force: bool = False) -> None:
        """Read again now instead of at the next pulse; ``force``: read the whole summary and
        tell screens to re-read, even if nothing was committed. Safe to call from the app's
        event loop only (the wake-up feed and the screens run there)."""
        self._force = self._force or force
        self._wake.set()

    async def run(self) -> None:
        """Read, post, wait for a wake-up or the pulse; until cancelled (the app's worker)."""
        stop = asyncio.Event()
        feed = asyncio.create_task(wake.follow(self.target, self.wake, stop=stop)) if self.follow_commits else None
        try:
            while True:
                self._wake.clear()
                try:
                    await self.read()
                except Exception:  # never let the watcher end: the next wake-up tries again
                    pass
                await wait_event(self._wake, self.pulse_s)
        finally:
            stop.set()
            if feed is not None:
                feed.cancel()

    async def read(self) -> None:
        """One read of the header's figures and one ``LedgerRead`` to every screen."""
        now = self.clock()
        seen = self._version
        # After a failed read the screens may have missed data too: they re-read on recovery.
        force = self._force or self.facts.stale_since is not None
        self._force = False
        idle = time.monotonic() - self._summary_at >= IDLE_REFRESH_S

        def fetch(ledger: Ledger) -> tuple[int, reads.Summary | None, tuple[bool, str]]:
            version = ledger.data_version()
            if version != seen or force or idle:
                summary = reads.summary(ledger, now)
                return version, summary, (summary.runner_up, summary.runner_text)
            # Nothing committed, but a runner killed with SIGKILL writes nothing either.
            return version, None, reads.runner_status(ledger, now)

        try:
            version, summary, runner = await self.reader.call(fetch)
        except Exception:
            self.failures += 1
            if self.facts.stale_since is None:
                self.facts = replace(self.facts, stale_since=now)
            self._post(refresh=False, committed=False)
            return
        committed = seen is not None and version != seen
        if summary is not None:
            self._summary_at = time.monotonic()
            self.facts = HeaderFacts(summary)
        elif self.facts.summary is not None:
            self.facts = HeaderFacts(replace(self.facts.summary, runner_up=runner[0], runner_text=runner[1]))
        else:
            self.facts = HeaderFacts()
        self._version = version
        self.reads += 1
        self._post(refresh=summary is not None, committed=committed)

    def _post(self, *, refresh: bool, committed: bool) -> None:
        for screen in list(self.screens()):
            screen.post_message(LedgerRead(refresh=refresh, committed=committed, facts=self.facts))
