"""A Line-API table (Toolong's approach): draws only the visible lines and holds only the
rows around them — the visible page plus a margin — read by offset from ``core.ledger.reads``.

Subclasses name their columns, the ``core.ledger.reads`` function that reads a page, how a row
becomes cells and its key. The table keeps a cursor row (absolute index), selection marks
(by row key, so they survive scrolling), and a total row count that sizes the scrollbar:
known exactly when a page comes back short, otherwise an estimate that the screen corrects
now and then with ``core.ledger.reads.count_rows`` on its own thread (never on every poll).

Live refreshes replace the loaded window while keeping the cursor on the same row key and
the scroll offset where it was; ``follow`` keeps the selected row where it is on screen.
Until the operator moves the cursor it stays on the top row (new rows arriving above do not
push it down); while ``pinned`` is set (an operator action that re-sorts rows) the cursor
stays at that position, so the next row takes the place of the one acted on. A view with no
rows says so in one line (``EMPTY``), never a blank table.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console import evidence, keys
from console.safe_text import escaped_line
from core.ledger.page_records import RunEvidence
from core.ledger.reads import Filter, Page
from core.ledger.sql_store import SqlStore

#: The widest a column other than the one that takes the rest (Why, Reason) grows to fit its
#: content: a 60-character job name does not push the reason off the screen.
NAME_CAP = 32
#: Rows read beyond the visible ones, above and below.
MARGIN = 40
#: Rows left between the visible edge and the loaded edge before the next window is read.
PREFETCH = 10


@dataclass(frozen=True)
class Column:
    """One table column: ``width`` cells, plus a share of spare width when ``flex`` > 0;
    left out when the table is narrower than ``min_table`` cells, and, when ``fleet``, while
    the ledger's runners all ran on one host (a lone host's table stays as it was)."""

    key: str
    label: str
    width: int
    flex: int = 0
    min_table: int = 0
    fleet: bool = False


#: A view's row: the record its page read returns (``core.ledger.page_records``).
R = TypeVar("R")


class PagedTable(ScrollView, Generic[R], can_focus=True):
    """Base for the four main views. ``VIEW`` names the view ("escalations", …); ``R`` is
    the record type of its rows."""

    VIEW: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    COLUMNS: ClassVar[tuple[Column, ...]] = ()
    #: ``core.ledger.reads`` page reader: fn(ledger, *, now, offset, limit, flt) -> Page
    FETCH: ClassVar[Callable[..., Page]]
    #: The one line shown when the view has no rows (and no filter is set); it fits 80
    #: columns (a test checks).
    EMPTY: ClassVar[str] = "Nothing here yet."

    BINDINGS = keys.bindings("table")

    COMPONENT_CLASSES = {"table--header", "table--cursor", "table--marked", "table--loading"}

    DEFAULT_CSS = """
    PagedTable {
        height: 1fr;
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        overflow-y: scroll;
        scrollbar-size-vertical: 1;
        & > .table--header { background: $panel; color: $foreground; text-style: bold; }
        & > .table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .table--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .table--marked { text-style: bold; }
        & > .table--loading { color: $text-muted; }
    }
    """

    class Selected(Message):
        """Enter (or a click on the cursor row) on ``table``'s cursor row."""

        def __init__(self, table: PagedTable) -> None:
            super().__init__()
            self.table = table

    class CursorMoved(Message):
        """The cursor moved to another row (the view bar shows the position)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows_data: list[R] = []  # the loaded window
        self.window_start = 0
        self.more = False  # rows exist past the loaded window
        self.total = 0
        self.total_exact = True
        self.cursor_row = 0
        self.touched = False  # the operator moved the cursor since the view (re)loaded
        self.pinned: int | None = None  # hold the cursor at this row while an action re-sorts
        self.restore: int | None = None  # put the cursor here when the next rows arrive (back navigation)
        self.want_bottom = False  # G pressed before the row count was known: go there when it is
        self.marked: dict[str, R] = {}
        self.now = 0.0
        #: Hosts the ledger's runners ran on (``fleet`` columns show from 2), and as drawn.
        self.hosts = 1
        self._hosts_shown = 1
        self.flt: Filter | None = None
        self.loaded_once = False
        self._widths: tuple[int, ...] = ()
        self._lines: LRUCache[tuple, Strip] = LRUCache(512)
        #: ``cells`` per (row, ``now``): a window's column widths and its lines read every
        #: visible row's cells, and the next window (PgDn) holds most rows again; the rows
        #: are frozen records, so an equal row draws the same cells.
        self._cells: LRUCache[tuple, list[Text]] = LRUCache(2048)
        self._gen = 0
        self._natural: dict[str, int] = {}
        self._natural_gen = -1
        #: ``_column_widths`` of the last (width, generation, hosts, rows loaded) asked for:
        #: every line of a frame asks for the same widths.
        self._widths_key: tuple[int, int, int, bool] | None = None
        self._styles: dict[str, Style] = {}
        self._loading: tuple[int, int] | None = None
        self._want: tuple[int, int] | None = None
        self.changed_under_cursor_at = -1e9  # monotonic time a live update swapped the cursor's row

    # -- subclass API ------------------------------------------------------------------
    def key_of(self, row: R) -> str:
        """What names ``row`` across reads (the cursor and the marks follow it)."""
        raise NotImplementedError

    def cells(self, row: R) -> list[Text]:
        raise NotImplementedError

    def run_id_of(self, row: R) -> int | None:
        """The run an enter / retry / abandon on this row applies to (None: no run)."""
        return None

    def job_of(self, row: R) -> str | None:
        """The job ``row`` belongs to (None: none)."""
        return None

    def preview(self, row: R) -> Text | None:
        """One line about ``row`` shown under the table (what the columns had to cut)."""
        return None

    def evidence_line(self, row: R, ev: RunEvidence | None) -> Text | None:
        """The preview's second line: the job's most telling output lines for the cursor row's
        run (``ev``: ``core.ledger.reads.run_evidence``), then ``meta`` (when); None when the
        view has no run for the row."""
        meta = self.meta(row)
        if self.run_id_of(row) is None:
            return Text(f"└ {meta}", style="dim", no_wrap=True, overflow="ellipsis", end="") if meta else None
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        # Shown even when the reason quotes them: the first line is cut at the screen's edge.
        lines = evidence.telling_lines(ev.stderr_end if ev else None, ev.stdout_end if ev else None, n=2, width=100)
        out.append("└ ", style="dim")
        if lines:
            out.append(" / ".join(lines), style="italic")
        elif ev is None:
            out.append("(no output recorded yet)", style="dim")
        else:
            out.append("(the run printed nothing)", style="dim")
        if meta:
            out.append(f"  · {meta}", style="dim")
        return out

    def meta(self, row: R) -> str:
        """What comes after the evidence on the preview's second line (e.g. "last 5m ago")."""
        return ""

    def empty_text(self) -> str:
        """The line a view without rows shows (sanitised: it may quote the filter)."""
        if self.flt is not None and not self.flt.empty:
            return f"No rows match the filter {escaped_line(self.flt.raw, 30)!r} — esc clears it."
        return self.EMPTY

    # -- geometry ------------------------------------------------------------------------
    @property
    def page_height(self) -> int:
        """Rows visible at once (the header takes one line)."""
        return max(1, self.scrollable_content_region.height - 1)

    def window_request(self) -> tuple[int, int]:
        """(offset, limit) of the rows to read for what is visible now, margin included."""
        top = int(self.scroll_y)
        start = max(0, top - MARGIN)
        return start, (top - start) + self.page_height + MARGIN

    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, self.total + 1)

    # -- state -----------------------------------------------------------------------------
    def row_at(self, index: int) -> R | None:
        i = index - self.window_start
        return self.rows_data[i] if 0 <= i < len(self.rows_data) else None

    def current(self) -> R | None:
        return self.row_at(self.cursor_row)

    def just_changed(self, within: float = 1.0) -> bool:
        """True when a live update swapped the row under the cursor less than ``within``
        seconds ago (and the operator has not moved since)."""
        return time.monotonic() - self.changed_under_cursor_at < within

    def selection(self) -> list[R]:
        """Marked rows if any, else the row under the cursor."""
        if self.marked:
            return list(self.marked.values())
        cur = self.current()
        return [cur] if cur else []

    def toggle_mark(self) -> None:
        cur = self.current()
        if cur is None:
            return
        key = self.key_of(cur)
        if key in self.marked:
            del self.marked[key]
        else:
            self.marked[key] = cur
        self._invalidate()
        self.action_cursor(1)

    def clear_marks(self) -> None:
        self.marked.clear()
        self._invalidate()

    def set_total(self, total: int, *, exact: bool = True) -> None:
        self.total = max(0, total)
        self.total_exact = exact
        self._update_virtual_size()
        if exact and self.want_bottom:
            self.want_bottom = False
            self.move_cursor(self.total - 1)
        elif self.cursor_row >= self.total:
            self.move_cursor(self.total - 1)
        self._invalidate()

    def reset(self) -> None:
        """Forget loaded rows and position (new filter)."""
        self.rows_data, self.window_start, self.more = [], 0, False
        self.total, self.total_exact, self.cursor_row = 0, True, 0
        self.loaded_once = False
        self.touched, self.restore, self.want_bottom = False, None, False
        self.scroll_to(y=0, animate=False, immediate=True)
        self._update_virtual_size()
        self._invalidate()

    # -- data in -------------------------------------------------------------------------
    def fetch(self, ledger: Any, *, now: float, offset: int, limit: int, flt: Filter | None) -> Page[R]:
        if any(c.fleet for c in self.COLUMNS):  # one small read (the runners table) per page read
            self.hosts = SqlStore(ledger).host_count()
        return type(self).FETCH(ledger, now=now, offset=offset, limit=limit, flt=flt)

    def count(self, ledger: Any, *, now: float, flt: Filter | None) -> int:
        """How many rows the view lists under ``flt`` (the scrollbar's size; run on the count
        thread, never on every poll)."""
        return SqlStore(ledger).count_rows(self.VIEW, now=now, flt=flt)

    def show(self, page: Page[R], now: float, *, start: int = 0, limit: int | None = None,
             follow: bool = False) -> None:
        """Put a freshly read window (rows ``start``… of the view) on screen, keeping the
        cursor on the same row key."""
        self.now = now
        old_key = None
        cur = self.current()
        if cur is not None:
            old_key = self.key_of(cur)
        old_keys = {self.key_of(r): self.window_start + i for i, r in enumerate(self.rows_data)}
        rows = page.rows
        new_keys = [self.key_of(r) for r in rows]
        # A first load draws something new even when it brought no rows: the empty text
        # ("No rows match the filter …") replaces the blank drawn while loading.
        same = (self.loaded_once and start == self.window_start and rows == self.rows_data
                and self.hosts == self._hosts_shown)
        self._hosts_shown = self.hosts
        # Rows added above: the shift of any row both windows hold.
        shift = 0
        for i, k in enumerate(new_keys):
            if k in old_keys:
                shift = (start + i) - old_keys[k]
                break
        self.rows_data = rows
        self.window_start = start
        self.more = page.cursor is not None if limit is None else len(rows) >= limit
        for k in list(self.marked):  # refresh marked rows that are loaded
            if k in new_keys:
                self.marked[k] = rows[new_keys.index(k)]
        if self.more:
            total = (self.total + shift) if self.loaded_once else 0
            self.total = max(total, start + len(rows) + 1)
            if not self.loaded_once:
                self.total_exact = False
        elif rows or start == 0:
            self.total, self.total_exact = start + len(rows), True
        self.loaded_once = True
        self._update_virtual_size()
        if self.restore is not None and rows:
            target, self.restore, self.touched = self.restore, None, True
        elif self.want_bottom and self.total_exact:
            target, self.want_bottom = self.total - 1, False
        elif self.pinned is not None:
            target = self.pinned  # an action re-sorted the rows: the next one takes this place
        elif not self.touched:
            target = 0  # never moved: stay on the top row while rows arrive
        elif old_key is not None and old_key in new_keys:
            target = start + new_keys.index(old_key)
        else:
            target = self.cursor_row
        delta = target - self.cursor_row
        self.cursor_row = max(0, min(target, self.total - 1))
        now_cur = self.current()
        if self.pinned is None and old_key is not None and now_cur is not None and self.key_of(now_cur) != old_key:
            # A live update put another row under the cursor: an action key pressed in the
            # same instant must not land on a row the operator has not seen yet.
            self.changed_under_cursor_at = time.monotonic()
        if follow and delta:
            self.scroll_to(y=self.scroll_y + delta, animate=False, immediate=True)
        if not same:
            self._invalidate()
        self._ensure_window()

    async def _load(self, start: int, limit: int) -> None:
        reader = getattr(self.app, "reader", None)
        if reader is None:
            return
        flt, now = self.flt, self.now
        try:
            page = await reader.call(lambda ledger: self.fetch(ledger, now=now, offset=start, limit=limit, flt=flt))
        except Exception:  # the poll marks the data stale; scrolling again retries
            page = None
        self._loading = None
        if page is not None and flt is self.flt:
            self.show(page, now, start=start, limit=limit)
        if self._want is not None:
            want, self._want = self._want, None
            self._request(*want)

    def _request(self, start: int, limit: int) -> None:
        if self._loading is not None:
            self._want = (start, limit)
            return
        self._loading = (start, limit)
        self.run_worker(self._load(start, limit), group="rows", exit_on_error=False)

    def _ensure_window(self) -> None:
        """Read the window around what is visible when it is not (nearly) all loaded."""
        if not self.loaded_once or not self.is_mounted:
            return
        top = int(self.scroll_y)
        bottom = min(self.total, top + self.page_height)
        lo, hi = self.window_start, self.window_start + len(self.rows_data)
        need_up = top < lo or (lo > 0 and top - lo < PREFETCH)
        need_down = bottom > hi or (self.more and hi - bottom < PREFETCH)
        if need_up or need_down:
            self._request(*self.window_request())

    # -- movement --------------------------------------------------------------------------
    def move_cursor(self, row: int, *, scroll: bool = True) -> None:
        row = max(0, min(row, self.total - 1))
        if row != self.cursor_row:
            old, self.cursor_row = self.cursor_row, row
            for r in (old, row):  # only the two lines whose look changed
                self.refresh_line(r + 1)
            self.post_message(self.CursorMoved())
        if scroll:
            self.scroll_to_cursor()

    def scroll_to_cursor(self) -> None:
        top, h = int(self.scroll_y), self.page_height
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + h:
            self.scroll_to(y=self.cursor_row - h + 1, animate=False, immediate=True)

    def action_cursor(self, step: int) -> None:
        self.touched, self.want_bottom = True, False
        self.changed_under_cursor_at = -1e9
        self.move_cursor(self.cursor_row + step)

    def action_page(self, direction: int) -> None:
        self.touched, self.want_bottom = True, False
        h = self.page_height
        self.scroll_to(y=max(0, self.scroll_y + direction * h), animate=False, immediate=True)
        self.move_cursor(self.cursor_row + direction * h)

    def action_scroll_top(self) -> None:
        self.touched, self.want_bottom = True, False
        self.move_cursor(0)

    def action_scroll_bottom(self) -> None:
        self.touched = True
        # Until the count lands the total is a lower bound; the cursor follows it there.
        self.want_bottom = not self.total_exact
        self.move_cursor(self.total - 1)

    def action_select(self) -> None:
        if self.current() is not None:
            self.post_message(self.Selected(self))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        row = int(self.scroll_y) + offset.y - 1
        if row >= self.total:
            return
        self.touched, self.want_bottom = True, False
        if row == self.cursor_row or event.chain > 1:
            self.move_cursor(row, scroll=False)
            self.action_select()
        else:
            self.move_cursor(row, scroll=False)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._ensure_window()

    def on_resize(self) -> None:
        self._update_virtual_size()
        self._invalidate()
        self._ensure_window()

    def on_focus(self) -> None:
        self._invalidate()

    def on_blur(self) -> None:
        self._invalidate()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cells.clear()
        self._invalidate()

    # -- rendering ---------------------------------------------------------------------
    def refresh_ages(self) -> None:
        """Redraw the visible lines after ``now`` moved (ages tick); the rows stay."""
        self._invalidate()

    def _cells_of(self, row: R) -> list[Text]:
        """``cells(row)``, made once per row and ``now`` (``_cells``); a row that cannot be
        hashed (a field holding a list) is drawn afresh each time."""
        try:
            key = (row, self.now)
            got = self._cells.get(key)
        except TypeError:
            return self.cells(row)
        if got is None:
            got = self._cells[key] = self.cells(row)
        return got

    def _invalidate(self) -> None:
        self._gen += 1
        self._styles.clear()
        self.refresh()

    def _style(self, name: str) -> Style:
        """Component (or parsed Rich) styles, cached until the next invalidation."""
        got = self._styles.get(name)
        if got is None:
            if name == "":
                got = self.rich_style
            elif name.startswith("table--"):
                got = self.get_component_rich_style(name, partial=name == "table--marked")
            else:
                got = Style.parse(" ".join(self._theme_colour(w) for w in name.split()))
            self._styles[name] = got
        return got

    #: Cell colour names (``console.widgets.cells``) → theme variables, so each theme (and its
    #: reduction to 256 or 16 colours) decides how a state looks; words and symbols carry
    #: the meaning either way.
    THEME_COLOURS: ClassVar[dict[str, str]] = {"red": "error", "yellow": "warning", "green": "success",
                                               "cyan": "primary", "magenta": "accent"}

    def _theme_colour(self, word: str) -> str:
        var = self.THEME_COLOURS.get(word)
        if var is None:
            return word
        value = self.app.theme_variables.get(var)
        if not value:
            return word
        try:
            from textual.color import Color

            return Color.parse(value).hex6
        except Exception:
            return word

    def _columns(self, width: int) -> tuple[Column, ...]:
        """The columns shown at ``width`` (``min_table`` leaves some out when narrow)."""
        return tuple(c for c in self.COLUMNS if width >= c.min_table and (self.hosts > 1 or not c.fleet))

    def _natural_widths(self) -> dict[str, int]:
        """Per column, the widest cell among the loaded rows (header included), so columns are
        sized to their content: a short Job column gives its room to Owner or Reason."""
        if self._natural_gen != self._gen:
            natural = {c.key: len(c.label) for c in self.COLUMNS}
            for row in self.rows_data:
                for c, t in zip(self.COLUMNS, self._cells_of(row), strict=False):
                    natural[c.key] = max(natural[c.key], t.cell_len)
            self._natural, self._natural_gen = natural, self._gen
        return self._natural

    def _column_widths(self, width: int) -> tuple[int, ...]:
        """Widths at ``width`` cells, sized to the loaded rows' content: a column narrower
        than its minimum shrinks to its widest cell (never below its label); the room left
        then fills the columns whose cells are wider than their width, each whole, the
        smallest need first, and the widest-flex column (Why, Reason) last (so a job name, a
        kind and an owner are whole before a long reason takes the rest); anything still
        left goes to the flexible columns by ``flex``."""
        key = (width, self._gen, self.hosts, bool(self.rows_data))
        if key != self._widths_key:
            self._widths, self._widths_key = self._fit_columns(width), key
        return self._widths

    def _fit_columns(self, width: int) -> tuple[int, ...]:
        """``_column_widths`` computed afresh."""
        cols = (Column("sel", " ", 1),) + self._columns(width)
        avail = max(0, width - 2 * len(cols))
        natural = self._natural_widths() if self.rows_data else {}
        widths = []
        for c in cols:
            n = natural.get(c.key)
            widths.append(max(len(c.label), min(c.width, n)) if n is not None else c.width)
        spare = max(0, avail - sum(widths))
        lack = {i: natural[c.key] - widths[i] for i, c in enumerate(cols)
                if c.flex and natural.get(c.key, 0) > widths[i]}
        # The widest-flex column (Why, Reason) takes what is left; every other lacking column
        # (Job, Kind, Owner …) first gets its whole content, smallest need first, so a short
        # name is never cut while a long sentence has cells to spare.
        rest = max((i for i, c in enumerate(cols) if c.flex), key=lambda i: (cols[i].flex, i), default=None)
        for i in sorted(lack, key=lambda i: (i == rest, lack[i])):
            give = min(lack[i], spare, spare if i == rest else NAME_CAP - widths[i])
            widths[i] += max(0, give)
            give = max(0, give)
            spare -= give
        flex = sum(c.flex for c in cols) or 1
        extra = [spare * c.flex // flex for c in cols]
        return tuple(w + e for w, e in zip(widths, extra, strict=True))

    def _resolve(self, style: str | Style, base: Style) -> Style:
        if isinstance(style, Style):
            return base + style
        return base + self._style(style) if style else base

    def _segments(self, texts: list[Text], widths: tuple[int, ...], base: Style) -> list[Segment]:
        segs: list[Segment] = []
        for t, w in zip(texts, widths, strict=False):
            plain = t.plain
            if len(plain) > w:
                plain = plain[: max(0, w - 1)] + "…" if w > 1 else plain[:w]
            style = self._resolve(t.style, base)
            segs.append(Segment(" ", base))
            if t.spans:  # a cell of several colours (the jobs view's sparkline)
                pos = 0
                for span in sorted(t.spans, key=lambda sp: sp.start):
                    if span.start >= len(plain):
                        break
                    if span.start > pos:
                        segs.append(Segment(plain[pos:span.start], style))
                    segs.append(Segment(plain[span.start:span.end], self._resolve(span.style, style)))
                    pos = max(pos, span.end)
                segs.append(Segment(plain[pos:].ljust(w - min(pos, len(plain))), style))
            else:
                segs.append(Segment(plain.ljust(w), style))
            segs.append(Segment(" ", base))
        return segs

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        widths = self._column_widths(width)
        if y == 0:
            sort = (self.flt.sort, self.flt.desc) if self.flt is not None else ("", False)
            key: tuple[object, ...] = ("header", widths, self._gen, sort)
            if key not in self._lines:
                style = self._style("table--header")
                # The sorted column's heading says so: ▲ ascending, ▼ descending.
                labels = [Text(" ")] + [Text(c.label + ("▼" if sort[1] else "▲") if c.key == sort[0] else c.label)
                                        for c in self._columns(width)]
                self._lines[key] = Strip(self._segments(labels, widths, style)).adjust_cell_length(width, style)
            return self._lines[key]
        index = int(self.scroll_y) + y - 1
        base = self._style("")
        if index >= self.total:
            if self.total == 0 and self.loaded_once and y == 1:
                return Strip([Segment("  " + self.empty_text(), base)]).adjust_cell_length(width, base)
            return Strip.blank(width, base)
        row = self.row_at(index)
        is_cursor = index == self.cursor_row
        rkey = self.key_of(row) if row is not None else None
        key = (index if rkey is None else rkey, is_cursor, widths, self._gen)
        cached = self._lines.get(key)
        if cached is not None:
            return cached
        if row is None:
            style = self._style("table--loading")
            strip = Strip([Segment("  …", style)]).adjust_cell_length(width, base)
        else:
            marked = rkey in self.marked
            if marked:
                base = base + self._style("table--marked")
            shown = self._columns(width)
            cells = self._cells_of(row)
            if len(shown) != len(self.COLUMNS):
                cells = [t for c, t in zip(self.COLUMNS, cells, strict=False) if c in shown]
            texts = [Text("●" if marked else " ", style="bold")] + cells
            segs = self._segments(texts, widths, base)
            if is_cursor:
                cursor = self._style("table--cursor")
                segs = list(Segment.apply_style(segs, post_style=cursor))
                strip = Strip(segs).adjust_cell_length(width, cursor)
            else:
                strip = Strip(segs).adjust_cell_length(width, base)
        self._lines[key] = strip
        return strip
