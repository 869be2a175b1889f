"""Evidence, read raw: what one finished run left behind, in the form the judge compares.

The supervisor judges the work, not only the exit. For every outcome it reads the job's own
output (stdout head and tail, stderr tail), the handoff's status and result content, the files
the run claimed or the spec expects (exist? size in bytes?) and the verify results. This module
turns that raw material into comparable facts, with no I/O:

* ``line_shapes(text)`` — each output line with numbers, ids, paths and times masked, and the
  bare integers it carried (the *work counts*: ``exported 15234 rows`` → shape
  ``exported <N> rows``, count ``15234``).
* ``result_problems(handoff)`` — what a handoff's result content says about itself: degraded
  or partial flags, failed children, ``n of m`` ratios, error fields.
* ``error_like(line)`` — whether a line reads like an error (the shapes that matter most when
  they are new).

Why a small masker and not drain3: a template miner clusters lines by token similarity, so a
new error line the same length as a routine one can be absorbed into the routine cluster, and
its templates do not say where the numbers were. The judge needs exact shape identity and the
position of each count; a dozen ordered regular expressions give both, deterministically.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from core.text import cut

#: Lines of one output stream considered (head + tail are already bounded by the capture).
MAX_LINES = 400
#: Characters of one line considered; longer lines are cut (their tail rarely shapes them).
MAX_LINE_CHARS = 300

# Order matters: the most specific tokens are masked first, so a timestamp is one <TIME>,
# not three <N>s. Each pattern replaces a token with a placeholder that carries no digits; its
# guard (a string the pattern cannot match without) skips it cheaply on most lines.
_MASKS: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = (
    # Quoted text (a subject, a title, a table name) varies from run to run like an id does.
    (('"', "“"), re.compile(r'"[^"]{1,200}"|“[^”]{1,200}”'), "<QUOTED>"),
    (("-",), re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"),
     "<TIME>"),
    (("-",), re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "<DATE>"),
    ((":",), re.compile(r"\b\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\b"), "<TIME>"),
    (("-",), re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<ID>"),
    ((".",), re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"), "<IP>"),
    (("/",), re.compile(r"(?:(?<=\s)|^|(?<==)|(?<=[\"'(\[]))(?:~|\.{1,2})?/[^\s\"'()\[\],;]*"), "<PATH>"),
    ((".",), re.compile(r"\b[\w.-]+\.(?:csv|json|jsonl|txt|log|gz|zip|tar|parquet|sql|db|html|pdf|md|xml|yaml|yml"
                        r"|bak)\b"), "<FILE>"),
    (("://",), re.compile(r"\bhttps?://\S+"), "<URL>"),
    ((), re.compile(r"\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{7,}\b"), "<HEX>"),
    ((), re.compile(r"\b[A-Za-z]+[-_]?\d+[A-Za-z\d_-]*\b"), "<ID>"),
    (("id", "ID", "Id", "#", "pid ", "run ", "job "),
     re.compile(r"(?i:(?<=\bid[=:]))\s*\d+|(?<=#)\d+|(?i:(?<=\bpid )|(?<=\brun )|(?<=\bjob ))\d+"), "<ID>"),
    ((), re.compile(r"[-+]?\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds|m|min|mins|minutes|h|hours|%|[kKMGT]i?B|B"
                    r"|bytes)\b"), "<QTY>"),
    ((".",), re.compile(r"\b\d+\.\d+\b"), "<DEC>"),
)
_INT = re.compile(r"(?<![\w.<])\d+(?![\w.>])")
_SPACES = re.compile(r"\s+")
_HAS_DIGIT = re.compile(r"\d")

_ERROR_WORDS = re.compile(
    r"(?i)\b(error|errors|errno|fail|failed|failing|failure|fatal|exception|traceback|panic|abort(?:ed)?|"
    r"denied|refused|unreachable|timed?\s?out|timeout|cannot|can't|could not|unable|invalid|corrupt(?:ed)?|"
    r"missing|not found|no such|killed|oom|out of memory|disk full|no space|quota\s(?:exceeded|exhausted|reached)|over\squota|out\sof\squota|rejected|skipp(?:ed|ing)|"
    r"degraded|partial|rollback|rolled back|truncated|empty|nothing to)\b")


@dataclass(frozen=True)
class Line:
    """One output line: its masked ``shape``, the bare integers in it (``counts``, in order)
    and the ``text`` as printed (cut to ``MAX_LINE_CHARS``)."""

    shape: str
    counts: tuple[int, ...]
    text: str


def mask(line: str) -> tuple[str, tuple[int, ...]]:
    """``(shape, counts)`` of one line: ids, paths, times, quantities with units and decimals
    masked; bare integers replaced by ``<N>`` and returned in order of appearance."""
    text = line.strip()[:MAX_LINE_CHARS]
    if _HAS_DIGIT.search(text) is None and not any(c in text for c in '/."“'):
        return _SPACES.sub(" ", text), ()  # nothing to mask: no number, path, file name or quote
    for guards, pattern, token in _MASKS:
        if not guards or any(g in text for g in guards):
            text = pattern.sub(token, text)
    counts = tuple(int(m.group(0)) for m in _INT.finditer(text))
    shape = _SPACES.sub(" ", _INT.sub("<N>", text))
    return shape, counts


def lines(text: str | None) -> list[Line]:
    """The non-blank lines of ``text`` (at most ``MAX_LINES``), masked."""
    return list(_lines(text)) if text else []


@functools.lru_cache(maxsize=1024)
def _lines(text: str) -> tuple[Line, ...]:
    # Cached by the text itself: a job's history is re-read at each of its judgements, and
    # masking is the judge's main cost (see bench/judge_bench.py).
    out = []
    for raw in text.splitlines()[:MAX_LINES]:
        if not raw.strip():
            continue
        shape, counts = mask(raw)
        out.append(Line(shape, counts, raw.strip()[:MAX_LINE_CHARS]))
    return tuple(out)


# A tally of nothing wrong is not an error, whatever the word for the wrong thing: built from
# the error words themselves, so every word they know has its zero tally too ("0 failing",
# "no rejected rows", "errors: 0", "failed=0", "timeouts (0)", "zero skipped").
_ERR = _ERROR_WORDS.pattern.removeprefix("(?i)")
_NONE_WRONG = re.compile(
    rf"(?i)\b(?:0|zero|no|none)\s+(?:[\w-]+\s+)?{_ERR}|"
    # "errors: 0" but not "ERROR: 0 rows" (a count of something else follows) nor "errors: 0.5%"
    rf"{_ERR}\s*(?:[:=]\s*|\(\s*)0\b(?![.,]\d)(?!\s+[A-Za-z]+\b(?!\s*[:=(]))")
# Quoted text (an e-mail subject, a title, a commit message) says what it says, not what the
# line reports: "sent 'Payment failed?' reminders to 40 users" is not an error. Double and
# typographic quotes anywhere; single quotes only as a whole token, so "can't" stays a word.
_QUOTED = re.compile(r'"[^"\n]*"|“[^”\n]*”|«[^»\n]*»|(?<![\w\'])\'[^\'\n]+\'(?![\w\'])')


def error_like(text: str) -> bool:
    """True when the line reads like an error, a warning or skipped work. Not evidence: a
    tally of zero bad things (any of the error words, "0 failing"), an error word only inside
    quoted text (a subject or title), a level tag alone (``WARN``, ``WARNING``) — routine logs
    are full of them — and "retrying" alone: a job that retried and went on to succeed
    handled it, as a run recovered on retry is a note, not an escalation."""
    return _ERROR_WORDS.search(_NONE_WRONG.sub(" ", _QUOTED.sub(" ", text))) is not None


# -- the handoff's result content --------------------------------------------------------------

_FLAG_KEYS = ("degraded", "partial", "incomplete", "truncated")
_FAILED_KEYS = ("failed", "failures", "failed_children", "children_failed", "errors", "failed_count",
                "error_count", "skipped", "missing")
_TOTAL_KEYS = ("total", "children", "expected", "of", "count")
#: Keys counting what went well: with a failed count and no total, their sum is the total.
_DONE_KEYS = ("succeeded", "synced", "ok", "done", "completed", "processed")
_STATUS_WORDS = frozenset({"partial", "degraded", "failed", "error", "incomplete", "failure"})
_RATIO = re.compile(r"\b(\d+)\s*(?:of|/|out of)\s*(\d+)\b")


def _as_count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        return len(value)
    return None


def result_problems(handoff: dict[str, Any] | None, *, depth: int = 3) -> list[str]:
    """What a handoff's own content says is wrong, as short phrases (empty when nothing).

    Looks at ``result`` (any JSON) and ``notes``/``error``: flags such as ``degraded: true``,
    a ``status`` word like ``partial`` in the result, counts of failed/skipped children, ``n of
    m`` ratios below one in notes or result strings, and a non-empty ``error``. Reads at most
    ``depth`` levels of nesting.
    """
    if not isinstance(handoff, dict):
        return []
    found: list[str] = []
    err = handoff.get("error")
    if isinstance(err, str) and err.strip():
        found.append(f"handoff error: {cut(err.strip(), 120)}")
    _walk(handoff.get("result"), "result", found, depth)
    notes = handoff.get("notes")
    if isinstance(notes, str):
        _ratio(notes, "notes", found)
    return found[:6]


def _ratio(text: str, where: str, found: list[str]) -> None:
    for m in _RATIO.finditer(text):
        n, total = int(m.group(1)), int(m.group(2))
        if 0 < total and n < total and total <= 1_000_000:
            found.append(f"{where} says {m.group(0)}")
            return


def _walk(value: Any, where: str, found: list[str], depth: int) -> None:
    if depth < 0 or len(found) >= 6:
        return
    if isinstance(value, str):
        _ratio(value, where, found)
        if value.strip().lower() in _STATUS_WORDS:
            found.append(f"{where} = {value.strip()[:40]!r}")
        return
    if isinstance(value, list):
        for i, item in enumerate(value[:50]):
            _walk(item, f"{where}[{i}]", found, depth - 1)
        return
    if not isinstance(value, dict):
        return
    total = None
    for key in _TOTAL_KEYS:
        total = _as_count(value.get(key))
        if total is not None:
            break
    if total is None:
        done = next((n for n in (_as_count(value.get(k)) for k in _DONE_KEYS) if n is not None), None)
        failed = next((n for n in (_as_count(value.get(k)) for k in _FAILED_KEYS) if n is not None), None)
        if done is not None and failed:
            total = done + failed
    for key, item in list(value.items())[:100]:
        k = str(key).lower()
        if k in _FLAG_KEYS and item is True:
            found.append(f"{where}.{key} = true")
        elif k in ("status", "state", "outcome") and isinstance(item, str) and item.lower() in _STATUS_WORDS:
            found.append(f"{where}.{key} = {item[:40]!r}")
        elif k in _FAILED_KEYS:
            n = _as_count(item)
            if n:
                found.append(f"{where}.{key} = {n}" + (f" of {total}" if total else ""))
        elif k in ("error", "errors_text") and isinstance(item, str) and item.strip():
            found.append(f"{where}.{key}: {cut(item.strip(), 80)}")
        elif isinstance(item, dict | list | str):
            _walk(item, f"{where}.{key}", found, depth - 1)


# -- claimed and expected files ----------------------------------------------------------------

@dataclass(frozen=True)
class FileFact:
    """One file the run claimed (``files_changed``, ``artifacts``) or the spec expects
    (``expect.files``, ``expect.min_bytes``): ``size`` in bytes, None when it does not exist."""

    path: str
    role: str          # file_changed | artifact | expect_file
    size: int | None

    @property
    def exists(self) -> bool:
        return self.size is not None


def files_from_verification(verification: dict[str, Any] | None) -> list[FileFact]:
    """The files a ``job_outcomes.verification`` record measured (checks with ``path``)."""
    out: list[FileFact] = []
    if not isinstance(verification, dict):
        return out
    for check in verification.get("checks") or []:
        if isinstance(check, dict) and check.get("path") and check.get("name") in ("file_changed", "artifact",
                                                                                   "expect_file"):
            size = check.get("size")
            out.append(FileFact(str(check["path"]), str(check["name"]), int(size) if isinstance(size, int) else None))
    return out


def files_from_dicts(items: Iterable[Any]) -> list[FileFact]:
    """Files from corpus/ledger dicts ``{path, role?, size?}`` (``size`` null: missing)."""
    out = []
    for fact in items or []:
        if isinstance(fact, dict) and fact.get("path"):
            size = fact.get("size")
            out.append(FileFact(str(fact["path"]), str(fact.get("role") or "artifact"),
                                int(size) if isinstance(size, int) and not isinstance(size, bool) else None))
    return out


def tail_lines(text: str | None, n: int = 2) -> list[str]:
    """The last ``n`` non-blank lines of ``text``, each cut to 160 characters."""
    if not text:
        return []
    got = [ln.strip()[:160] for ln in text.splitlines() if ln.strip()]
    return got[-n:]
