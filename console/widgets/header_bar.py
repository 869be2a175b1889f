"""The always-visible header: runner status, open escalations by severity, silent share,
and the console's own state (stale data, paused, follow, read-only)."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.widgets import Static

from core.ledger.reads import Summary


def _clock(ts: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(ts).strftime("%H:%M:%S")


class HeaderBar(Static):
    """One line; every part is a word or symbol as well as a colour.

    The console's own flags (STALE, PAUSED, FOLLOW, READ-ONLY) come right after the name so
    a narrow terminal never cuts them; when the line is wider than the bar, the other parts
    shorten in turn (the silent share goes, then the name becomes "wk", then the counts lose
    "open", then "as OPERATOR" goes)."""

    DEFAULT_CSS = """
    HeaderBar { height: 1; background: $panel; color: $foreground; padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("watchkeeper", markup=False, **kwargs)
        self._last: tuple[tuple[Any, ...], dict[str, Any]] | None = None

    def show(self, summary: Summary | None, *, stale_since: float | None, paused: bool, follow: bool,
             read_only: bool, operator: str) -> None:
        self._last = ((summary,), dict(stale_since=stale_since, paused=paused, follow=follow,
                                       read_only=read_only, operator=operator))
        width = self.content_region.width or self.size.width or 10_000
        for level in range(5):
            line = self.line(summary, stale_since=stale_since, paused=paused, follow=follow,
                             read_only=read_only, operator=operator, level=level)
            if line.cell_length <= width:
                break
        # One line whatever it says: no layout pass. Textual's default (layout=True) relaid
        # the whole screen on every refresh, PgDn and cursor move (a third of a PgDn's time).
        self.update(line, layout=False)

    def on_resize(self) -> None:
        if self._last is not None:
            args, kw = self._last
            self.show(*args, **kw)

    @staticmethod
    def line(summary: Summary | None, *, stale_since: float | None, paused: bool, follow: bool,
             read_only: bool, operator: str, level: int = 0) -> Content:
        """The header at shortening ``level`` (0: everything … 4: shortest)."""
        parts: list[Content] = [Content.styled("watchkeeper" if level < 2 else "wk", "bold")]
        if stale_since is not None:
            parts.append(Content.styled(f"STALE since {_clock(stale_since)}", "bold reverse $error"))
        flags = [f for f, on in (("PAUSED", paused), ("FOLLOW", follow), ("READ-ONLY", read_only)) if on]
        if flags:
            parts.append(Content.styled(" ".join(flags), "bold reverse"))
        if summary is not None:
            runner = Content.styled(("● " if summary.runner_up else "✗ ") + summary.runner_text,
                                    "$success" if summary.runner_up else "bold $error")
            sev = summary.open_by_severity
            counts = Content.assemble(
                ("▲", "$error"), f"{sev.get('critical', 0)} ",
                ("◆", "$warning"), f"{sev.get('warning', 0)} ",
                "·", f"{sev.get('info', 0)}" + (" open" if level < 3 else ""),
            )
            parts += [runner, counts]
            if level < 1:
                parts.append(Content("silent -" if summary.silent_share is None
                                     else f"silent {summary.silent_share * 100:.0f}%"))
        if level < 4:
            parts.append(Content(f"as {operator}"))
        return Content(" │ ").join(parts)
