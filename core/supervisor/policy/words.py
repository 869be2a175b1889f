"""Words shown to people about what the ledger holds, decided here rather than in the store:
the one next-run word the CLI's ``jobs`` and the console's Jobs view both show."""

from __future__ import annotations

from core.ledger.reads import HELD_PAUSED
from core.text import short_age


def breaker_word(state: str | None, until: float | None, now: float) -> str:
    """A job's breaker in one short word for listings: ``closed``, ``half_open``, ``open 4m``
    (cool-down left, ``short_age`` style) or ``open (due)`` once the cool-down is over and the
    trial run waits for a runner — never a negative time. ``until``/``now``: Unix seconds."""
    word = state or "closed"
    if word == "open" and until:
        word += f" {short_age(until - now)}" if until - now >= 1 else " (due)"
    return word


def next_run_word(at: float | None, held: str | None, now: float) -> str:
    """``core.ledger.reads.job_next_run``'s answer in one short word, the same in the CLI and
    the console: ``paused`` (nothing queued), ``due``, ``in 35s`` / ``in 2m``
    (``core.text.short_age`` style, largest unit), or ``-`` (nothing scheduled). ``at`` and
    ``now`` are Unix seconds."""
    if at is None:
        return "paused" if held == HELD_PAUSED else "-"
    return "due" if at - now < 1 else f"in {short_age(at - now, 1)}"  # never "in 0s"
