"""Text for a terminal: the one escaper for untrusted text, and the one style for times.

Untrusted text — job output, error messages, handoffs, judge reasons, run and job names —
may carry Rich/Textual markup, ANSI/VT escape sequences (CSI, OSC such as an OSC 52
clipboard write, ``ESC c``), 8-bit C1 controls, invalid UTF-8 and invisible Unicode (bidi
overrides, zero-width and tag characters, fillers, variation selectors). Two policies, one
module:

* ``safe_text`` *escapes* what is unsafe, repr-style (``\\x1b``, ``\\u202e``): for the CLI
  and error messages, where the operator must see that something was there;
* ``stripped`` *drops* it: for one-line summaries where only the readable words matter
  (``stripped_line`` is ``stripped`` on one line, cut by terminal cells).

The console shows untrusted text through ``console.safe_text`` (``escaped``: ``safe_text``
with the console's choice of kept characters, wrapped in ``rich.text.Text``). Nothing here
ever interprets markup.

Times: every timestamp in the ledger is a float of Unix seconds (UTC). ``iso`` for JSON and
audit lines, ``utc_hms`` inside sentences, ``local_hms`` in one-line listings; ``duration``
(compact, fixed width: ``1m35s``) for how long something ran, ``age`` (words, via humanize:
"7 minutes") for how long ago something happened inside a sentence, and ``short_age``
("45s", "1m 16s") in every table, header and listing.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import humanize
from rich.cells import cell_len, get_character_cell_size

# -- escaping -------------------------------------------------------------------------------

#: Unicode categories ``safe_text`` escapes: controls, format (bidi, zero-width), surrogates,
#: line and paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def safe_text(value: Any, *, keep: str = "", also: Callable[[str], bool] | None = None) -> str:
    """``str(value)`` with unsafe characters escaped repr-style (``\\x1b``, ``\\u202e``).

    For untrusted text going into an error message or a terminal: a job name such as
    ``"x\\u001b]0;PWNED\\u0007"`` must not retitle or recolour the operator's terminal.
    ``keep``: characters left as they are (``"\\n\\t"`` for multi-line output); ``also``:
    a test for further characters to escape (e.g. ``invisible``). Everything else,
    including backslashes, is kept as is.
    """
    text = str(value)
    if also is None and text.isprintable():  # fast path; False for every unsafe category
        return text
    out = []
    for ch in text:
        if ch not in keep and (unicodedata.category(ch) in _UNSAFE_CATEGORIES or (also is not None and also(ch))):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF
                       else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


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
    """True for a character ``stripped`` drops as invisible (format, bidi, filler, variation
    selector, tag, …); for callers that show such characters escaped instead."""
    return _FORMAT.fullmatch(ch) is not None


def quoted(value: Any, mark: str = "'") -> str:
    """``value`` between ``mark`` quotes, escaped by ``safe_text`` (invisible characters too):
    the one notation for an untrusted name or line inside a message (``no job 'x\x1b[2J'``),
    instead of ``repr`` or ``json.dumps`` (which double a backslash already escaped, or write
    ``\u001b`` where output sections write ``\x1b``)."""
    return f"{mark}{safe_text(value, also=invisible)}{mark}"


def as_text(value: object) -> str:
    """``value`` as one ``str`` before any escaping: ``None`` is "", bytes are decoded as UTF-8
    and other non-strings go through ``str()``; invalid UTF-8 (bytes, or str with surrogate
    escapes) becomes U+FFFD and CRLF, U+2028 and U+2029 become newlines. Shared by both
    ``stripped`` and ``console.safe_text.escaped`` (shows)."""
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        s = bytes(value).decode("utf-8", "replace")
    else:
        s = value if isinstance(value, str) else str(value)
    s = _SURROGATES.sub("\ufffd", s)
    return s.replace("\r\n", "\n").replace("\u2028", "\n").replace("\u2029", "\n")


def stripped(value: object, *, keep_newlines: bool = True) -> str:
    """Return ``value`` as printable text: escape sequences, control and invisible characters
    removed, invalid UTF-8 (bytes, or str with surrogate escapes) replaced by U+FFFD.

    ``None`` becomes ""; other non-strings go through ``str()``. Tabs become four spaces;
    with ``keep_newlines=False`` line breaks become spaces (for one-line cells).
    """
    s = as_text(value)
    s = _FORMAT.sub("", s)
    s = _STRING_SEQ.sub("", s)
    s = _CSI.sub("", s)
    s = _ESC_OTHER.sub("", s)
    s = s.replace("\t", "    ")
    if not keep_newlines:
        s = s.replace("\n", " ")
    return _CONTROLS.sub("", s)


def cut(s: str, width: int) -> str:
    """``s`` cut to at most ``width`` terminal cells, with "…" when it was cut. Cells, not
    code points: a CJK character or an emoji takes two cells, a combining mark none."""
    if width <= 0:
        return ""
    if cell_len(s) <= width:
        return s
    out, used = [], 0
    for ch in s:
        w = get_character_cell_size(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def stripped_line(value: object, width: int | None = None) -> str:
    """``stripped`` on one line, optionally cut to ``width`` terminal cells with an ellipsis."""
    s = stripped(value, keep_newlines=False)
    return s if width is None else cut(s, width)


# -- times ----------------------------------------------------------------------------------

def now() -> float:
    """Current wall-clock time as Unix seconds (UTC, float)."""
    return time.time()


def iso(ts: float | None) -> str | None:
    """Unix seconds → ISO-8601 UTC string with seconds precision ("2026-11-30T04:12:00Z")."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_hms(ts: float | None) -> str:
    """Unix seconds → ``"04:12:03 UTC"`` for sentences (``"?"`` for None)."""
    if ts is None:
        return "?"
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%H:%M:%S UTC")


def utc_when(ts: float | None, now: float | None = None) -> str:
    """Unix seconds → ``"04:12:03 UTC"`` when ``ts`` falls on the same UTC day as ``now``
    (default: now), else with its date, ``"Thu 2026-12-03 04:12 UTC"``: a snooze of a week
    must not read as if it ended today. ``"?"`` for None."""
    if ts is None:
        return "?"
    when = datetime.fromtimestamp(ts, tz=UTC)
    today = datetime.fromtimestamp(time.time() if now is None else now, tz=UTC).date()
    return when.strftime("%H:%M:%S UTC") if when.date() == today else when.strftime("%a %Y-%m-%d %H:%M UTC")


def local_hms(ts: float | None) -> str:
    """Unix seconds → local-time "HH:MM:SS" for one-line displays; "-" for None."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S")


def duration(seconds: float | None) -> str:
    """How long something ran, compact and at most 8 characters so columns keep their
    width: ``0.00s``, ``18.8s``, ``1m35s``, ``1h02m``; "-" for None."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.2f}s" if seconds < 10 else f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def age(seconds: float) -> str:
    """A span in words for sentences ("7 minutes", "a day"), via humanize; negative spans
    count as 0."""
    return humanize.naturaldelta(max(0.0, seconds))


def short_age(seconds: float | None, units: int = 2) -> str:
    """A span in the one compact style of every table, header and listing: the largest unit
    first, then the next (``45s``, ``1m 16s``, ``1h 5m``, ``2d 4h``; a zero second unit is
    left out: ``3m``); ``units=1`` keeps only the largest (``1m``, ``1h``, ``2d``) for narrow
    columns. Never ``-0s``; a negative span keeps its sign (a time still to come); "-" for
    None."""
    if seconds is None:
        return "-"
    s = int(abs(seconds))
    sign = "-" if seconds < 0 and s else ""
    parts: list[str] = []
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        if s >= size or (size == 1 and not parts):
            n, s = divmod(s, size)
            if n or not parts:
                parts.append(f"{n}{unit}")
            if len(parts) >= units:
                break
        elif parts:
            break  # the next unit down is zero: "3m", not "3m 0s"
    return sign + " ".join(parts)
