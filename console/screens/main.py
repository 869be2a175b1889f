"""The main screen: header, view bar, the four paged views, filter line and footer.

Live updates come from the app's ledger watcher (``console.watcher``): when it says the
ledger changed, the visible view's page is read again on the ledger thread and rendered
here; on every pulse the ages move. Reads never overlap, never end the app (the watcher
marks the data stale and tries again), and wait while another screen is on top.
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.content import Content
from textual.widgets import ContentSwitcher, Footer, Input, Static

from console import keys
from console.labels import canonical_filter, word
from console.safe_text import escaped, escaped_line
from console.screens.detail import DetailScreen
from console.screens.dialogs import HelpScreen, SnoozeScreen
from console.screens.escalation import EscalationScreen
from console.screens.history import JobHistoryScreen
from console.screens.live import LiveScreen
from console.screens.operator_actions import (
    confirm_job_action,
    confirm_run_action,
    job_controls_available,
    refuse_read_only,
)
from console.widgets.header_bar import HeaderBar
from console.widgets.paged_table import PagedTable
from console.widgets.views import VIEWS
from core import actions
from core.ledger import reads
from core.ledger.page_records import InvalidSpec, JobRow, RunEvidence
from core.ledger.records import Escalation
from core.ledger.sql_store import SqlStore
from core.vocabulary import ActionResult

#: Least seconds between two row counts of one view (the scrollbar size) while data changes.
COUNT_EVERY_S = 5.0
RECOUNT_AFTER_S = 1.0  # a count overtaken by new rows is redone after this


class ViewBar(Static):
    """Which view is showing (number keys switch), the active filter and the row count.

    Always one line: when the filter does not fit, the other views shrink to their numbers,
    then the filter is cut with an ellipsis (never a bare ``filter:``)."""

    DEFAULT_CSS = "ViewBar { height: 1; background: $surface; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }"

    _args: tuple[str, str, int, bool, int] = ("escalations", "", 0, True, 0)

    def show(self, current: str, filter_text: str, total: int, exact: bool, row: int = 0) -> None:
        self._args = (current, filter_text, total, exact, row)
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        current, filter_text, total, exact, row = self._args
        width = self.content_region.width or 10_000
        count = f" {row + 1 if total else 0}/{'' if exact else '~'}{total:,}"
        flt = escaped_line(filter_text)
        line = Content("")
        for compact in (False, True):
            parts: list[Content] = []
            for i, cls in enumerate(VIEWS, 1):
                label = f"{i} {cls.TITLE}"
                if cls.VIEW == current:
                    parts.append(Content.styled(f"[{label}]", "bold reverse"))
                else:
                    parts.append(Content.styled(f" {i} " if compact else f" {label} ", "dim"))
            line = Content.assemble(Content(" ").join(parts), (count, "dim"))
            need = line.cell_length + (len("  filter: ") + len(flt) if flt else 0)
            if need <= width:
                break
        if flt:
            room = max(1, width - line.cell_length - len("  filter: "))
            line = Content.assemble(line, ("  filter: ", "bold"), escaped_line(flt, room))
        self.update(line, layout=False)  # one line, always: no layout pass (a full-screen relayout per key)


class Preview(Static):
    """Two lines under the table about the cursor row, the why first: the supervisor's reason
    (what the columns had to cut), then the job's most telling output lines and when."""

    DEFAULT_CSS = "Preview { height: 2; background: $panel; color: $foreground; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }"


class MainScreen(LiveScreen):
    """The console's top level; ``q`` here quits."""

    DEFAULT_CSS = """
    MainScreen { layout: vertical; }
    MainScreen ContentSwitcher { height: 1fr; }
    MainScreen PagedTable { height: 1fr; max-height: 100%; }
    MainScreen #filter { display: none; height: 1; border: none; padding: 0 1; }
    MainScreen #filter.-active { display: block; }
    """

    SCOPE = "main"
    BINDINGS = keys.bindings(SCOPE)

    def __init__(self) -> None:
        super().__init__()
        self.view = "escalations"
        self.filter_text = ""
        #: view → (column key, descending) it is sorted by (``S`` cycles; absent: its own order)
        self.sorts: dict[str, tuple[str, bool]] = {}
        self.paused = False
        self.follow = False
        self._loaded: set[str] = set()
        self._counted: dict[str, float] = {}  # view → monotonic time of its last row count
        self._counting: set[str] = set()
        self._recount_at: dict[str, float] = {}  # view → monotonic time a count is to be redone
        self._changes = 0  # how many reads saw the ledger change; a count begun before one is stale
        self._evidence: dict[int, RunEvidence | None] = {}  # run id → run_evidence (preview's why)
        self._evidence_wanted: set[int] = set()
        self._evidence_stale: set[int] = set()  # run ids to read again (still shown meanwhile)
        # Jobs → enter → that job's outcomes: (jobs cursor row, filter before) for esc.
        self._back_to_jobs: tuple[int, str] | None = None


    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield ViewBar(id="viewbar")
        with ContentSwitcher(initial="escalations"):
            for cls in VIEWS:
                yield cls(id=cls.VIEW)
        yield Preview("", markup=False, id="preview")
        yield Input(placeholder="filter: job:NAME state:S kind:K host:H text  (enter applies, esc clears)", id="filter")
        yield Footer(compact=True)

    @property
    def table(self) -> PagedTable[Any]:
        return self.query_one(f"#{self.view}", PagedTable)

    # -- live data -------------------------------------------------------------------------
    def on_mount(self) -> None:
        self._render_bars()
        self.table.focus()

    def header_flags(self) -> tuple[bool, bool]:
        return self.paused, self.follow

    def tick_ages(self) -> None:
        """Ages, "next run" and "last seen" move every second without a read: on the watcher's
        pulse, the visible table redraws against the console's clock when a new second began
        (the rows keep the ``now`` they were read with for everything else)."""
        table = self.table
        now = self.wk.now()
        if table.loaded_once and int(now) != int(table.now):
            table.now = now
            table.refresh_ages()
            self._render_bars()

    async def on_ledger(self, refresh: bool, committed: bool) -> None:
        self.tick_ages()
        for view, at in list(self._recount_at.items()):
            if time.monotonic() >= at:
                del self._recount_at[view]
                self._maybe_count(self.query_one(f"#{view}", PagedTable), force=True, changed=True)
        await self.refresh_data(changed=refresh, committed=committed)

    async def refresh_data(self, *, force: bool = False, changed: bool = False, committed: bool = False) -> None:
        """Read the visible view's page and render it: when ``force``d, when the view has not
        been read yet, or when the ledger ``changed`` (not while paused). ``committed``: the
        watcher saw a commit (the preview's output tails are read again). A failed read keeps
        the rows shown and asks the watcher to look (it marks the header stale)."""
        now = self.wk.now()
        table = self.table
        flt = reads.parse_filter(canonical_filter(self.filter_text))
        if table.VIEW in self.sorts:
            column, desc = self.sorts[table.VIEW]
            flt = replace(flt, sort=column, desc=desc)
        if flt == table.flt:
            flt = table.flt  # same filter, same object: reads begun under it still apply
        table.flt = flt
        if committed:
            self._changes += 1
            # A run may have ended, or its outcome been judged: read the evidence again, but
            # keep showing what was read until the new read lands (the preview never flips
            # to "no output recorded yet" for a run that printed).
            self._evidence_stale.update(self._evidence)
        want_rows = not self.paused and (force or table.VIEW not in self._loaded)
        if not (want_rows or (not self.paused and changed)):
            self._render_bars()
            return
        start, limit = table.window_request()
        try:
            page = await self.wk.reader.call(
                lambda ledger: table.fetch(ledger, now=now, offset=start, limit=limit, flt=flt))
        except Exception:
            self.wk.watcher.wake()
            self._render_bars()
            return
        if table.flt is flt:
            table.show(page, now, start=start, limit=limit, follow=self.follow)
            self._loaded.add(table.VIEW)
            self._maybe_count(table, force=want_rows, changed=committed or force)
        self._render_bars()

    def _maybe_count(self, table: PagedTable, *, force: bool, changed: bool) -> None:
        """Size the scrollbar exactly, on the count thread, when the loaded window does not
        already tell (a short page does): after a (re)load, then at most every
        ``COUNT_EVERY_S`` while data changes. Never on every poll."""
        if table.total_exact or table.VIEW in self._counting:
            return
        last = self._counted.get(table.VIEW)
        if not force and last is not None and (not changed or time.monotonic() - last < COUNT_EVERY_S):
            return
        self._counting.add(table.VIEW)
        self.run_worker(self._count(table, table.flt), group="count", exit_on_error=False)

    async def _count(self, table: PagedTable, flt: reads.Filter | None) -> None:
        now = self.wk.now()
        changes = self._changes
        try:
            n = await self.wk.counter.call(lambda ledger: table.count(ledger, now=now, flt=flt))
        except Exception:  # the header shows the ledger trouble; the count is tried again
            self._recount_at[table.VIEW] = time.monotonic() + RECOUNT_AFTER_S
            return
        finally:
            self._counting.discard(table.VIEW)
            self._counted[table.VIEW] = time.monotonic()
        if table.flt is not flt:
            self._maybe_count(table, force=True, changed=True)  # the filter changed meanwhile
            return
        if changes != self._changes:
            # Rows arrived while counting: the window already shifted the total, and this
            # count may predate them. Keep the larger figure as an estimate and count again
            # shortly rather than pin a stale figure as exact.
            table.set_total(max(n, table.total), exact=False)
            self._render_bars()
            self._recount_at[table.VIEW] = time.monotonic() + RECOUNT_AFTER_S
            return
        table.set_total(n)
        self._render_bars()

    def _render_bars(self) -> None:
        self.draw_header()
        table = self.table
        self.query_one(ViewBar).show(self.view, self.filter_text, table.total, table.total_exact, table.cursor_row)
        row = table.current()
        self.query_one(Preview).update(self._preview(table, row), layout=False)  # fixed height: no relayout

    def _preview(self, table: PagedTable[Any], row: Any) -> Text | str:
        if row is None:
            return ""
        first = table.preview(row) or Text("")
        run_id = table.run_id_of(row)
        ev = self._evidence.get(int(run_id)) if run_id is not None else None
        if run_id is not None and (int(run_id) not in self._evidence or int(run_id) in self._evidence_stale):
            self._fetch_evidence(int(run_id))
        second = table.evidence_line(row, ev)
        if second is None:
            return first
        return Text("\n", no_wrap=True, overflow="ellipsis", end="").join([first, second])

    def _fetch_evidence(self, run_id: int) -> None:
        """Read the cursor run's output tail once (cached until the ledger changes), on the
        read thread; the preview redraws when it lands."""
        if run_id in self._evidence_wanted:
            return
        self._evidence_wanted.add(run_id)

        async def fetch() -> None:
            try:
                ev = await self.wk.reader.call(lambda ledger: SqlStore(ledger).run_evidence(run_id))
            except Exception:  # the header shows ledger trouble; the next redraw asks again
                return
            finally:
                self._evidence_wanted.discard(run_id)
            self._evidence[run_id] = ev
            self._evidence_stale.discard(run_id)
            self._render_bars()

        self.run_worker(fetch(), group="evidence", exit_on_error=False)

    @on(PagedTable.CursorMoved)
    def _cursor_moved(self) -> None:
        self._render_bars()

    # -- navigation ------------------------------------------------------------------------
    async def action_view(self, view: str, *, keep_back: bool = False) -> None:
        if not keep_back:
            self._back_to_jobs = None
        if view == self.view:
            return
        self.view = view
        self.query_one(ContentSwitcher).current = view
        self.table.focus()
        self._render_bars()
        await self.refresh_data(force=True)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def filter_open(self) -> bool:
        return self.query_one("#filter", Input).has_class("-active")

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("-active")
        box.value = self.filter_text
        box.cursor_position = len(box.value)
        # Now, not later (``focus()`` defers the move behind keys already queued): the keys
        # that follow "/" are routed to the box as they arrive. ``focus()`` as well, in case
        # a screen resuming restores the old focus after this (the palette's "Filter…").
        self.set_focus(box)
        box.focus()

    def action_palette(self) -> None:
        self.app.action_command_palette()

    @on(Input.Submitted, "#filter")
    async def _filter_submitted(self, event: Input.Submitted) -> None:
        self._back_to_jobs = None
        self.filter_text = event.value.strip()
        self._close_filter()
        await self._refilter()

    async def _refilter(self) -> None:
        """The filter changed: every view starts again from its first row."""
        for table in self.query(PagedTable):
            table.reset()
        self._loaded.clear()
        self._counted.clear()
        await self.refresh_data(force=True)

    def _close_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.remove_class("-active")
        self.set_focus(self.table)

    async def action_back(self) -> None:
        box = self.query_one("#filter", Input)
        if box.has_class("-active"):
            box.value = ""
            self._close_filter()
            if self.filter_text:
                self.filter_text = ""
                await self._refilter()
            return
        if self.table.marked:
            self.table.clear_marks()
            return
        if self._back_to_jobs is not None and self.view == "outcomes":
            await self._return_to_jobs()
            return
        if self.filter_text:
            self.filter_text = ""
            await self._refilter()

    def on_key(self, event) -> None:
        # Escape inside the filter box: Input does not bind it, so handle it here.
        if event.key == "escape" and self.query_one("#filter", Input).has_class("-active"):
            event.stop()
            self.run_worker(self.action_back(), exit_on_error=False)

    def action_pause(self) -> None:
        self.paused = not self.paused
        self._render_bars()
        if not self.paused:
            self.read_again()

    def action_sort(self) -> None:
        """``S``: order the table by its next sortable column (``core.ledger.reads.SORTS``),
        left to right in the view's column order, then back to the view's own order."""
        table = self.table
        sortable = reads.SORTS.get(table.VIEW, {})
        order = [c.key for c in table.COLUMNS if c.key in sortable]
        if not order:
            return
        current = self.sorts.get(table.VIEW, ("", False))[0]
        nxt = order[order.index(current) + 1] if current in order and order.index(current) + 1 < len(order) \
            else ("" if current else order[0])
        if nxt:
            self.sorts[table.VIEW] = (nxt, sortable[nxt][1])
            self.notify(f"sorted by {nxt} {'▼' if sortable[nxt][1] else '▲'} (S: next column)", markup=False,
                        timeout=2)
        else:
            self.sorts.pop(table.VIEW, None)
            self.notify("the view's own order (S sorts again)", markup=False, timeout=2)
        self.run_worker(self.refresh_data(force=True), exit_on_error=False)

    def action_follow(self) -> None:
        self.follow = not self.follow
        self._render_bars()

    def action_mark(self) -> None:
        self.table.toggle_mark()

    async def show_job_outcomes(self, name: str) -> None:
        """The outcomes view filtered to one job (enter on the jobs view, or the palette).
        From the jobs view, ``esc`` returns there with its cursor and filter as they were."""
        back = (self.table.cursor_row, self.filter_text) if self.view == "jobs" else None
        self.filter_text = f"job:{name}"
        for table in self.query(PagedTable):
            table.reset()
        self._loaded.clear()
        self._counted.clear()
        if self.view == "outcomes":
            self._back_to_jobs = back
            await self.refresh_data(force=True)
        else:
            await self.action_view("outcomes")
            self._back_to_jobs = back

    async def _return_to_jobs(self) -> None:
        """``esc`` in outcomes opened from a job: back to the jobs view, its cursor restored."""
        assert self._back_to_jobs is not None
        row, self.filter_text = self._back_to_jobs
        self._back_to_jobs = None
        for table in self.query(PagedTable):
            table.reset()
        self._loaded.clear()
        self._counted.clear()
        # Whichever read lands first (this switch's or the live poll's) places the cursor.
        self.query_one("#jobs", PagedTable).restore = row
        await self.action_view("jobs")
        self._render_bars()

    def _selected_job(self) -> str | None:
        """The job the cursor is on: the jobs view's row, or the job an outcomes filter names
        (None on a spec file that never loaded: it has no history)."""
        table = self.table
        row = table.current()
        return None if row is None else table.job_of(row)

    def action_history(self) -> None:
        job = self._selected_job()
        if job is None:
            self.notify("no job selected", severity="warning", markup=False)
            return
        self.open_history(job)

    def open_history(self, job: str) -> None:
        """Push the job history screen for ``job`` (key ``h``, or the palette)."""
        self.app.push_screen(JobHistoryScreen(job))

    def action_pause_job(self) -> None:
        row = self.table.current()
        if self.view != "jobs" or not isinstance(row, JobRow) or refuse_read_only(self) \
                or self._refuse_changed_row():
            return
        confirm_job_action(self, "pause", row.name, self._after_run_action, paused=row.paused_at is not None)

    def action_trigger(self) -> None:
        row = self.table.current()
        if self.view != "jobs" or not isinstance(row, JobRow) or refuse_read_only(self) \
                or self._refuse_changed_row():
            return
        confirm_job_action(self, "trigger", row.name, self._after_run_action)

    def palette_extra(self, jobs: list[str]) -> list[tuple[str, Any]]:
        """The palette's "Outcomes of job X" for each of ``jobs`` (names sanitised); its
        "History of job X" entries are the app's, offered on every screen."""
        return [(f"Outcomes of job {escaped_line(name, 60)}", partial(self.show_job_outcomes, name)) for name in jobs]

    async def action_quit(self) -> None:
        await self.app.action_quit()

    @on(PagedTable.Selected)
    async def _open(self, event: PagedTable.Selected) -> None:
        table = self.table
        row = table.current()
        if row is None:
            return
        if isinstance(row, InvalidSpec):
            self.notify(escaped(row.text), severity="warning", markup=False, timeout=8)
            return
        if isinstance(row, JobRow):
            await self.show_job_outcomes(row.name)
            return
        if isinstance(row, Escalation):
            self.app.push_screen(EscalationScreen(row.id))
            return
        run_id = table.run_id_of(row)
        if run_id is None:
            self.notify("no run recorded for this row", severity="warning", markup=False)
            return
        self.app.push_screen(DetailScreen(int(run_id)))

    # -- actions ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only_hides(action):
            return False
        if self.is_mounted and self.filter_open():
            # The filter box owns the keyboard: "/" and every letter go into it. Only a key
            # typed *before* "/" that was still on its way through the table can reach a
            # binding here; it is dropped rather than acting behind the operator's back.
            return action == "back"
        esc_only = {"acknowledge", "snooze", "resolve"}
        # Hidden, not merely dimmed: the footer lists only what this view can do.
        if action in esc_only and self.view != "escalations":
            return False
        if action in {"retry", "abandon"} and self.view == "jobs":
            return False
        if action in {"pause_job", "trigger"}:
            return self.view == "jobs" and job_controls_available()
        if action == "sort":
            return self.view in reads.SORTS
        if action == "history":
            return self.view == "jobs" or (self.view == "outcomes" and self.filter_text.startswith("job:"))
        return True

    def _refuse_read_only(self) -> bool:
        return refuse_read_only(self)

    def report(self, results: list[ActionResult], verb: str) -> None:
        """Show what an action did; every message is our text plus sanitised ledger text."""
        if not results:
            self.notify(f"nothing selected to {verb}", severity="warning", markup=False)
            return
        ok = [r for r in results if r.ok]
        failed = [r for r in results if not r.ok]
        if len(results) == 1:
            msg = results[0].message
        else:
            msg = f"{verb}: {len(ok)} done, {len(failed)} refused"
            if failed:
                msg += " — " + "; ".join(r.message for r in failed[:3])
        self.notify(escaped(msg), severity="information" if not failed else "warning", markup=False,
                    timeout=6 if failed else 3)

    def _refuse_changed_row(self) -> bool:
        """Refuse an action key that lands right after a live update swapped the selected row."""
        if self.table.just_changed() and not self.table.marked:
            # Name the row now under the cursor: the one acted on was replaced (it ended and
            # left the list, or the list re-sorted), and the key must not land on another.
            cur = self.table.current()
            now_on = ""
            if cur is not None and getattr(cur, "id", None) is not None:
                job = getattr(cur, "job", None)
                now_on = f" (now on #{cur.id}{' ' + str(job) if job else ''})"
            self.notify(escaped(f"the selected row just changed{now_on} — check it and press again"),
                        severity="warning", markup=False)
            return True
        return False

    async def _escalation_action(self, verb: str, call) -> None:
        if self._refuse_read_only() or self._refuse_changed_row():
            return
        rows = self.table.selection()
        op = self.wk.config.operator
        ids = [r.id for r in rows if isinstance(r, Escalation)]

        now = self.wk.now()

        def work(ledger) -> list[ActionResult]:
            return [call(actions, ledger, i, op, now) for i in ids]

        table = self.table
        table.pinned = table.cursor_row  # rows re-sort: the next one takes this place
        try:
            try:
                results = await self.wk.actor.call(work)
            except Exception as exc:
                self.notify(escaped(f"{verb} failed: {exc}"), severity="error", markup=False)
                return
            self.report(results, verb)
            table.clear_marks()
            await self.refresh_data(force=True)
        finally:
            # From now on live updates follow the row that took the place (not whatever
            # arrives on top), so the next key acts on the row the operator sees selected.
            table.pinned, table.touched = None, True

    async def action_acknowledge(self) -> None:
        await self._escalation_action("acknowledge", lambda m, led, i, op, now: m.acknowledge(led, i, op, now=now))

    async def action_resolve(self) -> None:
        await self._escalation_action("resolve", lambda m, led, i, op, now: m.resolve(led, i, op, now=now))

    def action_snooze(self) -> None:
        if self._refuse_read_only() or not self.table.selection():
            self.report([], "snooze") if not self.wk.config.read_only else None
            return
        rows = self.table.selection()
        if len(rows) == 1 and isinstance(rows[0], Escalation):
            one = rows[0]
            what = (f"{word('severity', one.severity)} {escaped_line(one.job, 30)} · "
                    f"{escaped_line(one.kind, 24)} (#{one.id})")
        else:
            what = f"{len(rows)} marked escalations"

        async def chosen(seconds: float | None) -> None:
            if seconds is None:
                return
            until = self.wk.now() + seconds
            await self._escalation_action("snooze", lambda m, led, i, op, now: m.snooze(led, i, op, until, now=now))

        self.app.push_screen(SnoozeScreen(what), chosen)

    def _target_run(self) -> tuple[int, str] | None:
        """(run id, its job) of the cursor row, None (said) when it has no run."""
        if self._refuse_changed_row():
            return None
        table = self.table
        row = table.current()
        run_id = table.run_id_of(row) if row is not None else None
        if run_id is None:
            self.notify("no run selected", severity="warning", markup=False)
            return None
        return int(run_id), table.job_of(row) or "?"

    def action_retry(self) -> None:
        if self._refuse_read_only():
            return
        target = self._target_run()
        if target:
            confirm_run_action(self, "retry", target[0], target[1], self._after_run_action,
                               before=self._pin)

    def action_abandon(self) -> None:
        if self._refuse_read_only():
            return
        target = self._target_run()
        if target:
            confirm_run_action(self, "abandon", target[0], target[1], self._after_run_action,
                               before=self._pin)

    def _pin(self) -> None:
        self.table.pinned = self.table.cursor_row

    async def _after_run_action(self, **kw: Any) -> None:
        try:
            await self.refresh_data(**kw)
        finally:
            for table in self.query(PagedTable):
                if table.pinned is not None:
                    table.pinned, table.touched = None, True
