"""Run history at a glance: one cell per run, its height the run's duration (▁ … █, relative
to the longest shown) and its colour the run's state (the label table's style: green ok,
red failed or timed out, yellow partial or blocked, magenta orphaned). Colour is never the
only carrier: the chart sits beside the success rate and a list with state words, and a
run that failed shows as ``✗`` when it has no duration to draw.

Glyphs are U+2581…U+2588 (in DejaVu Sans Mono and every common terminal font)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from console.labels import label

BARS = "▁▂▃▄▅▆▇█"


def _style(state: str | None, status: str | None) -> str:
    lab = label("outcome_status", "partial") if status == "partial" else label("run_state", state)
    return lab.style.replace("bold ", "") or "dim"


def run_bars(runs: Sequence[tuple[str | None, str | None, float | None]], width: int | None = None) -> Text:
    """``runs`` oldest first as (state, status, duration_s) → one ``Text`` cell per run (the
    newest ``width`` when given). Empty runs give ``Text("-")``."""
    shown = list(runs)[-width:] if width else list(runs)
    if not shown:
        return Text("-", style="dim", end="")
    longest = max((d for _, _, d in shown if d), default=0.0)
    out = Text(end="", no_wrap=True)
    for state, status, dur in shown:
        if dur is None or longest <= 0:
            ch = "✗" if state in ("failed", "timed_out", "orphaned") else BARS[0]
        else:
            ch = BARS[min(len(BARS) - 1, int(dur / longest * (len(BARS) - 1) + 0.5))]
        out.append(ch, style=_style(state, status))
    return out
