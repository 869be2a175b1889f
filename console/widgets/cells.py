"""Cell formatting shared by the views: states and severities as their labels
(``console.labels``), compact ages and durations. Every value from the ledger goes through
``console.safe_text``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.text import Text

from console.labels import label
from console.safe_text import one_line
from core.text import duration as text_duration


def cell(value: object, style: str = "", width: int | None = None) -> Text:
    """Untrusted value → one-line ``Text`` (sanitised, never markup)."""
    return Text(one_line(value, width), style=style, no_wrap=True, overflow="ellipsis", end="")


def word(kind: str, value: object) -> Text:
    """``value`` of vocabulary set ``kind`` as its label cell (``console.labels``)."""
    lab = label(kind, value)
    return cell(lab.text, lab.style)


def age(seconds: float | None, units: int = 2) -> str:
    """Seconds → one style everywhere: the largest unit first, then the next ("45s",
    "1m 16s", "1h 5m", "2d 4h"; a zero second unit is left out: "3m"); ``units=1`` keeps
    only the largest ("1m", "1h", "2d") for narrow columns. "-" for None."""
    if seconds is None:
        return "-"
    s = int(abs(seconds))
    sign = "-" if seconds < 0 and s else ""  # never "-0s"
    parts: list[str] = []
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        if s >= size or (size == 1 and not parts):
            n, s = divmod(s, size)
            if n or not parts:
                parts.append(f"{n}{unit}")
            if len(parts) >= units:
                break
        elif parts:
            break  # the next unit down is zero: "3m", not "3m 0s"
    return sign + " ".join(parts)


def kind_label(kind: str | None) -> str:
    """An escalation kind as a short word for the table (full kind in the preview/detail)."""
    return label("escalation_kind", kind).text


def duration(seconds: float | None) -> str:
    """How long something ran, in the one style the CLI uses too (``core.text.duration``:
    "0.40s", "12.5s", "3m05s", "2h10m"; "-" for None)."""
    return text_duration(seconds)


def clock(ts: float | None, now: float | None = None) -> str:
    """Unix seconds → local "HH:MM:SS" within a day of ``now``, else "Mon DD" (fits 8 cells);
    "-" for None."""
    if ts is None:
        return "-"
    dt = datetime.fromtimestamp(ts)
    if now is not None and abs(now - ts) >= 86400:
        return dt.strftime("%b %d")
    return dt.strftime("%H:%M:%S")


def exit_text(exit_code: int | None, signal: int | None) -> str:
    if signal:
        return f"sig{signal}"
    return "-" if exit_code is None else str(exit_code)


def job_name(row: dict[str, Any]) -> str:
    """A run's job as shown: fan-out sub-tasks as ``parent/task``."""
    return f"{row['job']}/{row['task']}" if row.get("task") else str(row["job"])


def run_state(state: str | None, status: str | None) -> Text:
    """A finished run's state cell: its label, except that a success whose outcome status is
    ``partial`` shows as partial (not ✓ ok)."""
    if status == "partial":
        return word("outcome_status", "partial")
    return word("run_state", state)
