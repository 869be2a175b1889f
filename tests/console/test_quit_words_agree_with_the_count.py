"""The quit question in ``up`` says what happens to the runs in flight in words that agree
with their number: "1 run in flight: it keeps running", "3 runs in flight: they keep running"."""

from __future__ import annotations

from console.app import quit_detail


def test_one_run_is_it_and_several_are_they():
    one = quit_detail(1, "leave")
    assert one.startswith("1 run in flight: it keeps running under its monitor;")
    assert "re-attaches it and records how it ends." in one
    several = quit_detail(3, "leave")
    assert several.startswith("3 runs in flight: they keep running under their monitors;")
    assert "re-attaches them and records how they end." in several
    assert quit_detail(1, "kill").startswith("1 run in flight: it is ended now (--kill)")
    assert quit_detail(2, "drain").startswith("2 runs in flight: the runner waits for them to finish")
    assert quit_detail(0, "leave").startswith("No run is in flight.")
