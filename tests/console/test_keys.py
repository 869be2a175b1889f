"""One key registry feeds the bindings, the help screen, the palette and README's key table."""

from __future__ import annotations

from pathlib import Path

from console import keys
from console.screens.detail import DetailScreen
from console.screens.escalation import EscalationScreen
from console.screens.history import JobHistoryScreen
from console.screens.main import MainScreen
from console.widgets.paged_table import PagedTable

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_key_table_is_the_registry():
    text = README.read_text(encoding="utf-8")
    start, end = "<!-- keys:start -->\n", "<!-- keys:end -->"
    assert start in text and end in text, "README needs the keys:start / keys:end markers"
    table = text.split(start, 1)[1].split(end, 1)[0]
    assert table == keys.readme_table(), "README key table differs: paste console.keys.readme_table()"


def test_screens_bind_exactly_the_registry():
    for cls, scope in ((MainScreen, "main"), (DetailScreen, "detail"), (PagedTable, "table"),
                       (EscalationScreen, "escalation"), (JobHistoryScreen, "history")):
        bound = {(b.key, b.action) for b in cls.BINDINGS}
        assert bound == {(b.key, b.action) for b in keys.bindings(scope)}


def test_every_bound_key_is_documented_or_a_second_binding_of_one():
    documented_sections = {k.section for k in keys.KEYS if k.doc}
    for k in keys.KEYS:
        assert k.section in documented_sections
        if k.bind and k.scopes:
            assert k.does or not k.doc


def test_space_marks_and_moves_down_says_so():
    space = next(k for k in keys.KEYS if k.key == "space")
    assert "move down" in space.does or "moves down" in space.does


def test_palette_entries_come_from_the_registry():
    texts = [t for t, _, _ in keys.palette("main")]
    assert "View: jobs" in texts and "Acknowledge selected escalation(s)" in texts
