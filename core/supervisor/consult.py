"""One judgement with the model in it: the rules verdict, then — when ``reach`` says the rules
cannot vouch for the outcome — the model's answer, checked by ``grounding``.

The same function serves the supervisor (``supervisor.judge_run``), ``watchkeeper eval`` and
the replay of a ledger, so all three put the same outcomes before the model and accept the
same answers. ``judge`` is anything with ``consult(case, history, spec, rules, reasons) ->
claude.Consultation``: the real ``ClaudeJudge``, or one of eval's fake moods
(``core.supervisor.moods``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.spec.model import JobSpec
from core.supervisor import grounding, reach
from core.supervisor.rules import OutcomeFacts, Verdict


@dataclass
class Judged:
    """The outcome of ``judge``: the final ``verdict``, the ``rules`` verdict it started from,
    why the model was consulted (``reasons``; empty: it was not), the consultation's
    ``status`` (ok | cached | budget | error | None when not consulted), its ``error``, and
    ``rejected``: why an escalating answer's quote failed the check (None otherwise)."""

    verdict: Verdict
    rules: Verdict
    reasons: list[str] = field(default_factory=list)
    status: str | None = None
    error: str | None = None
    rejected: str | None = None
    answer: Any | None = None

    @property
    def consulted(self) -> bool:
        return bool(self.reasons)


def judge(case: OutcomeFacts, history: list[OutcomeFacts], spec: JobSpec | None, rules: Verdict,
          model: Any | None, *, first_successes: int = reach.FIRST_SUCCESSES) -> Judged:
    """Consult ``model`` (None: nobody to ask) when ``reach.reasons`` finds a reason, and
    apply its answer through ``grounding.apply``. Never raises for a bad answer: an error,
    an exhausted budget or an unverifiable quote leaves the rules verdict standing."""
    if model is None:
        return Judged(rules, rules)
    why = reach.reasons(case, history, spec, rules, first_successes=first_successes)
    if not why:
        return Judged(rules, rules)
    res = model.consult(case, history, spec, rules, why)
    if res.verdict is None:
        return Judged(rules, rules, why, res.status, res.error)
    verdict, rejected = grounding.apply(rules, res.verdict, case, spec)
    return Judged(verdict, rules, why, res.status, None, rejected, res.verdict)
