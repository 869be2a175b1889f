"""The one sanitiser for every string Watchkeeper did not write itself.

Job output, error messages, handoffs, judge reasons, run and job names may contain Rich or
Textual markup, ANSI/VT escape sequences (CSI, OSC such as an OSC 52 clipboard write,
``ESC c``), 8-bit C1 controls, invalid UTF-8 and invisible Unicode (bidi overrides,
zero-width and tag characters, fillers, variation selectors). ``clean`` turns any of them
into plain, printable text; ``text`` wraps the result in ``rich.text.Text`` so no rendering path parses
it as markup. Every widget that shows such a string goes through here.
"""

from __future__ import annotations

import re

from rich.text import Text

# OSC/DCS/SOS/PM/APC strings run to BEL or ST (ESC \); an unterminated one runs to the end.
_STRING_SEQ = re.compile(r"\x1b[\]P^_X][^\x07\x1b]*(?:\x07|\x1b\\|$)|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\|$)")
_CSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?")
_ESC_OTHER = re.compile(r"\x1b[ -/]*[0-~]?")
# Remaining C0 controls except tab and newline, DEL, and the C1 block.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
# Bidi overrides/isolates, zero-width and other format characters, and everything else
# Unicode says renders as nothing (Default_Ignorable_Code_Point): combining grapheme joiner
# U+034F, the Hangul fillers U+115F U+1160 U+3164 U+FFA0, Khmer U+17B4 U+17B5, Mongolian
# U+180B-U+180F, variation selectors U+FE00-U+FE0F and U+E0100-U+E01EF, tag characters
# U+E0000-U+E007F (the rest of U+E0000-U+E0FFF is reserved as ignorable too), shorthand and
# musical format controls. They can make text read differently from what it is (U+202E
# reverses a line), pass for blank names, or smuggle hidden data after a visible character,
# so they never reach the screen. (A lone U+FE0F after an emoji goes too: the emoji still
# shows, in text style.)
_FORMAT = re.compile(
    r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    r"\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def invisible(ch: str) -> bool:
    """True for a character ``clean`` drops as invisible (format, bidi, filler, variation
    selector, tag, …); for callers that show such characters escaped instead."""
    return _FORMAT.fullmatch(ch) is not None


def clean(value: object, *, keep_newlines: bool = True) -> str:
    """Return ``value`` as printable text: escape sequences and control characters removed,
    invalid UTF-8 (bytes, or str with surrogate escapes) replaced by U+FFFD.

    ``None`` becomes ""; other non-strings go through ``str()``. Tabs become four spaces;
    with ``keep_newlines=False`` line breaks become spaces (for one-line cells).
    """
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        s = bytes(value).decode("utf-8", "replace")
    else:
        s = value if isinstance(value, str) else str(value)
    s = _SURROGATES.sub("\ufffd", s)
    s = s.replace("\r\n", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
    s = _FORMAT.sub("", s)
    s = _STRING_SEQ.sub("", s)
    s = _CSI.sub("", s)
    s = _ESC_OTHER.sub("", s)
    s = s.replace("\t", "    ")
    if not keep_newlines:
        s = s.replace("\n", " ")
    return _CONTROLS.sub("", s)


def text(value: object, style: str = "", *, one_line: bool = False) -> Text:
    """``clean(value)`` as a ``rich.text.Text`` (never parsed as markup)."""
    return Text(clean(value, keep_newlines=not one_line), style=style, no_wrap=one_line, end="")


def one_line(value: object, width: int | None = None) -> str:
    """``clean`` on one line, optionally cut to ``width`` cells with an ellipsis."""
    s = clean(value, keep_newlines=False)
    if width is not None and len(s) > width:
        s = s[: max(0, width - 1)] + "…"
    return s
