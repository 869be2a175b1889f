"""Escalation detail: what the escalation is and why, each occurrence (run, when, why), who
acknowledged, snoozed or resolved it and when, and the notifications sent with their
delivery state; while its latest run is still running, that run's output, growing (``l``
follows it). ``enter`` on an occurrence opens that run; ``a`` / ``s`` / ``R`` act on this
escalation. Live like the other screens (it reacts to the app's ledger watcher); every
ledger string goes through ``console.safe_text``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Static

from console import keys
from console.labels import label
from console.safe_text import escaped, escaped_line
from console.screens.detail import LIVE_STATES, DetailScreen, render_output
from console.screens.dialogs import SnoozeScreen
from console.screens.live import LiveScreen
from console.screens.operator_actions import refuse_read_only
from console.widgets.cells import age, clock, exit_text
from console.widgets.header_bar import HeaderBar
from core import actions
from core.ledger.page_records import EscalationDetail, EscalationEvent, RunDetail
from core.ledger.sql_store import SqlStore

#: The occurrences table's columns, left to right.
COLUMNS = ("When", "Run", "#", "State", "Exit", "Why")


def _utc(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _actor(actor: str | None) -> str:
    return (actor or "-").removeprefix("operator:")


def occurrences_of(d: EscalationDetail) -> list[EscalationEvent]:
    """The occurrences to list: the audit trail's, or (for an escalation written before
    its events were kept) one built from the escalation itself (its latest run and reason)."""
    esc = d.escalation
    if not d.occurrences and esc.latest_run_id is not None:
        return [EscalationEvent(at=esc.last_seen, kind="escalation_opened", run_id=esc.latest_run_id,
                                reason=esc.reason)]
    return list(d.occurrences)


def render_summary(d: EscalationDetail, now: float) -> Group:
    """The screen's head: severity, job, kind, state, count, owner; then the why and first and
    last seen (local clock and age), each wrapping under its own column."""
    esc = d.escalation
    head = Text()
    sev = label("severity", esc.severity)
    st = label("escalation_state", esc.state)
    head.append(sev.text, style=sev.style)
    head.append("  ")
    head.append(escaped(esc.job, keep_newlines=False), style="bold")
    head.append("  " + escaped(esc.kind, keep_newlines=False) + "  ")
    head.append(st.text, style=st.style)
    head.append(f"  ×{esc.count}  owner {escaped_line(esc.owner or '-', 24)}  #{esc.id}")
    seen = (f"first {age(now - esc.first_seen)} ago ({clock(esc.first_seen, now)}), "
            f"last {age(now - esc.last_seen)} ago ({clock(esc.last_seen, now)})")
    if esc.state == "snoozed" and esc.snoozed_until:
        seen += f", snoozed for {age(esc.snoozed_until - now)} more"
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(style="bold", width=7, no_wrap=True)
    grid.add_column(ratio=1)
    grid.add_row("why", Text(escaped(esc.reason or "(no reason recorded)")))
    grid.add_row("seen", Text(seen))
    return Group(head, grid)


def render_acts(d: EscalationDetail, now: float) -> Text:
    """Who acknowledged, snoozed, resolved or reopened it and when; then the notifications
    and their delivery state."""
    out = Text(end="")
    out.append("── Who acted ", style="bold")
    out.append("─" * 40 + "\n", style="dim")
    acts: list[tuple[str, str | None, float | None, float | None]] = [
        (a.kind, a.actor, a.at, a.until) for a in d.acts]
    esc = d.escalation
    if not acts:
        # Escalations from before the audit trail kept these: their own fields still tell.
        for verb, who, at in (("acknowledged", esc.acked_by, esc.acked_at),
                              ("snoozed", esc.snoozed_by, None),
                              ("resolved", esc.resolved_by, esc.resolved_at)):
            if who:
                acts.append((f"escalation_{verb}", who, at, None))
    if not acts:
        out.append("nobody yet\n", style="dim")
    for kind, actor, at, until in acts:
        verb = kind.removeprefix("escalation_")
        out.append(f"{clock(at, now) if at else '-':<9} ")
        out.append(f"{verb:<13}", style="bold")
        out.append(escaped(f"by {_actor(actor)}", keep_newlines=False))
        if until:
            out.append(f" until {clock(until, now)}")
        out.append("\n")
    out.append("\n── Notifications ", style="bold")
    out.append("─" * 36 + "\n", style="dim")
    if not d.notifications:
        out.append("none sent (no sink configured, or routing sent it nowhere)\n", style="dim")
    for note in d.notifications:
        lab = label("delivery_state", note.state)
        out.append(f"{clock(note.created_at, now):<9} ")
        out.append(escaped(f"{note.event} → {note.sink}", keep_newlines=False) + "  ")
        out.append(lab.text + " ", style=lab.style)
        if note.state == "sent" and note.sent_at:
            out.append(f" at {clock(note.sent_at, now)}")
        elif note.state == "cancelled":
            out.append(": " + escaped_line(note.last_error or "", 60))
        elif note.state != "sent":
            out.append(f" after {note.attempts} attempt{'s' if note.attempts != 1 else ''}")
            if note.last_error:
                out.append(": " + escaped_line(note.last_error, 60))
        out.append("\n")
    return out


class EscalationScreen(LiveScreen):
    """Detail of one escalation; ``escape`` returns to the list, ``enter`` opens the run of
    the selected occurrence."""

    SCOPE = "escalation"
    BINDINGS = keys.bindings(SCOPE)
    DEFAULT_CSS = """
    EscalationScreen #body { height: 1fr; padding: 0 1; }
    EscalationScreen #occ-title { margin: 1 0 0 0; }
    EscalationScreen #occurrences { height: auto; max-height: 12; margin: 0 0 1 0; }
    """

    def __init__(self, esc_id: int) -> None:
        super().__init__()
        self.esc_id = esc_id
        self.detail: EscalationDetail | None = None
        #: ``reads.run_detail`` of the latest run while it is live (its output grows), else None.
        self.live_run: RunDetail | None = None
        self.following = False  # l: keep the view at the end of the latest run's output
        self._room = 0  # the Why column's width when last drawn


    def compose(self) -> ComposeResult:
        yield HeaderBar()
        with VerticalScroll(id="body"):
            yield Static(Text(f"loading escalation {self.esc_id}…"), id="summary")
            yield Static(Text("── Occurrences ", style="bold"), id="occ-title")
            yield DataTable(id="occurrences", cursor_type="row", zebra_stripes=False)
            yield Static(Text(""), id="acts")
            yield Static(Text(""), id="output")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        table = self.query_one("#occurrences", DataTable)
        table.add_columns(*COLUMNS)
        table.focus()

    def header_flags(self) -> tuple[bool, bool]:
        return False, self.following

    async def on_ledger(self, refresh: bool, committed: bool) -> None:
        # While its latest run is live, every pulse: that run's output grows in its files.
        if refresh or self.detail is None or self.live_run is not None:
            await self.load()

    async def load(self, *, force: bool = False, **_: Any) -> None:
        """Read the escalation, and its latest run while that run is live; show what changed.
        ``force`` (after an operator action) asks the watcher for the header figures too. A
        failed read keeps what is shown (the watcher marks the header stale)."""
        if force:
            self.wk.watcher.wake(force=True)

        def read_all(ledger: Any) -> tuple[EscalationDetail | None, RunDetail | None]:
            store = SqlStore(ledger)
            detail = store.escalation_detail(self.esc_id)
            latest = detail.escalation.latest_run_id if detail is not None else None
            run = store.run_detail(latest, events_limit=1) if latest is not None else None
            return detail, run if run is not None and run.run.state in LIVE_STATES else None

        try:
            got = await self.wk.reader.call(read_all)
        except Exception as exc:
            self.wk.watcher.wake()
            if self.detail is None:
                self.query_one("#summary", Static).update(Text(escaped(f"could not read escalation {self.esc_id}: {exc}")))
            return
        changed = got != (self.detail, self.live_run)
        self.detail, self.live_run = got
        if changed or self.polls == 0:
            self._show()

    def why_room(self) -> int:
        """Cells left for the Why column: the body's width (the screen's, less its padding)
        less the other columns. From the screen's size, which is known before the first
        layout too, so the first drawing and every later one agree."""
        return max(16, (self.size.width or self.app.size.width) - 2 - 46)

    def on_resize(self) -> None:
        if self.detail is not None and self.why_room() != self._room:  # the terminal's width changed
            self._show()

    def _show(self) -> None:
        now = self.wk.now()
        if self.detail is None:
            self.query_one("#summary", Static).update(Text(f"no escalation {self.esc_id}"))
            return
        self.query_one("#summary", Static).update(render_summary(self.detail, now))
        occ = occurrences_of(self.detail)
        self.query_one("#occ-title", Static).update(
            Text.assemble(("── Occurrences ", "bold"), (f"({len(occ)}; enter opens the run) ", "dim"),
                          ("─" * 30, "dim")))
        table = self.query_one("#occurrences", DataTable)
        row = table.cursor_row
        # The Why column takes what the others leave, so the table never scrolls sideways.
        room = self._room = self.why_room()
        rows: list[tuple[Text, Text, Text, Text, Text, Text]] = []
        keys: list[str] = []
        for o in occ:
            st = label("run_state", o.run_state) if o.run_state else None
            rows.append((Text(clock(o.at, now)), Text(str(o.run_id or "-")), Text(str(o.attempt or "-")),
                         Text(st.text, style=st.style) if st else Text("-"),
                         Text(exit_text(o.exit_code, o.signal)),
                         Text(escaped_line(o.reason or "", room))))
            keys.append(f"{o.at}:{o.run_id}")
        # Every column's width is set from what it holds: auto-sized ones drew the header at
        # its labels' widths until the next full refresh (seen as a misaligned header row).
        table.clear(columns=True)
        for i, name in enumerate(COLUMNS):
            cells = [r[i].cell_len for r in rows]
            table.add_column(name, width=max([len(name), *cells]))
        for r, key in zip(rows, keys, strict=True):
            table.add_row(*r, key=key)
        if occ:
            table.move_cursor(row=min(row, len(occ) - 1))
        self.query_one("#acts", Static).update(render_acts(self.detail, now))
        self._show_output()

    def _show_output(self) -> None:
        """The latest run's output while it is live (nothing once it ended: its run detail,
        ``enter``, has it all); kept at its end while ``following``."""
        box = self.query_one("#output", Static)
        run = self.live_run
        self.refresh_bindings()  # l is offered only while the latest run is live
        box.display = run is not None  # no room taken once the run ended
        if run is None:
            self.following = False
            box.update(Text(""))
            return
        out = Text(end="")
        out.append(f"── Output of run {run.run.id} ({run.run.state}; l follows it) ", style="bold")
        out.append("─" * 12, style="dim")
        out.append("\n")
        render_output(out, run)
        box.update(out)
        if self.following:
            body = self.query_one("#body", VerticalScroll)
            body.call_after_refresh(lambda: body.scroll_end(animate=False))

    @on(DataTable.RowSelected, "#occurrences")
    def _open_run(self, event: DataTable.RowSelected) -> None:
        if self.detail is None:
            return
        occ = occurrences_of(self.detail)
        picked = occ[event.cursor_row].run_id if 0 <= event.cursor_row < len(occ) else None
        if picked:
            self.app.push_screen(DetailScreen(picked))
        else:
            self.notify("no run recorded for this occurrence", severity="warning", markup=False)

    def action_back(self) -> None:
        self.app.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "follow_output" and self.live_run is None and not self.following:
            return False  # no running output to follow: l is off the footer and does nothing
        return super().check_action(action, parameters)

    def action_follow_output(self) -> None:
        """l: follow the latest run's output (the view stays at its end as it grows), or stop."""
        self.following = not self.following
        if self.following:
            self.query_one("#body", VerticalScroll).scroll_end(animate=False)
        self.draw_header()

    def action_cursor(self, step: int) -> None:
        """j / k: move the list's cursor (the arrows do it through the table itself)."""
        table = self.query_one("#occurrences", DataTable)
        table.move_cursor(row=max(0, table.cursor_row + step))

    # -- actions on this escalation ----------------------------------------------------------
    async def _act(self, verb: str, call) -> None:
        if refuse_read_only(self):
            return
        op, now, esc_id = self.wk.config.operator, self.wk.now(), self.esc_id
        try:
            result = await self.wk.actor.call(lambda ledger: call(ledger, esc_id, op, now))
        except Exception as exc:
            self.notify(escaped(f"{verb} failed: {exc}"), severity="error", markup=False)
            return
        self.notify(escaped(result.message), severity="information" if result.ok else "warning", markup=False)
        await self.load(force=True)

    async def action_acknowledge(self) -> None:
        await self._act("acknowledge", lambda led, i, op, now: actions.acknowledge(led, i, op, now=now))

    async def action_resolve(self) -> None:
        await self._act("resolve", lambda led, i, op, now: actions.resolve(led, i, op, now=now))

    def action_snooze(self) -> None:
        if refuse_read_only(self) or self.detail is None:
            return
        esc = self.detail.escalation
        what = f"{escaped_line(esc.job, 30)} · {escaped_line(esc.kind, 24)} (#{esc.id})"

        async def chosen(seconds: float | None) -> None:
            if seconds is not None:
                until = self.wk.now() + seconds
                await self._act("snooze", lambda led, i, op, now: actions.snooze(led, i, op, until, now=now))

        self.app.push_screen(SnoozeScreen(what), chosen)
