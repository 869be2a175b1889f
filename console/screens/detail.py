"""Run detail: the run, every attempt of its lineage, fan-out sub-tasks, the lifecycle
timeline from the audit trail, handoff, verification, supervisor verdict, and output head and
tail with search. Every ledger and output string is sanitised (``console.safe_text``).

Live like the main views: the run is read again when the app's ledger watcher says the
ledger changed, and on every pulse while the run is running (its output grows in its files,
not in the ledger), keeping the scroll position; the header is the watcher's."""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Footer, Input, Static

from console import evidence, keys
from console.labels import label, word
from console.safe_text import escaped, escaped_line, output
from console.screens.live import LiveScreen
from console.screens.operator_actions import confirm_run_action, refuse_read_only
from console.widgets.cells import clock, duration, exit_text
from console.widgets.header_bar import HeaderBar
from core.ledger.page_records import RunDetail
from core.ledger.records import Outcome, Run
from core.ledger.sql_store import SqlStore

#: States in which a run's output may still grow (its files are re-read on every pulse).
LIVE_STATES = ("spawned", "running", "verifying")

def _section(out: Text, title: str) -> None:
    out.append("\n")
    out.append(f"── {title} ", style="bold")
    out.append("─" * max(0, 60 - len(title)), style="dim")
    out.append("\n")


#: Cells the detail page's field names take; long values wrap under their own column.
KEY_W = 12
def _hanging(text: str, width: int) -> str:
    """``text`` wrapped to ``width`` cells, continuation lines indented under the value column."""
    room = max(20, width - KEY_W)
    lines = textwrap.wrap(text, room, break_long_words=True, break_on_hyphens=False) or [""]
    return ("\n" + " " * KEY_W).join(lines)


def _kv(out: Text, key: str, value: object, *, styled: tuple[str, str] | None = None, style: str = "",
        width: int = 78) -> None:
    out.append(f"{key:<{KEY_W}}", style="bold")
    if styled is not None:
        out.append(styled[0], style=styled[1])
    else:
        out.append(_hanging(escaped(value if value is not None else "-", keep_newlines=False), width), style=style)
    out.append("\n")


def _pretty(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def failed_before_verification(run: Run, verification: Any) -> bool:
    """The run ended with a non-zero exit or a signal and the supervisor ran no checks: its
    ``{"ok": true, "checks": []}`` means "not verified", not "passed"."""
    failed = bool(run.signal) or run.exit_code not in (None, 0)
    no_checks = verification is None or (isinstance(verification, dict) and not verification.get("checks"))
    return failed and no_checks


def _status_word(run: Run, outcome: Outcome | None) -> tuple[str, str]:
    """The run's state as its label, and "partial" as partial (a handoff that said partial is
    not shown as ✓ ok)."""
    if outcome is not None and outcome.status == "partial":
        lab = label("outcome_status", "partial")
    else:
        lab = label("run_state", run.state)
    return lab.text, lab.style


def render_why(out: Text, d: RunDetail, width: int) -> None:
    """The page's opening: the supervisor's reason sentence, then the job's most telling
    output lines (unless the sentence already quotes them)."""
    reason = (d.outcome.verdict_reason if d.outcome else None) or d.run.reason
    _kv(out, "why", reason, width=width)
    stderr, stdout = d.stderr, d.stdout
    lines = evidence.telling_lines(stderr.tail or stderr.head, stdout.tail or stdout.head,
                                   width=max(20, width - 14))
    lines = evidence.not_in(reason, lines)
    for i, ln in enumerate(lines):
        _kv(out, "output" if i == 0 else "", ln, style="italic", width=width)


def render_verification(out: Text, run: Run, outcome: Outcome | None, raw_json: bool) -> None:
    verification = outcome.verification if outcome else None
    _section(out, "Verification: claimed vs found")
    if outcome is not None and run.state not in ("queued", "spawned", "running", "verifying") \
            and failed_before_verification(run, verification):
        out.append("verification: skipped (the run failed before verification)\n", style="bold")
        return
    if raw_json:
        out.append(escaped(_pretty(verification)) + "\n")
        return
    rows = evidence.verification_rows(verification)
    if not rows:
        out.append("no checks (nothing was claimed and the spec asks for none)\n" if outcome is not None else "-\n",
                   style="dim")
        return
    for ok, soft, what, found in rows:
        out.append("✓ " if ok else ("! " if soft else "✗ "), style="green" if ok else ("yellow" if soft else "bold red"))
        out.append(f"{what:<36} ")
        out.append(found + ("  (soft)" if soft and not ok else "") + "\n", style="" if ok else "bold")


def render_handoff(out: Text, outcome: Outcome | None, raw_json: bool, width: int = 78) -> None:
    _section(out, "Handoff")
    handoff = outcome.handoff if outcome else None
    findings = outcome.handoff_findings if outcome else None
    handoff_raw = outcome.handoff_raw if outcome else None
    if raw_json:
        out.append(escaped(_pretty(handoff or handoff_raw)) + "\n")
        if findings:
            out.append("findings: ", style="bold")
            out.append(escaped(_pretty(findings)) + "\n")
        return
    if handoff is None and handoff_raw is None and evidence.is_plain_job_without_handoff(findings):
        out.append("none: a plain shell job; its exit code and output are the evidence\n", style="dim")
        return
    for key, value in evidence.handoff_fields(handoff):
        if key == "status":
            lab = label("outcome_status", value)
            _kv(out, key, None, styled=(lab.text, lab.style))
        else:
            _kv(out, key, value, width=width)
    if handoff is None and handoff_raw:
        _kv(out, "stored", "(not valid: J shows the raw text)")
    for f in findings or []:
        if isinstance(f, dict) and f.get("code") != "missing":
            out.append("problem     ", style="bold red")
            out.append(escaped(f"{f.get('code')}: {f.get('message', '')}", keep_newlines=False) + "\n")


def hanging(head: str, body: Text, width: int) -> Text:
    """``head`` then ``body`` wrapped to ``width`` cells, each further line indented under the
    body's first character (a long timeline reason does not run back under the clock)."""
    room = max(20, width - cell_len(head))
    lines = body.wrap(Console(width=room, color_system=None), room) or [Text("")]
    out = Text(end="")
    for i, piece in enumerate(lines):
        piece.rstrip()
        out.append(head if i == 0 else " " * cell_len(head))
        out.append_text(piece)
        out.append("\n")
    return out


def render_detail(d: RunDetail, now: float, width: int = 78, *, raw_json: bool = False) -> Text:
    """The whole detail page as one ``Text`` (sanitised; no markup is ever parsed).

    It opens with the why (the supervisor's reason, the job's telling output lines), then the
    verification (claimed vs found) and the handoff as readable fields (``raw_json``: the
    stored JSON instead), then the run's metadata, attempts, sub-tasks, timeline and output.
    Attempt and sub-task rows are cut to ``width`` cells so each stays on one line."""
    run, outcome = d.run, d.outcome
    out = Text(end="")
    text, style = _status_word(run, outcome)
    # Job and run on separate labelled lines: which job, then which run of it.
    out.append(f"{'job':<12}", style="bold")
    out.append(escaped(run.job, keep_newlines=False) + "\n", style="bold")
    out.append(f"{'run':<12}", style="bold")
    out.append(f"{run.id} · attempt {run.attempt} · ")
    out.append(text, style=style)
    took = outcome.duration_s if outcome else None
    if took is None and run.started_at and run.ended_at:
        took = run.ended_at - run.started_at
    out.append(f" · {duration(took)} · exit {exit_text(run.exit_code, run.signal)}\n")
    render_why(out, d, width)
    for e in d.escalations:
        lab = label("severity", e.severity)
        out.append(f"{'escalation':<12}", style="bold")
        out.append(lab.text, style=lab.style)
        out.append(escaped(f" #{e.id} {e.kind} · {word('escalation_state', e.state)} · ×{e.count}",
                         keep_newlines=False) + "\n")

    render_verification(out, run, outcome, raw_json)
    render_handoff(out, outcome, raw_json, width)

    _section(out, "Run")
    _kv(out, "trigger", run.trigger, width=width)
    _kv(out, "created", clock(run.created_at, now))
    _kv(out, "started", clock(run.started_at, now))
    _kv(out, "ended", clock(run.ended_at, now))
    where = f" on {run.host}" if run.host else ""  # the host it was spawned on (a fleet)
    _kv(out, "pid", f"{run.pid or '-'}{where} (runner {run.runner_id or '-'})")
    _kv(out, "reason", run.reason, width=width)
    _kv(out, "artifacts", run.artifacts_dir, width=width)
    silent = outcome.silent if outcome else None
    _kv(out, "judged", f"{(outcome.judged_by if outcome else None) or '-'} · verdict "
        f"{(outcome.verdict_kind if outcome else None) or '-'}"
        f" · {'silent' if silent == 1 else 'spoke up' if silent == 0 else '-'}")

    _section(out, f"Attempts ({len(d.attempts)})")
    for a in d.attempts:
        mark = "▶" if a.id == run.id else " "
        state_text, st = label("run_state", a.state)
        head = f"{mark} #{a.attempt:<2} run {a.id:<6} "
        rest = (f" {escaped_line(a.trigger, 12):<12} {clock(a.ended_at, now):<8} "
                f"exit {exit_text(a.exit_code, a.signal):<7}")
        used = len(head) + 10 + len(rest)
        out.append(head)
        out.append(f"{state_text:<10}", style=st)
        out.append(rest)
        if a.reason and width - used > 2:
            out.append(" " + escaped_line(a.reason, width - used - 1))
        out.append("\n")

    if d.children:
        _section(out, f"Sub-tasks ({len(d.children)})")
        for c in d.children:
            state_text, st = label("run_state", c.state)
            head = f"  {escaped_line(c.task, 16):<16} #{c.attempt:<2} run {c.id:<6} "
            rest = f" exit {exit_text(c.exit_code, c.signal):<7}"
            used = len(head) + 10 + len(rest)
            out.append(head)
            out.append(f"{state_text:<10}", style=st)
            out.append(rest)
            if c.reason and width - used > 2:
                out.append(" " + escaped_line(c.reason, width - used - 1))
            out.append("\n")

    _section(out, f"Timeline ({len(d.events)} events)")
    for ev in d.events:
        move = f"{ev.from_state or ''} → {ev.to_state}" if ev.to_state else ""
        line = Text(escaped(f"{ev.kind} {move}", keep_newlines=False), style="bold")
        line.append(escaped(f"  {ev.actor}  {ev.reason or ''}", keep_newlines=False).rstrip())
        out.append_text(hanging(f"{clock(ev.at, now):<13} #{ev.attempt or '-':<3} ", line, width))

    render_output(out, d)
    return out


def render_output(out: Text, d: RunDetail) -> None:
    """The run's stdout and stderr sections (head, and tail when cut) of ``reads.run_detail``
    ``d``, each through the escaper; the run detail and the escalation detail show them."""
    for name, s in (("stdout", d.stdout), ("stderr", d.stderr)):
        _section(out, f"{name} ({s.total:,} bytes{'' if s.exists else ', stored excerpt'})")
        out.append(output(s.head) or "(empty)")
        if s.tail:
            out.append("\n… skipped …\n", style="dim italic")
            out.append(output(s.tail))
        out.append("\n")


class DetailScreen(LiveScreen):
    """Detail of one run; ``escape`` returns to the list."""

    DEFAULT_CSS = """
    DetailScreen #body { height: 1fr; padding: 0 1; }
    DetailScreen #search { display: none; height: 1; border: none; }
    DetailScreen #search.-active { display: block; }
    """
    SCOPE = "detail"
    BINDINGS = keys.bindings(SCOPE)

    def __init__(self, run_id: int) -> None:
        super().__init__()
        self.run_id = run_id
        self.detail: RunDetail | None = None
        self.term = ""
        self.raw_json = False  # J: handoff and verification as the stored JSON
        self._matches: list[int] = []
        self._match_i = -1
        self.following = False  # l: keep the view at the end of a running job's output
        self._shown = False  # the page was drawn once (a first read that found no run draws it too)


    def compose(self) -> ComposeResult:
        yield HeaderBar()
        with VerticalScroll(id="body"):
            yield Static(Text(f"loading run {self.run_id}…"), id="content")
        yield Input(placeholder="search output (enter; esc closes)", id="search")
        yield Footer(compact=True)

    async def on_mount(self) -> None:
        self.query_one("#body").focus()
        # The first read at once, before the first layout (as the page's widths have always
        # been computed for it); then the ledger watcher's messages keep it live.
        await self.load()

    def header_flags(self) -> tuple[bool, bool]:
        return False, self.following

    async def on_ledger(self, refresh: bool, committed: bool) -> None:
        # A running job's output grows in its files, not in the ledger: re-read it every pulse.
        if refresh or self.detail is None or self.detail.run.state in LIVE_STATES:
            await self.load()

    async def load(self, *, force: bool = False, **_: Any) -> None:
        """Read the run (``reads.run_detail``) and show it when it changed; ``force`` (after
        an operator action) asks the watcher to read the header figures again too. A failed
        read keeps the page shown (the watcher marks the header stale)."""
        if force:
            self.wk.watcher.wake(force=True)
        try:
            detail = await self.wk.reader.call(lambda ledger: SqlStore(ledger).run_detail(self.run_id))
        except Exception as exc:
            self.wk.watcher.wake()
            if self.detail is None:
                self.query_one("#content", Static).update(Text(escaped(f"could not read run {self.run_id}: {exc}")))
            return
        changed = detail != self.detail
        self.detail = detail
        if changed or not self._shown:
            self._shown = True
            self._show_detail()

    def on_resize(self) -> None:
        if self.detail is not None:
            self._show_detail()

    def _show_detail(self) -> None:
        if self.detail is None:
            self.query_one("#content", Static).update(Text(f"no run {self.run_id}"))
            return
        body_box = self.query_one("#body", VerticalScroll)
        width = (body_box.scrollable_content_region.width or self.app.size.width - 3) - 1
        if not body_box.show_vertical_scrollbar:
            # Cut rows as if the scrollbar were there: a page that grows past the screen
            # gets one, and rows cut for the wider body would then wrap.
            width -= body_box.styles.scrollbar_size_vertical
        body = render_detail(self.detail, self.wk.now(), width=max(40, width), raw_json=self.raw_json)
        self._matches = []
        if self.term:
            pattern = re.compile(re.escape(self.term), re.IGNORECASE)
            body.highlight_regex(pattern, style="reverse bold")
            plain = body.plain
            self._matches = [plain.count("\n", 0, m.start()) for m in pattern.finditer(plain)]
        y = body_box.scroll_y
        self.query_one("#content", Static).update(body)
        if self.following:  # the end of the output, as it grows
            body_box.call_after_refresh(lambda: body_box.scroll_end(animate=False))
        elif y:  # keep the reader where they were while the page re-renders
            body_box.call_after_refresh(lambda: body_box.scroll_to(y=y, animate=False))

    def action_back(self) -> None:
        box = self.query_one("#search", Input)
        if box.has_class("-active"):
            box.remove_class("-active")
            self.set_focus(self.query_one("#body"))
            return
        self.app.pop_screen()

    def on_key(self, event) -> None:
        if event.key == "escape" and self.query_one("#search", Input).has_class("-active"):
            event.stop()
            self.action_back()

    def search_open(self) -> bool:
        return self.query_one("#search", Input).has_class("-active")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only_hides(action):
            return False
        if self.is_mounted and self.search_open():
            return action == "back"  # the search box owns the keyboard ("/" included)
        return True

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("-active")
        self.set_focus(box)  # now: the keys already on their way after "/" must reach it
        box.focus()

    @on(Input.Submitted, "#search")
    def _searched(self, event: Input.Submitted) -> None:
        self.term = event.value
        self.query_one("#search", Input).remove_class("-active")
        self.set_focus(self.query_one("#body"))
        self._match_i = -1
        self._show_detail()
        if self.term and not self._matches:
            self.notify(escaped(f"no match for {self.term!r}"), markup=False, severity="warning")
        self.action_next_match()

    def action_next_match(self) -> None:
        if not self._matches:
            return
        self._match_i = (self._match_i + 1) % len(self._matches)
        self.query_one("#body", VerticalScroll).scroll_to(y=max(0, self._matches[self._match_i] - 2), animate=False)

    def action_toggle_json(self) -> None:
        self.raw_json = not self.raw_json
        self._show_detail()

    def action_scroll(self, lines: int) -> None:
        if lines < 0 and self.following:  # reading back: stop following
            self.following = False
            self.draw_header()
        body = self.query_one("#body", VerticalScroll)
        body.scroll_to(y=body.scroll_y + lines, animate=False, immediate=True)

    def action_top(self) -> None:
        self.query_one("#body", VerticalScroll).scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.query_one("#body", VerticalScroll).scroll_end(animate=False)

    def action_follow_output(self) -> None:
        """l: follow the output (the view stays at its end as it grows), or stop following."""
        self.following = not self.following
        if self.following:
            self.action_bottom()
        self.draw_header()

    def _refuse(self) -> bool:
        return refuse_read_only(self)

    def action_retry(self) -> None:
        if not self._refuse() and self.detail:
            confirm_run_action(self, "retry", self.run_id, self.detail.run.job, self.load)

    def action_abandon(self) -> None:
        if not self._refuse() and self.detail:
            confirm_run_action(self, "abandon", self.run_id, self.detail.run.job, self.load)
