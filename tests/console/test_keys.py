"""One key registry feeds the bindings, the help screen, the palette and the manual's key reference."""

from __future__ import annotations

from console import keys
from console.screens.detail import DetailScreen
from console.screens.escalation import EscalationScreen
from console.screens.history import JobHistoryScreen
from console.screens.main import MainScreen
from console.widgets.paged_table import PagedTable


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
