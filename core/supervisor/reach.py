"""Reach: which successes the model is consulted on — the ones the rules cannot vouch for.

The rules judge a success against what the job learned it usually does (``rules.work_signals``).
Where there is nothing learned yet, or the evidence is of a kind they cannot read, their
silence means "no rule fired", not "this is fine". Those successes are put before the model,
which may escalate one only by quoting the evidence (``core.supervisor.grounding``):

* one of the job's first ``first_successes`` successes (``JudgeSettings.first_successes``);
* an output line shape, or a count in a line, that no learned success printed, or a count
  more than ``COUNT_STRETCH`` times off its learned range yet short of what the rules page
  on (the job has a baseline, but not for this);
* an output byte-identical to the previous success's, from a job whose successes always
  differed (the same day exported twice: a stale input);
* a handoff whose result or notes are prose the rules cannot read;
* an intent naming a quantity ("8 sources", "three reports") the output never mentions,
  while no learned baseline vouches for the job's counts.

A routine success with a learned baseline meets none of these and is not consulted. Soft
verdicts (the rules already escalate) are consulted too, so the model may raise severity or
annotate them. Hard verdicts and failures never are. Every reason needs an ``intent`` or
``expect`` in the spec for the model to quote a clause of; without one a quiet success is not
consulted (nothing it said could be grounded).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from core.spec.model import JobSpec
from core.supervisor import evidence
from core.supervisor.baseline import WINDOW, WorkBaseline
from core.supervisor.rules import OutcomeFacts, Verdict, learn_from
from core.text import quoted
from core.vocabulary import OutcomeStatus

#: Default of ``JudgeSettings.first_successes``.
FIRST_SUCCESSES = 5
#: Words in a handoff text field (result string, summary, notes) from which it is prose.
PROSE_WORDS = 8
#: Successes whose outputs must all differ before a repeated output is news.
REPEAT_MIN_SUCCESSES = 3
#: A count this many times above its learned highest (or below its lowest) is put before the
#: model; the rules themselves page only far beyond (``baseline.HIGH_FACTOR``/``LOW_FACTOR``).
COUNT_STRETCH = 4
#: ... and at least this far from it: small counts jitter by more than their own size (a
#: cleanup that usually removes 0 files and removes 8 today is not news).
COUNT_STRETCH_MIN = 10
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "fifty": 50, "hundred": 100}
_QUANTITY = re.compile(r"(?i)\b(\d+(?:[.,]\d+)?|" + "|".join(_NUMBER_WORDS) + r")\b")


def has_intent(spec: JobSpec | None) -> bool:
    """Whether the spec gives the model a clause to quote (an intent or any ``expect``)."""
    if spec is None:
        return False
    e = spec.expect
    return bool(spec.intent or e.output or e.files or e.forbid_output or e.min_bytes or e.duration)


def intent_quantities(intent: str | None) -> list[tuple[str, int | None]]:
    """Quantities an intent names: ``(as written, value)`` (value None for decimals)."""
    out: list[tuple[str, int | None]] = []
    for m in _QUANTITY.finditer(intent or ""):
        word = m.group(1)
        if word.lower() in _NUMBER_WORDS:
            out.append((word, _NUMBER_WORDS[word.lower()]))
        elif word.isdigit():
            out.append((word, int(word)))
        else:
            out.append((word, None))
    return out


def _mentions(text: str, word: str, value: int | None) -> bool:
    # Digit boundaries, not word boundaries: "v1.24.0" mentions 1.24, "3/3" mentions 3.
    if re.search(rf"(?i)(?<![\d]){re.escape(word)}(?![\d])", text):
        return True
    if value is not None:
        names = "".join(f"|\\b{n}\\b" for n, v in _NUMBER_WORDS.items() if v == value)
        return bool(re.search(rf"(?i)(?<![\d.])(?:{value}(?![\d]){names})", text))
    return False


def _prose(value: object) -> bool:
    return isinstance(value, str) and len(value.split()) >= PROSE_WORDS


def unreadable_handoff(case: OutcomeFacts) -> str | None:
    """Which handoff field holds prose the rules cannot read: ``result`` (written as text, or
    a summary or report inside it) or ``notes``; None when none does. The name is the
    contract's, never a key the job chose."""
    h = case.handoff if isinstance(case.handoff, dict) else None
    if not h:
        return None
    result = h.get("result")
    if _prose(result) or (isinstance(result, dict) and any(_prose(v) for v in list(result.values())[:50])):
        return "result"
    if _prose(h.get("notes")):
        return "notes"
    return None


def reasons(case: OutcomeFacts, history: Iterable[OutcomeFacts], spec: JobSpec | None, rules: Verdict,
            *, first_successes: int = FIRST_SUCCESSES) -> list[str]:
    """Why the model is consulted on this outcome (empty: it is not), each one short line.

    Args:
        case: the outcome with its raw evidence.
        history: the job's earlier outcomes, oldest first.
        spec: the job's spec, or None.
        rules: the rules verdict on ``case``.
        first_successes: a job's first successes consulted whatever they printed.
    """
    if rules.hard or not case.ok or rules.kind in ("retry_pending", "abandoned", "subtask"):
        return []
    out: list[str] = []
    if rules.escalate:
        out.append(f"the rules found {rules.kind}")
    if not has_intent(spec):
        return out
    assert spec is not None
    hist = list(history)
    successes = [h for h in hist if h.ok and h.status == OutcomeStatus.SUCCESS and not h.escalated]
    n_ok = sum(1 for h in hist if h.ok)
    if n_ok < first_successes:
        out.append(f"success {n_ok + 1} of its first {first_successes}")
    work = learn_from(successes)
    if work is not None:
        known_counts = {shape for shape, _ in work.counts}
        # Reasons name where, never what: the job's own text travels only inside the
        # untrusted block of the prompt.
        for stream, text in (("stdout", case.stdout), ("stderr", case.stderr)):
            why = _unvouched_line(stream, evidence.lines(text), work, known_counts)
            if why is not None:
                out.append(why)
                break
    recent = [h.stdout for h in successes[-WINDOW:] if h.stdout]
    if (case.stdout and len(recent) >= REPEAT_MIN_SUCCESSES and case.stdout == recent[-1]
            and len(set(recent)) == len(recent)):
        out.append("its output repeats the previous success's byte for byte, though its successes always differed")
    field = unreadable_handoff(case)
    if field is not None:
        out.append(f"its handoff {field} is prose the rules cannot read")
    if work is None:
        # With no learned baseline the intent is the only yardstick; with one, a count the
        # rules vouch for is the job's normal, whatever the intent's numbers.
        told = "\n".join([case.stdout, case.stderr, str(case.handoff or "")])
        for word, value in intent_quantities(spec.intent):
            if not _mentions(told, word, value):
                out.append(f"its intent names {quoted(word, chr(34))}, which its output does not mention")
                break
    return out


def _unvouched_line(stream: str, lines: list[evidence.Line], work: WorkBaseline, known_counts: set[str]) -> str | None:
    """Why the first line of ``stream`` the learned baseline cannot vouch for is not routine:
    a shape no learned success printed, a count with no learned range, or a count beyond
    ``COUNT_STRETCH`` times its learned range (the rules page only far beyond it)."""
    seen: set[str] = set()
    for no, ln in enumerate(lines, start=1):
        if not work.known(ln.shape):
            return f"{stream} line {no} has a shape no learned success printed"
        if ln.counts and ln.shape not in known_counts:
            return f"{stream} line {no} carries a count with no learned range"
        if ln.shape in seen:
            continue  # counts are learned from the first line of each shape ("page 2 of 40" is not news)
        seen.add(ln.shape)
        for i, value in enumerate(ln.counts):
            rng = work.counts.get((ln.shape, i))
            if rng is None or abs(value - (rng.high if value > rng.high else rng.low)) < COUNT_STRETCH_MIN:
                continue
            if value > rng.high * COUNT_STRETCH or value * COUNT_STRETCH < rng.low:
                return f"{stream} line {no} carries a count outside {COUNT_STRETCH}x its learned range"
    return None
