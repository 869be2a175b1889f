"""Grounding: the model may escalate only by quoting this run's evidence, and the product
checks the quote before anything pages.

A Claude answer that escalates carries ``quote`` (an exact line of this run's stdout or
stderr, or a handoff field and its value such as ``result.failed = 3``) and ``clause`` (the
words of the job's ``intent`` or ``expect`` the quote contradicts). ``check`` looks for both,
verbatim after the same escaping the prompt used (``core.text.safe_text`` with invisible
characters, runs of blanks read as one): the quote in the run's own evidence, the clause in
the job's spec. A quote that is not there (an invented line, a line of an earlier run, a
fragment too short to mean anything) is a rejection: the rules verdict stands, the caller
records a ``judge_rejected`` event, and nothing pages.

``apply`` combines the rules verdict with a checked answer: the model may raise severity,
annotate, or turn a quiet success into an ``intent_mismatch`` escalation whose reason shows the
quote and the clause; it never lowers or silences what the rules decided, and it never touches
a hard verdict.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from core.spec.model import JobSpec
from core.supervisor.rules import OutcomeFacts, Verdict
from core.text import invisible, quoted, safe_text
from core.vocabulary import EscalationKind, max_severity

#: Shortest fragment of a line accepted as a quote (a whole line may be shorter): a model
#: quoting "ok" or "0" from a long line proves nothing.
MIN_FRAGMENT_CHARS = 12
#: Shortest clause accepted (a whole ``expect`` field name such as ``expect.files`` is longer).
MIN_CLAUSE_CHARS = 3
#: Nesting read when flattening a handoff into ``path = value`` fields.
HANDOFF_DEPTH = 5
_BLANKS = re.compile(r"\s+")
_FIELD = re.compile(r"""^\s*(?:handoff\s*[.:]\s*)?["']?([A-Za-z_][\w.\[\]-]*)["']?\s*(?:=|:|==)\s*(.+?)\s*$""")


def escaped(text: Any) -> str:
    """``text`` as the prompt shows it and as quotes are compared: the one escaper
    (``safe_text``, invisible characters too), blanks collapsed, ends stripped."""
    return _BLANKS.sub(" ", safe_text(str(text), also=invisible)).strip()


@dataclass(frozen=True)
class Grounding:
    """A checked quote: ``quote`` and ``clause`` as found (escaped), ``where`` it was found
    (``stdout``, ``stderr``, ``handoff result.failed``)."""

    quote: str
    where: str
    clause: str


def handoff_fields(handoff: Any, prefix: str = "", depth: int = HANDOFF_DEPTH) -> list[tuple[str, Any]]:
    """``(dotted path, scalar value)`` of every leaf of a handoff (lists indexed ``[i]``)."""
    out: list[tuple[str, Any]] = []
    if depth < 0:
        return out
    if isinstance(handoff, dict):
        for k, v in list(handoff.items())[:200]:
            out += handoff_fields(v, f"{prefix}.{k}" if prefix else str(k), depth - 1)
    elif isinstance(handoff, list):
        for i, v in enumerate(handoff[:100]):
            out += handoff_fields(v, f"{prefix}[{i}]", depth - 1)
    else:
        out.append((prefix, handoff))
    return out


def _value_texts(value: Any) -> set[str]:
    texts = {escaped(json.dumps(value, ensure_ascii=False, default=str))}
    if isinstance(value, str):
        texts.add(escaped(value))
    elif isinstance(value, bool) or value is None:
        texts.add(str(value))
    return texts


def evidence_lines(case: OutcomeFacts) -> list[tuple[str, str]]:
    """Every line a quote may come from, escaped: ``(where, line)`` for stdout, stderr and
    the handoff's text fields (notes, summaries: each line of them)."""
    out = [(where, escaped(ln)) for where, text in (("stdout", case.stdout), ("stderr", case.stderr))
           for ln in (text or "").splitlines() if ln.strip()]
    if not case.stdout and not case.stderr and case.output_excerpt:
        out += [("output", escaped(ln)) for ln in case.output_excerpt.splitlines() if ln.strip()]
    for path, value in handoff_fields(case.handoff or {}):
        if isinstance(value, str):
            out += [(f"handoff {path}", escaped(ln)) for ln in value.splitlines() if ln.strip()]
    return out


def find_quote(quote: str, case: OutcomeFacts) -> str | None:
    """Where ``quote`` is in this run's evidence (``stdout``, ``stderr``, ``handoff <path>``),
    or None. A quote matches a whole line, a fragment of at least ``MIN_FRAGMENT_CHARS`` of
    one, or a handoff field written ``path = value`` (``path: value`` too)."""
    q = escaped(quote).strip("\"'`")
    if not q:
        return None
    m = _FIELD.match(q)
    if m is not None and case.handoff:
        path, value = m.group(1), m.group(2).strip().rstrip(",")
        for p, v in handoff_fields(case.handoff):
            if p == path and (value in _value_texts(v) or value.strip("\"'") in _value_texts(v)):
                return f"handoff {p}"
    for where, line in evidence_lines(case):
        if q == line or (len(q) >= MIN_FRAGMENT_CHARS and q in line):
            return where
    return None


def clause_sources(spec: JobSpec | None) -> list[str]:
    """What a clause may quote: the job's ``intent`` and each set ``expect`` field, written as
    the prompt shows them (``expect.files: ["out/a.csv"]``)."""
    if spec is None:
        return []
    out = [escaped(spec.intent)] if spec.intent else []
    for name, value in spec.expect.model_dump(mode="json").items():
        if value not in (None, [], {}):
            out.append(escaped(f"expect.{name}: {json.dumps(value, ensure_ascii=False)}"))
    return out


def find_clause(clause: str, spec: JobSpec | None) -> str | None:
    """The clause as found in the job's intent or expect (case and blanks ignored), or None."""
    c = escaped(clause).strip("\"'`").rstrip(".").lower()
    if len(c) < MIN_CLAUSE_CHARS:
        return None
    for src in clause_sources(spec):
        if c in src.lower():
            return escaped(clause).strip("\"'`")
    return None


def check(answer: Any, case: OutcomeFacts, spec: JobSpec | None) -> tuple[Grounding | None, str | None]:
    """Check an escalating answer's quote and clause: ``(grounding, None)`` when both are
    really there, ``(None, why)`` when not (``why`` is one line for the ``judge_rejected``
    event)."""
    quote, clause = (getattr(answer, "quote", "") or ""), (getattr(answer, "clause", "") or "")
    if not quote.strip():
        return None, "escalated without quoting the evidence"
    where = find_quote(quote, case)
    if where is None:
        return None, f"quote {quoted(quote[:160], chr(34))} is not in this run's output or handoff"
    if not clause.strip():
        return None, "escalated without naming the intent or expect clause the quote contradicts"
    found = find_clause(clause, spec)
    if found is None:
        return None, f"clause {quoted(clause[:160], chr(34))} is not in the job's intent or expect"
    return Grounding(quote=escaped(quote).strip("\"'`"), where=where, clause=found), None


def apply(rules: Verdict, answer: Any | None, case: OutcomeFacts, spec: JobSpec | None
          ) -> tuple[Verdict, str | None]:
    """The verdict after a Claude ``answer`` (``claude.ClaudeVerdict`` or None), and the
    rejection reason when the answer escalated without a checkable quote (None otherwise).

    * no answer, or a hard rules verdict: the rules verdict, unchanged;
    * escalate with a checked quote: an escalating rules verdict keeps its kind and may only
      rise in severity; a quiet one (routine, a first success, a recovery) becomes an
      ``intent_mismatch`` warning (or the model's higher severity) whose reason quotes the
      evidence and the clause;
    * escalate with an unverifiable quote: the rules verdict, unchanged, and the reason why;
    * no escalation: the rules verdict, annotated with the model's one line.
    """
    if answer is None or rules.hard:
        return rules, None
    out = Verdict(**asdict(rules))
    out.judged_by = "rules+claude"
    note = (answer.reason or "").strip().replace("\n", " ")[:300] or None
    if not answer.escalate:
        out.annotation = note
        return out, None
    grounding, why = check(answer, case, spec)
    if grounding is None:
        return rules, why
    said = f"{quoted(grounding.quote[:200], chr(34))} ({grounding.where})"
    out.annotation = f"{note + '; ' if note else ''}quoted {said} against {quoted(grounding.clause[:200], chr(34))}"
    if out.escalate:
        out.severity = max_severity(out.severity, answer.severity)
        return out, None
    job = case.job or "the job"
    out.kind = EscalationKind.INTENT_MISMATCH
    out.escalate, out.silent = True, False
    out.severity = max_severity("warning", answer.severity)
    out.anomalies = [EscalationKind.INTENT_MISMATCH, *[a for a in rules.anomalies if a != EscalationKind.INTENT_MISMATCH]]
    out.reason = (f"{job} succeeded but its output contradicts its intent: it printed {said}, while "
                  f"its {'intent' if spec is not None and spec.intent and grounding.clause.lower() in escaped(spec.intent).lower() else 'spec'}"
                  f" says {quoted(grounding.clause[:200], chr(34))}")
    out.annotation = note
    return out, None
