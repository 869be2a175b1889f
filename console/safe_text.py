"""The console's face of the one sanitiser (``core.text``) for every string Watchkeeper did not
write itself.

Job output, error messages, handoffs, judge reasons, run and job names may contain Rich or
Textual markup, ANSI/VT escape sequences (CSI, OSC such as an OSC 52 clipboard write,
``ESC c``), 8-bit C1 controls, invalid UTF-8 and invisible Unicode (bidi overrides,
zero-width and tag characters, fillers, variation selectors). ``clean`` turns any of them
into plain, printable text; ``text`` wraps the result in ``rich.text.Text`` so no rendering path parses
it as markup. Every widget that shows such a string goes through here.
"""

from __future__ import annotations

from rich.text import Text

from core.text import clean, invisible, one_line

#: The one escaper lives in ``core.text``; the console imports it from here, with ``text``.
__all__ = ["clean", "invisible", "one_line", "text"]


def text(value: object, style: str = "", *, one_line: bool = False) -> Text:
    """``clean(value)`` as a ``rich.text.Text`` (never parsed as markup)."""
    return Text(clean(value, keep_newlines=not one_line), style=style, no_wrap=one_line, end="")
