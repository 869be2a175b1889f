"""The messages the console's one ledger watcher (``console.watcher``) sends its screens."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from core.ledger.reads import Summary


@dataclass(frozen=True)
class HeaderFacts:
    """What every screen's header shows about the ledger. ``summary``: the last figures read
    (``core.ledger.reads.summary``; None before the first good read), kept while the ledger
    cannot be read; ``stale_since``: Unix seconds of the first failed read since the last
    good one (None while reads succeed)."""

    summary: Summary | None = None
    stale_since: float | None = None


class LedgerRead(Message, bubble=False):
    """The watcher read the ledger (posted to each screen of the stack, never bubbling to the
    app). ``refresh``: re-read what you show — something was committed, the idle refresh
    fell due, or the ledger is readable again; ``committed``: something was committed since
    the previous read (``PRAGMA data_version`` moved); ``facts``: the header's figures.
    Without ``refresh`` it is the watcher's pulse (every ``ConsoleConfig.refresh`` seconds):
    the runner status is fresh, and a running job's output may have grown in its files."""

    def __init__(self, *, refresh: bool, committed: bool, facts: HeaderFacts) -> None:
        super().__init__()
        self.refresh = refresh
        self.committed = committed
        self.facts = facts

    def can_replace(self, message: Message) -> bool:
        # Textual asks the older message (self) whether the newer one queued behind it may
        # stand for both: it may, once it carries this one's flags too. A screen busy with
        # one read then takes a single message for the pulses that came meanwhile.
        if not isinstance(message, LedgerRead):
            return False
        message.refresh |= self.refresh
        message.committed |= self.committed
        return True
