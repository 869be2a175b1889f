"""The one key registry: bindings, the help screen, the command palette and the manual's key
reference (``docs/`` via ``console.reference``) all come from ``KEYS``, so they never disagree.

A ``Key`` is bound on the screens named in ``scopes`` (``bindings(scope)`` builds a screen's
``BINDINGS``); ``doc`` rows make the help screen and key reference (``help_rows()``,
``key_table()``); ``palette`` entries are the command palette's commands for a screen
(``palette(scope)``). Keys that are handled in ``on_key`` (dialog answers) or not keys at all
(the mouse) are documented with ``bind=False``.

Only keys that survive SSH and tmux: letters, digits, arrows, PgUp/PgDn/Home/End, Enter, Esc,
Space and ctrl+letter (see TEXTUAL_NOTES.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from textual.binding import Binding, BindingType

#: Screens (and the table widget) that take bindings from here.
SCOPES = ("main", "table", "detail", "escalation", "history", "help", "missions")


@dataclass(frozen=True)
class Key:
    """One binding and how it is documented.

    ``key``: Textual key names, comma-separated (``"down,j"``). ``action``: the action run on
    the scope's screen (``"view('jobs')"``, ``"app.help"``). ``label``: the footer's word.
    ``section``: the help screen's group. ``shown``: how help and the manual write the key
    (default: from ``key``). ``where`` / ``does``: the key reference's columns (``does`` is the help text
    too). ``doc=False``: a second binding of a documented row (not listed again).
    """

    key: str
    action: str
    label: str
    section: str
    where: str = ""
    does: str = ""
    scopes: tuple[str, ...] = ("main",)
    shown: str = ""
    show: bool = True
    priority: bool = False
    palette: str = ""
    doc: bool = True
    bind: bool = True
    code: bool = True  # the manual writes the keys as `code` (not for "mouse click, wheel")
    #: An operator action that writes the ledger: a read-only console hides it (footer,
    #: palette, the key itself), as ``ACTING`` lists.
    acts: bool = False

    @property
    def display(self) -> str:
        if self.shown:
            return self.shown
        names = {"question_mark": "?", "slash": "/", "colon": ":", "space": "space", "escape": "esc",
                 "enter": "enter", "up": "↑", "down": "↓", "pageup": "PgUp", "pagedown": "PgDn",
                 "home": "Home", "end": "End"}
        return " / ".join(names.get(k, k) for k in self.key.split(","))


TABLES = ("table",)
EVERY_SCREEN = ("main", "detail", "escalation", "history")

KEYS: tuple[Key, ...] = (
    # -- general -------------------------------------------------------------------------
    # The main screen's own "help" (its check_action sees it: the filter box takes "?").
    Key("question_mark", "help", "Help", "General", "everywhere",
        "every binding, from this same list (esc, q or ? closes it)", palette="Help: all keys"),
    Key("question_mark", "app.help", "Help", "General", scopes=("detail", "escalation", "history", "missions"),
        doc=False),
    Key("colon", "palette", "Palette", "General", "everywhere",
        "command palette: every view and action, \"Outcomes of job X\", \"History of job X\", "
        "save a screenshot (to --screenshot-dir, else the user's data folder; it says where)",
        shown="ctrl+p / :", show=False),
    Key("colon", "app.command_palette", "Palette", "General", scopes=("detail", "escalation", "history", "missions"),
        show=False, doc=False),
    Key("escape", "back", "Back", "General", "everywhere",
        "back: close filter / clear marks / return to jobs (from a job's outcomes) / clear the "
        "filter / leave a detail screen", show=False),
    Key("escape", "back", "Back", "General", scopes=("detail", "escalation", "history", "missions"), doc=False),
    Key("q", "quit", "Quit", "General", "main, detail screens",
        "quit (main; in `up` it asks first, as it stops the runner), back (detail screens)",
        scopes=("main",)),
    Key("q", "back", "Back", "General", doc=False, scopes=("detail", "escalation", "history", "missions"),
        show=False),
    Key("ctrl+q", "app.quit", "Quit", "General", "everywhere", "quit", scopes=(), bind=False),
    # Textual binds ctrl+c itself (to a hint saying which key quits): the app's
    # action_help_quit quits as ctrl+q does, asking first in `up`; a focused text field copies.
    Key("ctrl+c", "app.quit", "Quit", "General", "everywhere",
        "quit, as ctrl+q (in the filter's text field it copies instead)", scopes=(), bind=False),
    # -- views -----------------------------------------------------------------------------
    Key("1", "view('escalations')", "Escalations", "Views", "main", "switch view: 1 escalations, "
        "2 outcomes, 3 live & orphans, 4 jobs", shown="1 2 3 4", show=False,
        palette="View: escalations"),
    Key("2", "view('outcomes')", "Outcomes", "Views", show=False, doc=False, palette="View: outcomes"),
    Key("3", "view('orphans')", "Live & orphans", "Views", show=False, doc=False,
        palette="View: live & orphans"),
    Key("4", "view('jobs')", "Jobs", "Views", show=False, doc=False, palette="View: jobs"),
    Key("m", "app.missions", "Missions", "Views", "main",
        "missions: each mission as a tree (coordinator; workers with state, confidence, steps), its "
        "question and report", show=False, palette="View: missions"),
    # -- move --------------------------------------------------------------------------------
    Key("down,j", "cursor(1)", "Down", "Move", "tables, detail screens, help", "move one row / line",
        scopes=TABLES, shown="j / ↓, k / ↑", show=False),
    Key("up,k", "cursor(-1)", "Up", "Move", scopes=TABLES, show=False, doc=False),
    Key("pagedown", "page(1)", "Page down", "Move", "tables, help", "one screen down / up", scopes=TABLES,
        shown="PgDn / PgUp", show=False),
    Key("pageup", "page(-1)", "Page up", "Move", scopes=TABLES, show=False, doc=False),
    Key("home,g", "scroll_top", "Top", "Move", "tables, detail screens, help", "first / last row (line)",
        scopes=TABLES, shown="g / Home, G / End", show=False),
    Key("end,G", "scroll_bottom", "Bottom", "Move", scopes=TABLES, show=False, doc=False),
    Key("j", "scroll(1)", "Down", "Move", scopes=("detail",), show=False, doc=False),
    Key("j", "cursor(1)", "Down", "Move", scopes=("escalation", "history"), show=False, doc=False),
    Key("k", "cursor(-1)", "Up", "Move", scopes=("escalation", "history"), show=False, doc=False),
    Key("k", "scroll(-1)", "Up", "Move", scopes=("detail",), show=False, doc=False),
    Key("g", "top", "Top", "Move", scopes=("detail",), show=False, doc=False),
    Key("G", "bottom", "Bottom", "Move", scopes=("detail",), show=False, doc=False),
    # The help screen scrolls with the same keys.
    Key("down,j", "scroll(1)", "Down", "Move", scopes=("help",), show=False, doc=False),
    Key("up,k", "scroll(-1)", "Up", "Move", scopes=("help",), show=False, doc=False),
    Key("pagedown", "page(1)", "Page down", "Move", scopes=("help",), show=False, doc=False),
    Key("pageup", "page(-1)", "Page up", "Move", scopes=("help",), show=False, doc=False),
    Key("home,g", "top", "Top", "Move", scopes=("help",), show=False, doc=False),
    Key("end,G", "bottom", "Bottom", "Move", scopes=("help",), show=False, doc=False),
    Key("click", "", "", "Move", "tables", "click moves the cursor; a click on the cursor row (or a "
        "double click) opens it; the wheel scrolls", scopes=(), shown="mouse click, wheel", bind=False,
        code=False),
    # -- open --------------------------------------------------------------------------------
    Key("enter", "select", "Open", "Open", "tables",
        "open: an escalation's detail (its occurrences, who acted, notifications), a run's detail, "
        "a job's outcomes (esc returns to jobs)", scopes=TABLES, show=False),
    Key("h", "history", "History", "Open", "jobs, job's outcomes",
        "the job's history: last runs as a chart, success rate, usual duration, next run",
        palette="History of the selected job"),
    Key("o", "outcomes", "Outcomes", "Open", "job history", "that job's outcomes in the main view",
        scopes=("history",)),
    Key("J", "toggle_json", "JSON", "Open", "run detail",
        "handoff and verification as raw JSON / as readable fields", scopes=("detail",)),
    # -- triage ------------------------------------------------------------------------------
    Key("a", "acknowledge", "Ack", "Triage", "escalations, escalation detail",
        "acknowledge (the marked rows, or the cursor row)", scopes=("main", "escalation"), acts=True,
        palette="Acknowledge selected escalation(s)"),
    Key("s", "snooze", "Snooze", "Triage", "escalations, escalation detail",
        "snooze: pick 15 min, 1 h, 4 h, 1 day, 1 week (1–5 or ↑↓), enter snoozes", scopes=("main", "escalation"), acts=True,
        palette="Snooze selected escalation(s)"),
    Key("R", "resolve", "Resolve", "Triage", "escalations, escalation detail", "resolve",
        scopes=("main",), show=False, palette="Resolve selected escalation(s)", acts=True),
    # The detail screen's footer has room for it (the main one's does not)
    Key("R", "resolve", "Resolve", "Triage", scopes=("escalation",), acts=True, doc=False),
    Key("space", "mark", "Mark", "Triage", "tables",
        "mark / unmark the row and move down (marks survive scrolling; a, s, R act on every "
        "marked row)", show=False, palette=""),
    # -- runs --------------------------------------------------------------------------------
    Key("r", "retry", "Retry", "Runs", "escalations, outcomes, live & orphans, run detail",
        "retry: a new attempt of the run's lineage (asks first)", scopes=("main", "detail"), acts=True,
        palette="Retry selected run"),
    Key("x", "abandon", "Abandon", "Runs", "escalations, outcomes, live & orphans, run detail",
        "abandon: kills a live process group, keeps every artifact (asks first; a run that already ended "
        "is refused up front with a notice, \"run 863 already ended (✓ ok): nothing to abandon\")",
        scopes=("main", "detail"), palette="Abandon selected run", acts=True),
    Key("y,enter", "", "", "Runs", "confirm dialog",
        "yes (n / esc: no; keys typed before the dialog appeared do not answer it)", scopes=(),
        shown="y / enter, n / esc", bind=False),
    # -- jobs --------------------------------------------------------------------------------
    Key("P", "pause_job", "Pause job", "Jobs", "jobs, job history",
        "pause / resume the job (asks first; held in the ledger, survives restarts)",
        scopes=("main", "history"), palette="Pause / resume the selected job", acts=True),
    Key("t", "trigger", "Run now", "Jobs", "jobs, job history", "run the job now (asks first)",
        scopes=("main", "history"), palette="Run the selected job now", acts=True),
    # -- missions ----------------------------------------------------------------------------
    Key("A", "approve", "Approve", "Missions", "missions",
        "approve the report and close the mission (every worker delivered or abandoned; asks first)",
        scopes=("missions",), acts=True),
    Key("w", "answer", "Answer", "Missions", "missions",
        "answer the mission's open question (the coordinator is woken with the answer)", scopes=("missions",), acts=True),
    Key("x", "abandon_worker", "Abandon worker", "Missions", "missions",
        "abandon the worker selected in the tree (a failed one; a running one is killed, artifacts kept; "
        "asks first)", scopes=("missions",), acts=True),
    Key("X", "abort", "Abort", "Missions", "missions",
        "abort the mission: live workers killed, every artifact kept (asks first)", scopes=("missions",), acts=True),
    # -- live --------------------------------------------------------------------------------
    Key("p", "pause", "Pause", "Live", "main", "pause live updates (the view freezes; p again resumes)",
        show=False, palette="Pause / resume live updates"),
    Key("f", "follow", "Follow", "Live", "main",
        "follow: live inserts keep the selected row where it is on screen (the list scrolls with it)",
        show=False, palette="Follow selected row on/off"),
    Key("l", "follow_output", "Follow", "Live", "run detail, escalation detail",
        "follow a running job's output as it grows (like k9s `l`, `tail -f`): the view stays at its"
        " end; l again, or scrolling up, stops", scopes=("detail", "escalation")),
    # -- find --------------------------------------------------------------------------------
    Key("slash", "filter", "Filter", "Find", "main",
        "filter: job:NAME state:S kind:K host:H plus free text; enter applies, esc clears. state: and "
        "kind: are exact words, case-insensitive (the console's own words work too: state:acked, "
        "state:timeout, kind:exhausted); host: is a hostname (its runs, their escalations, its "
        "host_down); job: and free text match any part. Everything typed "
        "after / goes into the box, even in one burst", priority=True, palette="Filter…"),
    Key("S", "sort", "Sort", "Find", "escalations, outcomes, jobs",
        "sort (like k9s): each press orders the table by its next column, in the direction that "
        "column reads best (its heading shows ▲ or ▼), then back to the view's own order",
        show=False, palette="Sort by the next column"),
    Key("slash", "search", "Search", "Find", "run detail", "search the detail and output (n: next match)",
        scopes=("detail",), priority=True),
    Key("n", "next_match", "Next", "Find", scopes=("detail",), doc=False),
)


#: Actions that write the ledger (``Key.acts``): hidden on a read-only console.
ACTING = frozenset(k.action for k in KEYS if k.acts)


def acting_keys(scope: str) -> frozenset[str]:
    """The key names (``"a"``, ``"x"`` …) bound to an ``ACTING`` action on screen ``scope``."""
    return frozenset(name for k in KEYS if k.acts and scope in k.scopes for name in k.key.split(","))


#: The footer's order (the most used first); keys not named here follow in registry order.
FOOTER = ("help", "app.help", "filter", "search", "next_match", "acknowledge", "snooze", "retry", "abandon",
          "history", "outcomes", "toggle_json", "pause_job", "trigger", "back", "quit")


def bindings(scope: str) -> list[BindingType]:
    """The ``BINDINGS`` of screen (or widget) ``scope``: every bound key naming it, the footer's
    keys in ``FOOTER`` order."""
    mine = [k for k in KEYS if k.bind and scope in k.scopes]
    mine.sort(key=lambda k: FOOTER.index(k.action) if k.action in FOOTER else len(FOOTER))
    return [Binding(k.key, k.action, k.label, show=k.show, priority=k.priority) for k in mine]


def help_rows() -> list[tuple[str, str, str, str]]:
    """(section, keys as written, what they do, where they work) for every documented key,
    in registry order."""
    return [(k.section, k.display, k.does, k.where) for k in KEYS if k.doc]


def palette(scope: str) -> list[tuple[str, str, str]]:
    """(palette text, action, key as written) for the palette entries of screen ``scope``."""
    return [(k.palette, k.action, k.display) for k in KEYS if k.palette and scope in k.scopes]


def key_table() -> str:
    """The manual's key table (Markdown), rendered from the registry (``console.reference``
    puts it in docs/reference/keys.md when the manual is built)."""
    lines = ["| Key | Where | Does |", "|-----|-------|------|"]
    for k in KEYS:
        if k.doc:
            keys = k.display
            if k.code:
                # Quote each key, not the separators between them (" / ", ", ", " ").
                keys = "".join(p if p in (" / ", ", ", " ") else f"`{p}`"
                               for p in re.split(r"( / |, | )", k.display) if p)
            lines.append(f"| {keys} | {k.where} | {k.does} |")
    return "\n".join(lines) + "\n"
