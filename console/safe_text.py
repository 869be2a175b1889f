"""The console's face of the one escaper (``core.text.safe_text``) for every string Watchkeeper
did not write itself.

Job output, error messages, handoffs, judge reasons, run and job names, owners and file
names may contain Rich or Textual markup, ANSI/VT escape sequences (CSI, OSC such as an OSC
52 clipboard write or a title change, ``ESC c``), 8-bit C1 controls, invalid UTF-8 and
invisible Unicode (bidi overrides, zero-width and tag characters, fillers, variation
selectors). ``escaped`` shows every such character as a visible escape, the way the CLI does
(``bad\\x1b[31mred\\u202e``): never interpreted by the terminal, never parsed as markup, and a
name that differs from another only by invisible characters never looks the same.
``output`` is ``escaped`` for a job's own output, where colour codes (SGR: ``ESC [ … m``) are
common and harmless: those are dropped so the text stays readable; every other sequence is
escaped like anywhere else. ``text`` wraps the result in ``rich.text.Text``.

``core.text.stripped``/``stripped_line`` drop those characters instead; these *show* them.
"""

from __future__ import annotations

import re

from rich.text import Text

from core.text import as_text, cut, invisible, safe_text

__all__ = ["escaped", "escaped_line", "invisible", "output", "text"]

# Select Graphic Rendition only (colours, bold …): ESC [ params m, nothing else.
_SGR = re.compile(r"\x1b\[[0-9;:]*m")


def _escaped(ch: str) -> bool:
    # Variation selectors 15/16 right after an emoji or symbol are how text is written
    # (✔️): keep those; everything else invisible is escaped (core.text.invisible).
    return invisible(ch) and ch not in "\ufe0e\ufe0f"


def escaped(value: object, *, keep_newlines: bool = True) -> str:
    """``value`` as printable text: control, escape and invisible characters shown as visible
    escapes (``\\x1b``, ``\\u202e``, ``\\U000e0041``: ``core.text.safe_text``), invalid UTF-8
    (bytes, or str with surrogate escapes) as U+FFFD. ``None`` becomes ""; tabs become four
    spaces; line and paragraph separators become newlines, and with ``keep_newlines=False``
    newlines become spaces (one-line cells)."""
    s = as_text(value).replace("\t", "    ")
    if not keep_newlines:
        s = s.replace("\n", " ")
    out = safe_text(s, keep="\n", also=_escaped)
    # A VS15/VS16 kept above is only legitimate after a visible non-ASCII character.
    return re.sub(r"(^|[\x00-\x7f])([\ufe0e\ufe0f])", lambda m: m[1] + f"\\u{ord(m[2]):04x}", out)


def output(value: object, *, keep_newlines: bool = True) -> str:
    """A job's own output (stdout/stderr): ``escaped`` after dropping colour codes (SGR)."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", "replace")
    return escaped(_SGR.sub("", value) if isinstance(value, str) else value, keep_newlines=keep_newlines)


def escaped_line(value: object, width: int | None = None) -> str:
    """``escaped`` on one line, optionally cut to ``width`` terminal cells with an ellipsis."""
    s = escaped(value, keep_newlines=False)
    return s if width is None else cut(s, width)


def text(value: object, style: str = "", *, one_line: bool = False) -> Text:
    """``escaped(value)`` as a ``rich.text.Text`` (never parsed as markup)."""
    return Text(escaped(value, keep_newlines=not one_line), style=style, no_wrap=one_line, end="")
