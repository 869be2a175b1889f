"""The base of every screen that shows ledger data: it reacts to the app's one ledger watcher
(``console.watcher``) and keeps its header live from it; it runs no timer or poll of its own.

A screen defines ``on_ledger(refresh, committed)``: read what it shows when ``refresh`` (and
whatever else it must re-read on every pulse, like a running job's output). It runs in a
worker beside the screen's message loop, one at a time: messages that come while a read is
in flight collapse into one more reaction; a covered screen only notes that something
changed and reads when it is on top again. A failed read
keeps what is shown and asks the watcher to look (the header then says whether the ledger
is unreachable); it never ends the console.
"""

from __future__ import annotations

from typing import cast

from textual import events, on
from textual.reactive import var
from textual.screen import Screen

from console import keys
from console.context import ConsoleApp
from console.messages import HeaderFacts, LedgerRead
from console.screens.operator_actions import refuse_read_only
from console.widgets.header_bar import HeaderBar


class LiveScreen(Screen):
    """A screen kept live by the ledger watcher; subclasses set ``SCOPE`` (its keys) and
    define ``on_ledger``."""

    SCOPE = ""
    #: The header's figures, as the watcher last posted them; the header redraws on change.
    facts: var[HeaderFacts] = var(HeaderFacts(), init=False)

    def __init__(self) -> None:
        super().__init__()
        #: This screen's completed reactions to the watcher (tests wait on them).
        self.polls = 0
        #: ``LedgerRead`` messages this screen received, on top or covered.
        self.heard = 0
        self._missed = False  # covered while the ledger changed: read when on top again
        self._due = (False, False)  # (refresh, committed) still to react to
        self._pending = False  # a message came that is not reacted to yet
        self._reacting = False  # the worker reacting to messages runs

    @property
    def wk(self) -> ConsoleApp:
        """The console app, typed (screens reach it through this protocol, not app.py)."""
        return cast(ConsoleApp, self.app)

    @property
    def stale_since(self) -> float | None:
        """Unix seconds since which the ledger could not be read (None: it can)."""
        return self.facts.stale_since

    # -- the watcher ---------------------------------------------------------------------------
    async def on_ledger(self, refresh: bool, committed: bool) -> None:  # pragma: no cover - per screen
        raise NotImplementedError

    def watch_facts(self) -> None:
        self.draw_header()

    @on(events.Mount)
    def _start_live(self) -> None:
        # After the screen's own on_mount (a subclass's handler runs first): header, first read.
        self.facts = self.wk.watcher.facts
        self.draw_header()
        if self.wk.watcher.has_read:  # else the watcher's first message starts this screen
            self.post_message(LedgerRead(refresh=True, committed=False, facts=self.facts))

    def on_ledger_read(self, message: LedgerRead) -> None:
        self.heard += 1
        self.facts = message.facts
        if not self.is_current:
            self._missed = self._missed or message.refresh
            return
        self._due = (self._due[0] or message.refresh or self._missed or self.polls == 0,
                     self._due[1] or message.committed)
        self._missed = False
        self._pending = True
        if not self._reacting:
            # Beside the screen's message loop, not in it: keys are handled while a read is
            # in flight (as the timer-driven polls were), and reads never overlap.
            self._reacting = True
            self.run_worker(self._react_while_due(), group="ledger-read", exit_on_error=False)

    async def _react_while_due(self) -> None:
        try:
            while self._pending:
                (refresh, committed), self._due, self._pending = self._due, (False, False), False
                await self.react(refresh, committed)
        finally:
            self._reacting = False

    async def react(self, refresh: bool, committed: bool) -> None:
        """``on_ledger`` once, counted; a failure asks the watcher to look at the ledger."""
        try:
            await self.on_ledger(refresh, committed)
        except Exception:  # never let a read end the console; the watcher says if it is down
            self.wk.watcher.wake()
        self.polls += 1

    def read_again(self) -> None:
        """Re-read what the screen shows, through the same path as the watcher's messages
        (after the read in flight, never beside it)."""
        self.post_message(LedgerRead(refresh=True, committed=False, facts=self.facts))

    def on_screen_resume(self) -> None:
        # Something may have changed while covered, and the header may have moved on.
        self.facts = self.wk.watcher.facts
        self.draw_header()
        if self.polls:
            self.post_message(LedgerRead(refresh=True, committed=self._missed, facts=self.facts))
            self._missed = False

    # -- the header ----------------------------------------------------------------------------
    def header_flags(self) -> tuple[bool, bool]:
        """(paused, follow) as the header shows them; a screen with such modes overrides it."""
        return False, False

    def draw_header(self) -> None:
        cfg = self.wk.config
        paused, follow = self.header_flags()
        self.query_one(HeaderBar).show(self.facts.summary, stale_since=self.facts.stale_since, paused=paused,
                                       follow=follow, read_only=cfg.read_only, operator=cfg.operator)

    # -- read-only ----------------------------------------------------------------------------
    def read_only_hides(self, action: str) -> bool:
        """True for an action that writes the ledger (``console.keys.ACTING``) on a read-only
        console: hidden from the footer and the palette, its key does nothing."""
        return self.wk.config.read_only and action in keys.ACTING

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not self.read_only_hides(action)

    def on_key(self, event: events.Key) -> None:
        # A hidden action's key does nothing on its own; on a read-only console the operator
        # is told why instead (the key is not passed on).
        if self.wk.config.read_only and event.key in keys.acting_keys(self.SCOPE):
            event.stop()
            refuse_read_only(self)
