"""Missions: each mission as a tree — its coordinator, and every worker with its state,
confidence, steps and attempts — with the open question and the report; keys to approve the
report, answer the question, abandon a worker and abort the mission.

Reads go through the app's reader thread and writes through its actor thread (``core.mission``
does the work: compare-and-set with audit events). Every string from the ledger (goals,
tasks, results, reports, questions, names) is shown through ``console.safe_text``: literal
text, never markup.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Static, Tree

from console import keys
from console.safe_text import escaped, escaped_line
from console.screens.dialogs import DIALOG_CSS, ConfirmScreen
from console.screens.live import LiveScreen
from console.screens.operator_actions import refuse_read_only
from console.widgets.header_bar import HeaderBar
from core.ledger.connection import Ledger
from core.ledger.records import Mission, Worker
from core.ledger.sql_store import as_store
from core.mission import actions as mactions
from core.vocabulary import MISSION_ENDED, WorkerState

MISSION_LIMIT = 200
#: ``mission_workers.state`` values a person may abandon (``core.mission.actions.abandon_worker``).
ABANDONABLE = frozenset({WorkerState.FAILED, WorkerState.RUNNING})
STATE_STYLES = {"delivered": "green", "failed": "red", "abandoned": "dim", "running": "yellow",
                "closed": "green", "aborted": "dim", "awaiting_approval": "bold cyan", "waiting_person": "bold yellow"}


def _read(ledger: Ledger, selected: int | None) -> tuple[list[Mission], Mission | None, list[Worker]]:
    """The missions (newest first), the selected one (default: the newest) and its workers."""
    store = as_store(ledger)
    found = store.missions(limit=MISSION_LIMIT)
    mid = selected if selected is not None else (found[0].id if found else None)
    m = store.mission(mid) if mid is not None else None
    return found, m, (store.mission_workers(m.id) if m is not None else [])


def _styled(word: str) -> Text:
    return Text(word, style=STATE_STYLES.get(word, ""))


def worker_label(w: Worker) -> Text:
    """A worker's node in the tree: seq, worker, state (its figures are the lines under it,
    ``worker_lines``, so nothing is cut at 80 columns)."""
    out = Text(f"{w.seq}. ")
    out.append(escaped_line(w.worker, 40), style="bold")
    out.append("  ")
    out.append_text(_styled(w.state))
    return out


def _wrapped(head: str, value: str, width: int) -> list[Text]:
    """``head`` + ``value`` on as many lines of ``width`` cells as it takes, broken between
    words (a tree line does not wrap by itself); continuation lines start under the value."""
    room = max(20, width) - len(head)
    chunks = textwrap.wrap(value, room, break_long_words=True, break_on_hyphens=False,
                           drop_whitespace=True) or [""]
    lines = []
    for i, chunk in enumerate(chunks):
        t = Text(head if i == 0 else " " * len(head), style="dim")
        t.append(chunk)
        lines.append(t)
    return lines


#: Cells left of a worker's lines in the tree: the guides of three levels ("    │   ├── ").
TREE_INDENT = 12
#: Cells kept free on the right for the tree's vertical scrollbar (it appears once the
#: lines overflow; text drawn there would be lost under it).
SCROLLBAR = 2
#: Cells the missions table's other columns take (id 4, state 17, mission 14, turns 6, each
#: with one cell of padding either side) plus the table's scrollbar.
TABLE_FIXED = 4 + 17 + 14 + 6 + 5 * 2 + 2 + 2


def worker_width(tree_width: int) -> int:
    """Cells a worker's line may take in a tree ``tree_width`` cells wide."""
    return max(20, tree_width - TREE_INDENT - SCROLLBAR - 1)


def worker_lines(w: Worker, width: int) -> list[Text]:
    """The lines under a worker: status, confidence, steps and attempts; its task; its note
    (the verification's or the error), each wrapped to ``width`` cells."""
    conf = f"{w.confidence:.2f}" if isinstance(w.confidence, int | float) else "-"
    steps = w.steps_used if w.steps_used is not None else "-"
    figures = Text(f"status {escaped_line(w.status or '-', 12)} · conf {conf} · steps {steps}"
                   f" · attempts {w.attempts}")
    out = [figures]
    out += _wrapped("task  ", escaped_line(w.task or "-"), width)
    note = w.note or w.error
    if note:
        out += _wrapped("note  ", escaped_line(note, 400), width)
    return out


def render_body(m: Mission) -> Text:
    """Goal, budget figures, open question and report of mission ``m`` (sanitised)."""
    b = m.budget or {}
    out = Text(end="")
    out.append("goal  ", style="bold")
    out.append(escaped(m.goal))
    out.append(f"\nowner {escaped_line(m.owner or '-')}   turns {m.turns}/{b.get('turns')}   "
               f"tokens {m.tokens}   cost ${m.cost:.4f}")
    if m.reason:
        out.append(f"\nwhy   {escaped_line(m.reason, 200)}")
    if m.question:
        out.append("\n\nquestion (w answers)\n", style="bold yellow")
        out.append(escaped(m.question))
    if m.report:
        out.append(f"\n\nreport ({m.report_status or '-'})", style="bold")
        if m.state == "awaiting_approval":
            out.append("  A approves", style="bold cyan")
        out.append("\n")
        out.append(escaped(m.report))
    return out


class AnswerScreen(ModalScreen[str | None]):
    """Type the answer to a mission's question; enter sends, esc cancels."""

    DEFAULT_CSS = DIALOG_CSS.format(name="AnswerScreen")
    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(escaped(self.question), style="bold"))
            yield Input(placeholder="your answer (enter sends, esc cancels)", id="answer")

    @on(Input.Submitted)
    def _send(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


#: The tree's label until the first read returns.
LOADING = "loading missions…"


class MissionsScreen(LiveScreen):
    """The Missions view (``m`` from the main screen)."""

    SCOPE = "missions"
    BINDINGS = keys.bindings(SCOPE)
    DEFAULT_CSS = """
    MissionsScreen #missions { height: 6; }
    MissionsScreen #lower { height: 1fr; }
    MissionsScreen #tree { height: 3fr; }
    MissionsScreen #body-scroll { height: 2fr; border-top: solid $panel; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.selected: int | None = None
        self.mission: Mission | None = None
        self.mission_workers: list[Worker] = []
        self._rows_sig: Any = None
        self._tree_sig: Any = None


    def compose(self) -> ComposeResult:
        yield HeaderBar()
        yield Static(Text("Missions", style="bold"), id="title")
        yield DataTable(id="missions", cursor_type="row", zebra_stripes=True)  # columns: _show_rows
        # One above the other: side by side, neither the tree nor the body has room at 80
        # or 120 columns (the tree's lines ran into the body, the worker's figures were cut).
        with Vertical(id="lower"):
            # "no mission" only once a read found none: until the first read returns, the
            # view says it is reading (an empty state shown early is a false one).
            yield Tree(Text(LOADING), id="tree")
            with VerticalScroll(id="body-scroll"):
                yield Static(Text(""), id="body")
        yield Footer()

    async def on_ledger(self, refresh: bool, committed: bool) -> None:
        if refresh:
            await self.load()

    async def load(self) -> None:
        """Read the missions and the selected one's workers; show what changed. A failed read
        keeps what is shown (the watcher marks the header stale)."""
        try:
            found, mission, workers = await self.wk.reader.call(lambda led: _read(led, self.selected))
        except Exception:
            self.wk.watcher.wake()
            return
        if not self.is_attached:  # closed while the read was in flight (or the console quit)
            return
        self._show_rows(found)
        self._show_mission(mission, workers)

    def _show_rows(self, found: list[Mission]) -> None:
        sig = [(m.id, m.state, m.turns) for m in found]
        if sig == self._rows_sig:
            return
        self._rows_sig = sig
        table = self.query_one("#missions", DataTable)
        keep = self.selected
        # Columns of fixed widths, the goal taking the rest of the screen: auto-sized ones
        # followed whatever was drawn first and squeezed the table until the next refresh.
        goal_width = max(20, (self.size.width or self.app.size.width) - TABLE_FIXED)
        table.clear(columns=True)
        for label, width in (("id", 4), ("state", 17), ("mission", 14), ("turns", 6), ("goal", goal_width)):
            table.add_column(label, width=width)
        for m in found:
            b = m.budget or {}
            table.add_row(Text(str(m.id)), _styled(m.state), Text(escaped_line(m.name, 14)),
                          Text(f"{m.turns}/{b.get('turns')}"), Text(escaped_line(m.goal, goal_width)),
                          key=str(m.id))
        if keep is not None and str(keep) in {str(m.id) for m in found}:
            table.move_cursor(row=table.get_row_index(str(keep)))

    def _show_mission(self, m: Mission | None, workers: list[Worker]) -> None:
        self.mission, self.mission_workers = m, workers
        tree = self.query_one("#tree", Tree)
        if m is None:
            if self._tree_sig != "none":
                self._tree_sig = "none"
                tree.reset(Text("no mission"))
                self.query_one("#body", Static).update(Text(""))
            return
        sig = json.dumps([m.id, m.state, m.turns, m.tokens, m.question, m.report, m.reason,
                          [(w.seq, w.state, w.attempts, w.note) for w in workers]], default=str)
        if sig == self._tree_sig:
            return
        self._tree_sig = sig
        root = Text(f"mission {m.id} ")
        root.append(escaped_line(m.name, 24), style="bold")
        root.append("  ")
        root.append_text(_styled(m.state))
        tree.reset(root)
        coord = tree.root.add(Text(f"coordinator: {m.coordinator}  turns {m.turns}/"
                                   f"{(m.budget or {}).get('turns')}"), expand=True)
        # Before the first layout the tree has no width yet: the screen's is the same (the
        # tree spans it), so the first paint is not wrapped at a guess.
        width = worker_width(tree.size.width or self.size.width or self.app.size.width)
        for w in workers:
            # Every line of a worker carries it in ``data``, so x acts on whichever is selected.
            node = coord.add(worker_label(w), data=w, expand=True)
            for line in worker_lines(w, width):
                node.add_leaf(line, data=w)
        tree.root.expand_all()
        self.query_one("#body", Static).update(render_body(m))

    def on_resize(self, event: events.Resize) -> None:
        # Widths follow the terminal: the table's goal and the tree's wrapped lines are
        # rebuilt for the new size now, not on the next change of the mission.
        self._rows_sig = self._tree_sig = None
        self.read_again()

    @on(DataTable.RowHighlighted, "#missions")
    def _pick(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value is not None:
            mid = int(event.row_key.value)
            if mid != self.selected:
                self.selected = mid
                self._tree_sig = None
                self.read_again()

    # -- actions ----------------------------------------------------------------------------
    def _act(self, fn: Any) -> None:
        async def go() -> None:
            try:
                res = await self.wk.actor.call(fn)
            except Exception as exc:  # a ledger error is reported, never fatal
                self.notify(f"failed: {exc}", severity="error", markup=False)
                return
            self.notify(escaped_line(res.message, 200), severity="information" if res.ok else "warning", markup=False)
            self._tree_sig = self._rows_sig = None
            self.read_again()
        self.run_worker(go(), group="missions-act")

    def _confirm(self, question: str, fn: Any) -> None:
        if refuse_read_only(self) or self.mission is None:
            return
        self.app.push_screen(ConfirmScreen(question), lambda yes: self._act(fn) if yes else None)

    def action_approve(self) -> None:
        m = self.mission
        if m is None:
            return
        mid, who = m.id, self.wk.config.operator
        self._confirm(f"Approve the report of mission {mid} and close it?",
                      lambda led: mactions.approve(led, mid, who))

    def action_abort(self) -> None:
        m = self.mission
        if m is None or m.state in MISSION_ENDED:
            return
        mid, who = m.id, self.wk.config.operator
        self._confirm(f"Abort mission {mid}? Live workers are killed; every artifact is kept.",
                      lambda led: mactions.abort(led, mid, who))

    def action_abandon_worker(self) -> None:
        m = self.mission
        node = self.query_one("#tree", Tree).cursor_node
        w = node.data if node is not None else None
        if m is None or not isinstance(w, Worker):
            self.notify("select a worker in the tree first (tab, then j/k)", markup=False)
            return
        mid, seq, who = m.id, w.seq, self.wk.config.operator
        if w.state not in ABANDONABLE:
            # Refused up front, as core.mission.actions.abandon_worker would refuse it after the dialog.
            self.notify(f"worker {seq} ({escaped_line(w.worker, 30)}) is {escaped_line(str(w.state), 20)}:"
                        " only a failed or running worker can be abandoned", markup=False)
            return
        self._confirm(f"Abandon worker {seq} ({escaped_line(w.worker, 30)}) of mission {mid}?",
                      lambda led: mactions.abandon_worker(led, mid, seq, who))

    def action_answer(self) -> None:
        m = self.mission
        if m is None or refuse_read_only(self):
            return
        if not m.question:
            self.notify(f"mission {m.id} has no open question", markup=False)
            return
        question = m.question
        mid, who = m.id, self.wk.config.operator

        def sent(text: str | None) -> None:
            if text:
                self._act(lambda led: mactions.answer(led, mid, text, who))
        self.app.push_screen(AnswerScreen(question), sent)

    def action_back(self) -> None:
        self.app.pop_screen()
