"""Cell formatting shared by the views: states and severities as words plus symbols (never
colour alone), compact ages and durations. Every value from the ledger goes through
``console.safe_text``."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from console.safe_text import one_line

SEVERITY = {"critical": ("▲ CRIT", "bold red"), "warning": ("◆ WARN", "yellow"), "info": ("· info", "")}
ESC_STATE = {"open": ("● open", "bold"), "acknowledged": ("✓ acked", "dim"), "snoozed": ("z snoozed", "dim"),
             "resolved": ("○ resolved", "dim")}
RUN_STATE = {
    "succeeded": ("✓ ok", "green"), "failed": ("✗ failed", "bold red"), "timed_out": ("⧗ timeout", "bold red"),
    "orphaned": ("† orphan", "bold magenta"), "abandoned": ("⊘ abandon", "dim"), "blocked": ("■ blocked", "yellow"),
    "queued": ("… queued", "dim"), "spawned": ("▹ spawned", "cyan"), "running": ("▸ running", "cyan"),
    "verifying": ("? verify", "cyan"),
}
BREAKER = {"closed": ("closed", "dim"), "open": ("⚡ OPEN", "bold red"), "half_open": ("½ half", "yellow")}


def cell(value: object, style: str = "", width: int | None = None) -> Text:
    """Untrusted value → one-line ``Text`` (sanitised, never markup)."""
    return Text(one_line(value, width), style=style, no_wrap=True, overflow="ellipsis", end="")


def word(table: dict[str, tuple[str, str]], value: str | None) -> Text:
    label, style = table.get(value or "", (value or "-", ""))
    return cell(label, style)


def age(seconds: float | None) -> str:
    """Seconds → "45s", "12m", "3h", "2d" (compact for 80-column tables); "-" for None."""
    if seconds is None:
        return "-"
    s = abs(seconds)
    sign = "-" if seconds < 0 else ""
    if s < 90:
        return f"{sign}{int(s)}s"
    if s < 5400:
        return f"{sign}{int(s // 60)}m"
    if s < 172800:
        return f"{sign}{s / 3600:.0f}h"
    return f"{sign}{s / 86400:.0f}d"


def duration(seconds: float | None) -> str:
    """Seconds → "0.4s", "12s", "3m05s", "2h10m"; "-" for None."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


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
