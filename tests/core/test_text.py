"""core.text: the one escaper and the one time style."""

from __future__ import annotations

from rich.cells import cell_len

from console import safe_text as console_safe_text
from core import text
from core.spec import model


def test_old_names_are_the_one_escaper():
    assert model.safe_text is text.safe_text
    # The console escapes through core.text.safe_text, the CLI's escaper (visible escapes).
    assert console_safe_text.escaped("x\x1b\u202ey") == text.safe_text("x\x1b\u202ey") == "x\\x1b\\u202ey"


def test_stripped_line_cuts_by_terminal_cells_not_code_points():
    wide = "日本語のジョブ名"  # 8 characters, 16 cells
    cut = text.stripped_line(wide, 7)
    assert cell_len(cut) <= 7 and cut.endswith("…") and cut == "日本語…"
    assert text.stripped_line("e\u0301" * 5, 5) == "e\u0301" * 5  # combining marks take no cell
    assert text.stripped_line("abc", 3) == "abc" and text.stripped_line("abcd", 3) == "ab…"
    assert text.stripped_line("x", 0) == ""


def test_stripped_line_strips_before_cutting():
    assert text.stripped_line("a\x1b[31mb\nc\u202ed", 10) == "ab cd"


def test_safe_text_escapes_what_stripped_drops():
    assert text.safe_text("job\x1b]0;PWNED\x07") == "job\\x1b]0;PWNED\\x07"
    assert text.stripped("job\x1b]0;PWNED\x07") == "job"


def test_times_and_spans():
    assert text.iso(0) == "1970-01-01T00:00:00Z" and text.utc_hms(3723) == "01:02:03 UTC"
    assert [text.duration(x) for x in (None, 0.004, 18.84, 95.2, 3725)] == ["-", "0.00s", "18.8s", "1m35s", "1h02m"]
    assert text.age(420) == "7 minutes" and text.age(-5) == "a moment"
    assert [text.short_age(x) for x in (12, 420, 18000, 259200)] == ["12s", "7m", "5h", "3d"]
