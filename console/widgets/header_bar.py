"""The always-visible header: runner status, open escalations by severity, silent share,
and the console's own state (stale data, paused, follow, read-only)."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from core.ledger.reads import Summary


def _clock(ts: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(ts).strftime("%H:%M:%S")


class HeaderBar(Static):
    """One line; every part is a word or symbol as well as a colour."""

    DEFAULT_CSS = """
    HeaderBar { height: 1; background: $panel; color: $foreground; padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("watchkeeper", markup=False, **kwargs)

    def show(self, summary: Summary | None, *, stale_since: float | None, paused: bool, follow: bool,
             read_only: bool, operator: str) -> None:
        parts: list[Content] = [Content.styled("watchkeeper", "bold")]
        if summary is not None:
            runner = Content.styled(("● " if summary.runner_up else "✗ ") + summary.runner_text,
                                    "$success" if summary.runner_up else "bold $error")
            sev = summary.open_by_severity
            counts = Content.assemble(
                ("▲", "$error"), f"{sev.get('critical', 0)} ",
                ("◆", "$warning"), f"{sev.get('warning', 0)} ",
                "·", f"{sev.get('info', 0)} open",
            )
            silent = "silent -" if summary.silent_share is None else f"silent {summary.silent_share * 100:.0f}%"
            parts += [runner, counts, Content(silent)]
        if stale_since is not None:
            parts.append(Content.styled(f"STALE since {_clock(stale_since)}", "bold reverse $error"))
        flags = [f for f, on in (("PAUSED", paused), ("FOLLOW", follow), ("READ-ONLY", read_only)) if on]
        if flags:
            parts.append(Content.styled(" ".join(flags), "bold reverse"))
        parts.append(Content(f"as {operator}"))
        self.update(Content(" │ ").join(parts))
