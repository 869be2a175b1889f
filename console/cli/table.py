"""Listings on a terminal (``runs``, ``escalations``, ``tail``): how wide a line may be, and
how its columns are narrowed so a line never wraps and every value stays under its heading.

On a terminal a line fits its width (``terminal_width``: $COLUMNS, else the terminal's own
size, as ``shutil.get_terminal_size`` reads them): the cuttable columns (job, host, kind,
owner) are narrowed, widest first, down to their floor until the last, free-text column
(REASON) has ``REASON_LEAST`` characters, and that column is cut with "…" to what is left.
Piped output (and ``--json``) keeps the full text. Cutting goes through the CLI's one escaper
(``console.cli.common.shown``), so the cut counts escaped characters.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from typing import Any

from console.cli.common import shown

#: The characters the last free-text column keeps on a terminal before other columns are
#: narrowed for it (they stop at their floor; a very narrow terminal gets less).
REASON_LEAST = 20


def terminal_width() -> int | None:
    """The characters a listing line may take: the terminal's width ($COLUMNS first) when
    stdout is a terminal; None (no limit, the full text) when it is piped or redirected."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def narrowed(widths: Mapping[str, int], floors: Mapping[str, int], fixed: int, room: int | None) -> dict[str, int]:
    """``widths`` (characters per column) with the columns named in ``floors`` narrowed, the
    one with the most to spare first, one character at a time and never below its floor,
    until the columns plus ``fixed`` characters (separators, columns of other widths) leave
    ``REASON_LEAST`` characters of ``room`` for the last column. ``room`` None: unchanged."""
    out = dict(widths)
    if room is None:
        return out
    budget = room - REASON_LEAST - fixed
    while sum(out.values()) > budget:
        spare = [k for k in floors if out[k] > floors[k]]
        if not spare:
            break
        widest = max(spare, key=lambda k: out[k] - floors[k])
        out[widest] -= 1
    return out


def last_column(value: Any, used: int, room: int | None) -> str:
    """The last, free-text column of a line whose other columns take ``used`` characters:
    ``value`` escaped on one line (``shown``), cut with "…" to the rest of ``room`` (at least
    one character); the full text when ``room`` is None."""
    return shown(value, None if room is None else max(1, room - used))


def fold(text: str, width: int) -> list[str]:
    """An already escaped line ``text`` folded to ``width`` terminal columns (a wide character
    counts two, as the terminal draws it): broken at spaces where it can, inside a word only
    when the word alone is wider; continuation lines indented four columns past the line's
    own indent. A line that fits comes back as it is."""
    from rich.cells import cell_len, chop_cells

    if cell_len(text) <= width:
        return [text]
    body = text.lstrip(" ")
    lead = " " * min(len(text) - len(body) + 4, width // 2)
    lines: list[str] = []
    cur = text[: len(text) - len(body)]
    for word in body.split(" "):
        start = not cur.strip()
        if start and not word:
            continue  # a run of spaces at a fold: the indent stands for it
        joined = cur + word if start else f"{cur} {word}"
        if cell_len(joined) <= width:
            cur = joined
            continue
        if not start:
            lines.append(cur.rstrip(" "))
            cur = lead
        if cell_len(cur + word) <= width:
            cur += word
            continue
        pieces = chop_cells(word, max(1, width - cell_len(cur)))
        for piece in pieces[:-1]:
            lines.append(cur + piece)
            cur = lead
        cur += pieces[-1]
    lines.append(cur.rstrip(" "))
    return lines


def folded(text: str, room: int | None) -> str:
    """``text`` (already escaped, maybe several lines) as shown on a terminal ``room``
    columns wide: each line folded (``fold``, at least 40 columns); piped (``room`` None) as
    it is."""
    if room is None:
        return text
    return "\n".join(line for part in text.split("\n") for line in fold(part, max(room, 40)))
