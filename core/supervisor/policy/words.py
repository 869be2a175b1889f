"""Words shown to people about what the ledger holds, decided here rather than in the store:
the one next-run word the CLI's ``jobs`` and the console's Jobs view both show."""

from __future__ import annotations

from core.ledger.reads import HELD_PAUSED
from core.text import short_age


def next_run_word(at: float | None, held: str | None, now: float) -> str:
    """``core.ledger.reads.job_next_run``'s answer in one short word, the same in the CLI and
    the console: ``paused`` (nothing queued), ``due``, ``in 35s`` / ``in 2m``
    (``core.text.short_age`` style, largest unit), or ``-`` (nothing scheduled). ``at`` and
    ``now`` are Unix seconds."""
    if at is None:
        return "paused" if held == HELD_PAUSED else "-"
    return "due" if at <= now else f"in {short_age(at - now, 1)}"
