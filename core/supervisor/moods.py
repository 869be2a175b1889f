"""Fake moods for ``watchkeeper eval``: models that measure the pipeline, not a model.

Each mood answers ``consult`` like ``claude.ClaudeJudge`` (a ``Consultation`` holding a
``ClaudeVerdict``), in process, without a network. What they measure:

* ``oracle`` — answers each consulted case with its label (escalate or not) and a real quote
  from its evidence (the most telling line) against the job's intent. Nothing can do better
  through this pipeline: its figures are the ceiling that reach and grounding allow.
* ``ungrounded`` — always escalates, quoting a line that is not in the evidence. Grounding
  must reject every answer: the figures must equal the rules alone.
* ``quote-anything`` — always escalates, quoting a real line (the first one) against the
  intent. Every consulted quiet case pages, so routine pages are bounded by the consult rate.

The oracle needs the label: ``eval.run_eval`` sets ``expect`` before each case.
"""

from __future__ import annotations

from typing import Any

from core.spec.model import JobSpec
from core.supervisor import evidence, grounding
from core.supervisor.claude import ClaudeVerdict, Consultation
from core.supervisor.rules import OutcomeFacts, Verdict

MOODS = ("oracle", "ungrounded", "quote-anything")
#: A line no job prints: the ungrounded mood's invented evidence.
INVENTED = "FATAL: 0 of 0 records written (quoted by a model that did not read the output)"


def clause_of(spec: JobSpec | None) -> str:
    """The clause a fake quotes: the job's intent, else its first ``expect`` field as shown
    to the model, else "" (nothing to contradict)."""
    sources = grounding.clause_sources(spec)
    return sources[0] if sources else ""


def telling_quote(case: OutcomeFacts) -> str:
    """The line an honest reader would quote: the first error-like line, else the first line
    carrying a count, else the first line, else a handoff field; "" when there is nothing."""
    lines = grounding.evidence_lines(case)
    for pick in (lambda t: evidence.error_like(t), lambda t: any(c.isdigit() for c in t), lambda t: True):
        for _where, text in lines:
            if pick(text):
                return text
    fields = grounding.handoff_fields(case.handoff or {})
    return f"{fields[0][0]} = {fields[0][1]}" if fields else ""


def first_quote(case: OutcomeFacts) -> str:
    """The first line of the evidence (a real one, chosen without reading it)."""
    lines = grounding.evidence_lines(case)
    if lines:
        return lines[0][1]
    fields = grounding.handoff_fields(case.handoff or {})
    return f"{fields[0][0]} = {fields[0][1]}" if fields else ""


class Mood:
    """One fake model. ``calls`` counts consultations; ``expect`` is the current case's
    label (the oracle reads it; the others ignore it)."""

    def __init__(self, name: str) -> None:
        if name not in MOODS:
            raise ValueError(f"unknown mood {name!r}; one of {', '.join(MOODS)}")
        self.name = name
        self.expect: bool | None = None
        self.calls = 0

    def answer(self, case: OutcomeFacts, spec: JobSpec | None) -> ClaudeVerdict:
        clause = clause_of(spec)
        if self.name == "ungrounded":
            return ClaudeVerdict(escalate=True, severity="critical", reason="the output contradicts the intent",
                                 quote=INVENTED, clause=clause)
        if self.name == "quote-anything":
            return ClaudeVerdict(escalate=True, severity="warning", reason="this line looks wrong",
                                 quote=first_quote(case), clause=clause)
        if self.expect:
            return ClaudeVerdict(escalate=True, severity="warning", reason="the label says a person must look",
                                 quote=telling_quote(case), clause=clause)
        return ClaudeVerdict(escalate=False, severity="info", reason="the label says nothing to see")

    def consult(self, case: OutcomeFacts, history: list[OutcomeFacts], spec: JobSpec | None, rules: Verdict,
                reasons: Any = ()) -> Consultation:
        if rules.hard:
            return Consultation(None, "not consulted for hard verdicts", "error")
        self.calls += 1
        return Consultation(self.answer(case, spec), None, "ok")
