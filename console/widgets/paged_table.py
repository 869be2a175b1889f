"""A DataTable fed one bounded page at a time (keyset pagination), never a whole table.

Subclasses name their columns, the ``core.queries`` function that reads a page, how a row
becomes cells and its key. Live refreshes replace the loaded rows while keeping the cursor
on the same row key and the scroll offset where it was; ``follow`` keeps the selected row
in view instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from console.messages import NeedMore
from core.queries import Page

#: Rows left below the cursor when the next page is requested.
PREFETCH_MARGIN = 20
#: Most rows one live refresh re-reads (the loaded pages, capped).
MAX_LIVE_ROWS = 2000


@dataclass(frozen=True)
class Column:
    """One table column: ``width`` cells, plus a share of spare width when ``flex`` > 0."""

    key: str
    label: str
    width: int
    flex: int = 0


class PagedTable(DataTable):
    """Base for the four main views. ``VIEW`` names the view ("escalations", …)."""

    VIEW: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    COLUMNS: ClassVar[tuple[Column, ...]] = ()
    #: ``core.queries`` page reader: fn(ledger, *, now, after, limit, flt) -> Page
    FETCH: ClassVar[Callable[..., Page]]

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "Top", show=False),
        Binding("G", "scroll_bottom", "Bottom", show=False),
    ]

    DEFAULT_CSS = """
    PagedTable { height: 1fr; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", cell_padding=1, **kwargs)
        self.rows_data: list[dict[str, Any]] = []
        self.next_cursor: tuple | None = None
        self.marked: set[str] = set()
        self.now = 0.0
        self._widths: tuple[int, ...] = ()
        self._asked_more = False

    # -- subclass API ------------------------------------------------------------------
    def key_of(self, row: dict[str, Any]) -> str:
        return str(row["id"])

    def cells(self, row: dict[str, Any]) -> list[Text]:
        raise NotImplementedError

    def run_id_of(self, row: dict[str, Any]) -> int | None:
        """The run an enter / retry / abandon on this row applies to."""
        return row.get("id")

    # -- queries -------------------------------------------------------------------------
    def fetch_live(self, ledger: Any, *, now: float, flt: Any) -> Page:
        """Re-read the first page (live refresh). While the cursor is deep in later pages
        those stay as they are, so a refresh costs one page however far the operator scrolled."""
        from core.queries import PAGE

        limit = PAGE if self.cursor_row < PAGE else min(MAX_LIVE_ROWS, max(PAGE, len(self.rows_data)))
        return type(self).FETCH(ledger, now=now, after=None, limit=limit, flt=flt)

    def fetch_more(self, ledger: Any, *, now: float, flt: Any) -> Page:
        from core.queries import PAGE

        return type(self).FETCH(ledger, now=now, after=self.next_cursor, limit=PAGE, flt=flt)

    # -- state -----------------------------------------------------------------------------
    def current(self) -> dict[str, Any] | None:
        if not self.rows_data or self.cursor_row < 0 or self.cursor_row >= len(self.rows_data):
            return None
        return self.rows_data[self.cursor_row]

    def selection(self) -> list[dict[str, Any]]:
        """Marked rows if any, else the row under the cursor."""
        if self.marked:
            return [r for r in self.rows_data if self.key_of(r) in self.marked]
        cur = self.current()
        return [cur] if cur else []

    def toggle_mark(self) -> None:
        cur = self.current()
        if cur is None:
            return
        key = self.key_of(cur)
        self.marked.symmetric_difference_update({key})
        self.update_cell(key, "sel", self._mark(key))
        self.action_cursor_down()

    def clear_marks(self) -> None:
        for key in list(self.marked):
            self.marked.discard(key)
            try:
                self.update_cell(key, "sel", self._mark(key))
            except Exception:  # the row left the loaded page meanwhile
                pass

    def _mark(self, key: str) -> Text:
        return Text("●" if key in self.marked else " ", style="bold", end="")

    # -- rendering ---------------------------------------------------------------------
    def _column_widths(self) -> tuple[int, ...]:
        cols = (Column("sel", " ", 1),) + self.COLUMNS
        avail = max(0, self.size.width - 2 * len(cols) - 2)
        fixed = sum(c.width for c in cols)
        spare = max(0, avail - fixed)
        flex = sum(c.flex for c in cols) or 1
        widths = [c.width + (spare * c.flex // flex) for c in cols]
        return tuple(widths)

    def _build_columns(self) -> None:
        widths = self._column_widths()
        if widths == self._widths and self.columns:
            return
        self._widths = widths
        self.clear(columns=True)
        cols = (Column("sel", " ", 1),) + self.COLUMNS
        for col, width in zip(cols, widths, strict=True):
            self.add_column(col.label, width=width, key=col.key)
        self._fill(self.rows_data, keep_scroll=True, follow=False)

    def on_resize(self) -> None:
        self._build_columns()

    def on_mount(self) -> None:
        self._build_columns()

    def _fill(self, rows: list[dict[str, Any]], *, keep_scroll: bool, follow: bool) -> None:
        old_key = None
        cur = self.current()
        if cur is not None:
            old_key = self.key_of(cur)
        old_row, old_scroll = self.cursor_row, self.scroll_y
        self.clear()
        self.rows_data = rows
        keys = []
        for row in rows:
            key = self.key_of(row)
            keys.append(key)
            self.add_row(self._mark(key), *self.cells(row), key=key)
        if not rows:
            return
        try:
            idx = keys.index(old_key) if old_key is not None else max(0, old_row)
        except ValueError:
            idx = max(0, old_row)
        idx = min(idx, len(rows) - 1)
        self.move_cursor(row=idx, animate=False, scroll=follow)
        if keep_scroll and not follow:
            self.call_after_refresh(self.scroll_to, y=old_scroll, animate=False)

    def show(self, page: Page, now: float, *, follow: bool = False) -> None:
        """Replace the loaded rows with a fresh first page (live refresh)."""
        self.now = now
        self.marked &= {self.key_of(r) for r in page.rows}
        same = [self.key_of(r) for r in page.rows] == [self.key_of(r) for r in self.rows_data] \
            and page.rows == self.rows_data
        self.next_cursor = page.cursor
        self._asked_more = False
        if same:
            return
        self._fill(page.rows, keep_scroll=True, follow=follow)

    def extend(self, page: Page) -> None:
        """Append the next page read with ``next_cursor``."""
        have = {self.key_of(r) for r in self.rows_data}
        for row in page.rows:
            key = self.key_of(row)
            if key in have:
                continue
            self.rows_data.append(row)
            self.add_row(self._mark(key), *self.cells(row), key=key)
        self.next_cursor = page.cursor
        self._asked_more = False

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if (self.next_cursor is not None and not self._asked_more
                and event.cursor_row >= len(self.rows_data) - PREFETCH_MARGIN):
            self._asked_more = True
            self.post_message(NeedMore(self.VIEW))
