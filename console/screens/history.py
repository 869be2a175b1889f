"""Job history: one job at a glance — its last runs as duration bars coloured by state, the
success rate, the learned duration range (the supervisor's own ``core.supervisor.baseline``
over the same successes), the next run in the job's timezone and in UTC, whether it is
paused, and the runs as a list (``enter`` opens one). ``P`` pauses or resumes the job, ``t``
runs it now (each asks first and is attributed), ``o`` shows its outcomes in the main view.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Footer, Static

from console import keys
from console.safe_text import escaped, escaped_line
from console.screens.detail import DetailScreen
from console.screens.live import LiveScreen
from console.screens.operator_actions import confirm_job_action, job_controls_available, refuse_read_only
from console.widgets.cells import age, clock, duration, exit_text, run_state
from console.widgets.header_bar import HeaderBar
from console.widgets.sparkline import run_bars
from core.ledger import reads
from core.ledger.page_records import JobHistory
from core.ledger.sql_store import SqlStore
from core.supervisor import baseline


def _in_zone(ts: float, zone: str | None) -> datetime:
    """``ts`` in the job's zone; a job without one runs in the machine's zone (``$TZ``, else
    the system's), which is the console's local zone on the runner's host."""
    return datetime.fromtimestamp(ts, ZoneInfo(zone)) if zone else datetime.fromtimestamp(ts).astimezone()


def next_run_text(nxt: float | None, zone: str | None, now: float, held: str | None = None) -> str:
    """"Fri 02 Jan 04:00 CET (03:00 UTC), in 15h" — the job's own zone first, then UTC
    (UTC alone when the job's zone is UTC). ``nxt`` and ``held`` are
    ``core.ledger.reads.job_next_run``'s answer (the CLI's ``jobs`` gives the same)."""
    if nxt is None:
        return "none: paused (scheduled slots are skipped)" if held == reads.HELD_PAUSED else "none scheduled"
    when = "due now" if nxt - now < 1 else f"in {age(nxt - now)}"  # never "in 0s"
    if held == reads.HELD_BREAKER:
        when += " (the breaker's trial run, after its cool-down)"
    local = _in_zone(nxt, zone)
    if local.utcoffset() == timedelta(0):
        return f"{local.strftime('%a %d %b %H:%M')} UTC, {when}"
    utc = datetime.fromtimestamp(nxt, UTC).strftime("%H:%M UTC")
    return f"{local.strftime('%a %d %b %H:%M %Z')} ({utc}), {when}"


def render_summary(h: JobHistory, now: float, width: int) -> Text:
    """The head of the screen: job, pause and breaker state, schedule and next run, success
    rate, learned duration range, and the chart (oldest left, newest right)."""
    job, runs = h.job, h.runs
    out = Text(end="")
    out.append(f"{'job':<10}", style="bold")
    out.append(escaped(job.name, keep_newlines=False), style="bold")
    if job.paused_at:
        who = str(job.paused_by or "-").removeprefix("operator:")
        out.append(f"  ‖ paused by {escaped_line(who, 20)} {age(now - job.paused_at, 1)} ago", style="bold yellow")
    if not job.enabled:
        out.append("  (off: no spec defines it now)", style="dim")
    if job.breaker_state and job.breaker_state != "closed":
        out.append(f"  breaker {job.breaker_state}", style="bold red")
    out.append("\n")
    out.append(f"{'schedule':<10}", style="bold")
    out.append(escaped(job.schedule_text or "manual", keep_newlines=False))
    if job.timezone:
        out.append(escaped(f" ({job.timezone})", keep_newlines=False))
    out.append("\n")
    out.append(f"{'next run':<10}", style="bold")
    out.append(next_run_text(h.next_run, job.timezone, now, h.next_held) + "\n")
    rate, lineages = reads.lineage_success_rate(runs)
    out.append(f"{'success':<10}", style="bold")
    out.append(f"{rate * 100:.0f}% of the last {lineages} runs (each slot by its final attempt)"
               if rate is not None else "no finished runs yet")
    out.append("\n")
    learned = baseline.learn(r.duration_s for r in runs if r.status == "success")
    out.append(f"{'usual':<10}", style="bold")
    if learned is None:
        n = sum(1 for r in runs if r.status == "success")
        out.append(f"not learned yet ({n} of {baseline.MIN_SAMPLES} successful runs needed)", style="dim")
    else:
        out.append(f"{duration(learned.low)}–{duration(learned.high)} (median {duration(learned.median)}, "
                   f"from {learned.samples} successes)")
    out.append("\n")
    bars = max(10, width - 12)
    chart = [(r.state, r.status, r.duration_s) for r in reversed(runs)]
    out.append(f"{'last ' + str(min(bars, len(chart))):<10}", style="bold")
    out.append_text(run_bars(chart, bars))
    out.append("  old → new; height = duration, colour = state", style="dim")
    return out


class JobHistoryScreen(LiveScreen):
    """History of one job; ``escape`` returns."""

    SCOPE = "history"
    BINDINGS = keys.bindings(SCOPE)
    DEFAULT_CSS = """
    JobHistoryScreen #summary { height: auto; padding: 0 1 1 1; }
    JobHistoryScreen #runs { height: 1fr; margin: 0 1; }
    """

    def __init__(self, job: str) -> None:
        super().__init__()
        self.job = job
        self.history: JobHistory | None = None


    def compose(self) -> ComposeResult:
        yield HeaderBar()
        # The summary stays put; the run list below it scrolls by itself.
        yield Static(Text(f"loading {escaped_line(self.job, 40)}…"), id="summary")
        yield DataTable(id="runs", cursor_type="row")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#runs", DataTable).add_columns("Ended", "Run", "#", "State", "Took", "Exit", "Why")
        self.query_one("#runs", DataTable).focus()

    async def on_ledger(self, refresh: bool, committed: bool) -> None:
        if refresh or self.history is None:
            await self.load()

    async def load(self, *, force: bool = False, **_: Any) -> None:
        """Read the job's history and show it; ``force`` (after an operator action) asks the
        watcher for the header figures too. A failed read keeps what is shown."""
        if force:
            self.wk.watcher.wake(force=True)
        now = self.wk.now()
        try:
            history = await self.wk.reader.call(lambda ledger: SqlStore(ledger).job_history(self.job, now=now))
        except Exception as exc:
            self.wk.watcher.wake()
            if self.history is None:
                self.query_one("#summary", Static).update(Text(escaped(f"could not read {self.job}: {exc}")))
            return
        self.history = history
        self._show()

    def on_resize(self) -> None:
        if self.history is not None:
            self._show()

    def _show(self) -> None:
        now = self.wk.now()
        if self.history is None:
            self.query_one("#summary", Static).update(Text(escaped(f"no job named {self.job!r}")))
            return
        width = self.query_one("#summary").content_region.width or self.app.size.width - 2
        self.query_one("#summary", Static).update(render_summary(self.history, now, width))
        table = self.query_one("#runs", DataTable)
        row = table.cursor_row
        table.clear()
        for r in self.history.runs:
            table.add_row(Text(clock(r.ended_at, now)), Text(str(r.id)), Text(str(r.attempt)),
                          run_state(r.state, r.status), Text(duration(r.duration_s)),
                          Text(exit_text(r.exit_code, r.signal)),
                          Text(escaped_line(r.verdict_reason or r.reason or "", 200)), key=str(r.id))
        if self.history.runs:
            table.move_cursor(row=min(row, len(self.history.runs) - 1))

    @on(DataTable.RowSelected, "#runs")
    def _open_run(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.push_screen(DetailScreen(int(event.row_key.value)))

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_cursor(self, step: int) -> None:
        """j / k: move the list's cursor (the arrows do it through the table itself)."""
        table = self.query_one("#runs", DataTable)
        table.move_cursor(row=max(0, table.cursor_row + step))

    async def action_outcomes(self) -> None:
        """Back to the main screen's outcomes view, filtered to this job."""
        self.app.pop_screen()
        main = self.app.screen
        show = getattr(main, "show_job_outcomes", None)
        if show is not None:
            await show(self.job)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only_hides(action):
            return False
        if action in {"pause_job", "trigger"}:
            return job_controls_available()
        return True

    def action_pause_job(self) -> None:
        if refuse_read_only(self) or self.history is None:
            return
        confirm_job_action(self, "pause", self.job, self.load, paused=self.history.job.paused_at is not None)

    def action_trigger(self) -> None:
        if not refuse_read_only(self):
            confirm_job_action(self, "trigger", self.job, self.load)
