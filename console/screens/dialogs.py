"""Small modal dialogs: confirm (retry/abandon), snooze duration, help."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from console import keys
from console.safe_text import escaped

DIALOG_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical, {name} > VerticalScroll {{
    width: 64; max-width: 100%; height: auto; max-height: 90%;
    border: round $primary; background: $surface; padding: 0 1;
}}
"""


class ConfirmScreen(ModalScreen[bool]):
    """Ask before a destructive action; ``y``/enter confirms, ``n``/escape cancels.

    The answer keys are read in ``on_key``, not bound: a key reaches this screen only when
    it arrived after the dialog was up. A ``y`` typed right behind ``x`` in one burst (fast
    typing, a paste, one SSH read) was routed before the dialog existed; as a binding it
    would still answer the question unseen, here it is dropped."""

    DEFAULT_CSS = DIALOG_CSS.format(name="ConfirmScreen")
    ANSWERS = {"y": True, "enter": True, "n": False, "escape": False}

    #: Seconds between re-reads of a live detail (``live_detail``).
    LIVE_DETAIL_S = 1.0

    def __init__(self, question: str, detail: str = "",
                 live_detail: Callable[[], Awaitable[str]] | None = None) -> None:
        """``live_detail``, when given, is awaited every ``LIVE_DETAIL_S`` seconds while the
        dialog is up and replaces ``detail``: what it describes (runs in flight) may change
        while the operator reads it."""
        super().__init__()
        self.question = question
        self.detail = detail
        self.live_detail = live_detail
        self._answered = False

    def on_mount(self) -> None:
        if self.live_detail is not None:
            self.set_interval(self.LIVE_DETAIL_S, self._refresh_detail)

    async def _refresh_detail(self) -> None:
        if self.live_detail is None or self._answered:
            return
        try:
            text = await self.live_detail()
        except Exception:  # a failed read keeps the last words
            return
        if text != self.detail:
            self.detail = text
            self.query_one("#detail", Static).update(Text(escaped(text)))

    def on_key(self, event) -> None:
        if event.key in self.ANSWERS:
            event.stop()
            event.prevent_default()
            self.action_answer(self.ANSWERS[event.key])

    def compose(self) -> ComposeResult:
        with Vertical():
            # The question embeds job names: plain Text, never markup.
            yield Static(Text(escaped(self.question), style="bold"))
            if self.detail or self.live_detail is not None:
                yield Static(Text(escaped(self.detail)), id="detail")
            yield Static(Text("y / enter: yes    n / esc: no", style="dim"))

    def action_answer(self, yes: bool) -> None:
        if not self._answered:  # a second key before the dialog is gone answers nothing
            self._answered = True
            self.dismiss(yes)


SNOOZE_CHOICES: tuple[tuple[str, float], ...] = (
    ("15 minutes", 15 * 60), ("1 hour", 3600), ("4 hours", 4 * 3600), ("1 day", 86400), ("1 week", 7 * 86400),
)


#: The snooze dialog's hint: what its keys do, as they do it.
SNOOZE_HINT = "Snooze for… (1-5 or ↑↓ pick, enter snoozes; esc cancels)"


class SnoozeScreen(ModalScreen[float | None]):
    """Pick how long to snooze; dismisses with seconds, or None on escape.

    A digit only moves the highlight; enter (or a click) applies it. So the key that closes
    the dialog is the enter it consumes: none is left over to open the detail of the row
    underneath, as an enter typed after a digit that had already applied would."""

    DEFAULT_CSS = DIALOG_CSS.format(name="SnoozeScreen") + "SnoozeScreen OptionList { height: auto; }"
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, what: str = "") -> None:
        super().__init__()
        self.what = what  # the escalation(s) it applies to, as the confirm dialog names its run

    def compose(self) -> ComposeResult:
        with Vertical():
            if self.what:
                yield Static(Text(escaped(f"Snooze {self.what}?", keep_newlines=False), style="bold"))
            yield Static(Text(SNOOZE_HINT, style="bold" if not self.what else ""))
            yield OptionList(*(Option(f"{i}  {label}", id=str(i)) for i, (label, _) in enumerate(SNOOZE_CHOICES, 1)))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(SNOOZE_CHOICES[int(event.option.id or "1") - 1][1])

    def on_key(self, event) -> None:
        if event.character and event.character.isdigit() and 1 <= int(event.character) <= len(SNOOZE_CHOICES):
            event.stop()
            event.prevent_default()
            self.query_one(OptionList).highlighted = int(event.character) - 1

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """Every binding, from the key registry (``console.keys``), grouped by section: the keys
    in a column as wide as the widest of them (a key never runs into its text), what they do
    wrapping in their own column, and where they work. Scrolls with j/k, PgUp/PgDn, g/G."""

    DEFAULT_CSS = DIALOG_CSS.format(name="HelpScreen").replace("width: 64", "width: 100")
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close"), *keys.bindings("help")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(Text("Watchkeeper keys", style="bold"))
            yield Static(help_table())
            yield Static(Text("Flags: --read-only hides and refuses actions; --no-mouse lets you select text.",
                              style="dim"))

    def _body(self) -> VerticalScroll:
        return self.query_one("#help-body", VerticalScroll)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll(self, lines: int) -> None:
        body = self._body()
        body.scroll_to(y=body.scroll_y + lines, animate=False, immediate=True)

    def action_page(self, pages: int) -> None:
        body = self._body()
        body.scroll_to(y=body.scroll_y + pages * max(1, body.size.height - 1), animate=False, immediate=True)

    def action_top(self) -> None:
        self._body().scroll_home(animate=False, immediate=True)

    def action_bottom(self) -> None:
        self._body().scroll_end(animate=False, immediate=True)


def help_table() -> Table:
    """The help screen's body: a heading per section, then per key: the keys (one column as
    wide as the widest), what they do and, dim, where they work (wrapping in their column)."""
    rows = keys.help_rows()
    width = max(len(shown) for _, shown, _, _ in rows)
    table = Table.grid(padding=(0, 2))
    table.add_column("keys", style="bold", no_wrap=True, width=width)
    table.add_column("does", ratio=1, overflow="fold")
    last = ""
    for section, shown, does, where in rows:
        if section != last:
            if last:
                table.add_row(Text(""), Text(""))
            table.add_row(Text(section, style="bold underline"), Text(""))
            last = section
        text = Text(does)
        if where:
            text.append(f"  · {where}", style="dim")
        table.add_row(Text(shown), text)
    return table
