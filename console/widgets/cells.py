"""Cell formatting shared by the views: states and severities as their labels
(``console.labels``), compact ages and durations. Every value from the ledger goes through
``console.safe_text``."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from console.labels import label
from console.safe_text import escaped_line
from core.processes import signal_name
from core.text import duration as text_duration
from core.text import short_age


def cell(value: object, style: str = "", width: int | None = None) -> Text:
    """Untrusted value → one-line ``Text`` (sanitised, never markup)."""
    return Text(escaped_line(value, width), style=style, no_wrap=True, overflow="ellipsis", end="")


def word(kind: str, value: object) -> Text:
    """``value`` of vocabulary set ``kind`` as its label cell (``console.labels``)."""
    lab = label(kind, value)
    return cell(lab.text, lab.style)


def age(seconds: float | None, units: int = 2) -> str:
    """Seconds → the one age style (``core.text.short_age``): "45s", "1m 16s", "1h 5m";
    ``units=1`` keeps only the largest unit. "-" for None; never "-0s"."""
    return short_age(seconds, units)


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
    """A run's exit as the CLI says it: the signal's name (``SIGTERM``) when a signal ended
    it, else the exit code, else ``-``."""
    if signal:
        return signal_name(signal)
    return "-" if exit_code is None else str(exit_code)


def job_name(job: str, task: str | None) -> str:
    """A run's job as shown: fan-out sub-tasks as ``parent/task``."""
    return f"{job}/{task}" if task else job


def run_state(state: str | None, status: str | None) -> Text:
    """A finished run's state cell: its label, except that a success whose outcome status is
    ``partial`` shows as partial (not ✓ ok)."""
    if status == "partial":
        return word("outcome_status", "partial")
    return word("run_state", state)
