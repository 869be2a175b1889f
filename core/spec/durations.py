"""Durations as job specs and settings write them: ``"30s"``, ``"5m"``, ``"1h30m"``,
``"250ms"`` or a number of seconds, always parsed to float seconds and bounded, so an
infinite or absurd value fails at the spec line that holds it, never later in a timer.
"""

from __future__ import annotations

import math
import re
from typing import Any

_DUR_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
#: The longest duration anything accepts: 10 years. Longer (or inf/nan) values overflow
#: asyncio timers and datetime arithmetic later, far from the spec that caused them.
MAX_DURATION_S = 315_360_000.0
DURATION_LIMIT_MESSAGE = "must be a finite duration of at most 10 years"


def parse_duration(value: Any) -> float:
    """``"30s"``, ``"5m"``, ``"1h30m"``, ``"250ms"``, ``"1w"`` or a number of seconds → seconds (float).

    Raises:
        ValueError: not a duration, or not finite, or longer than 10 years
            (``MAX_DURATION_S``).
    """
    seconds = _parse_duration(value)
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise ValueError(f"{DURATION_LIMIT_MESSAGE}, got {value!r}")
    return seconds


def _parse_duration(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a duration such as '30s', '5m' or a number of seconds")
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int too large for a float
            return math.inf
    if isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if not text:
            raise ValueError("empty duration")
        pos, total = 0, 0.0
        for m in _DUR_RE.finditer(text):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos == len(text):
            return total
        try:
            return float(text)
        except ValueError:
            pass
    raise ValueError(f"expected a duration such as '30s', '5m', '1h30m' or seconds, got {value!r}")


def duration_words(s: float) -> str:
    """Seconds in spec words, the way a user writes them: ``300`` → ``"5m"``, ``1.5`` → ``"1.5s"``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{int(s // size)}{unit}"
    return f"{s:g}s"
