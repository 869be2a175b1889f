"""Measured judgement: ``watchkeeper eval`` on a labelled corpus, and replay of a real ledger.

A corpus case is what the ledger holds, not pre-digested facts: the job's spec (intent,
expect), its prior outcomes with their output, handoff and measured files, and the outcome
itself, each shaped like a ``job_outcomes`` row (``stdout_head``/``stdout_tail``,
``stderr_tail``, ``handoff``, ``verification`` with file sizes, ``state``, ``exit_code`` ...).
Every case goes through the real pipeline — ``facts.outcome_facts``, baseline learning,
``rules.evaluate`` and optionally the Claude judge — exactly as ``supervisor.judge_run`` would.

Corpus line (JSONL; ``#`` lines and blank lines skipped)::

    {"id": "...", "class": "hard|soft|routine|near_miss", "source": "the public incident pattern",
     "spec": {JobSpec fields}, "history": [record, ...], "case": record,
     "expect": {"escalate": bool, "kind": "..."}}

where a record is a ``job_outcomes``-shaped dict plus the run facts ``attempt``,
``retry_queued``, ``prior_failures`` and ``late_result``.

Scoring: a hard case is caught when the verdict escalates with the expected kind; a soft case
when the verdict escalates (``kind_agreed`` counts the ones naming the expected kind too); a
routine case when the verdict is silent; a near miss (first success, retried transient) when it
does not escalate. Precision is the share of escalations whose case expected one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.spec.model import JobSpec
from core.supervisor.facts import outcome_facts
from core.supervisor.rules import OutcomeFacts, Verdict, evaluate, merge

CLASSES = ("hard", "soft", "routine", "near_miss")


def record_facts(rec: dict[str, Any], job: str, run_id: int = 0) -> OutcomeFacts:
    """Facts of one corpus record (``job_outcomes``-shaped, plus run facts)."""
    run = {"id": rec.get("run_id", run_id), "job": job, "attempt": rec.get("attempt", 1),
           "state": rec.get("state", "succeeded"), "reason": rec.get("reason"), "exit_code": rec.get("exit_code"),
           "signal": rec.get("signal")}
    out = {"exit_code": 0, **rec}
    f = outcome_facts(run, out, retry_queued=bool(rec.get("retry_queued")),
                      prior_failures=int(rec.get("prior_failures") or 0))
    f.late_result = bool(rec.get("late_result"))
    return f


@dataclass
class EvalCase:
    """One labelled corpus case (see the module docstring)."""

    id: str
    cls: str
    case: OutcomeFacts
    history: list[OutcomeFacts]
    spec: JobSpec | None
    expect_escalate: bool
    expect_kind: str | None
    source: str = ""

    @classmethod
    def from_json(cls, line: str) -> EvalCase:
        """Parse one JSONL line. Raises ValueError / pydantic.ValidationError on a bad line."""
        d = json.loads(line)
        if d.get("class") not in CLASSES:
            raise ValueError(f"class must be one of {', '.join(CLASSES)}, got {d.get('class')!r}")
        spec_d = d.get("spec")
        job = (spec_d or {}).get("name") or d["case"].get("job") or "job"
        spec = (JobSpec.model_validate({"name": job, "command": "true", **spec_d}) if spec_d is not None else None)
        hist = [record_facts(h, job, i + 1) for i, h in enumerate(d.get("history", []))]
        exp = d.get("expect") or {}
        return cls(id=str(d.get("id")), cls=d["class"], case=record_facts(d["case"], job, len(hist) + 1),
                   history=hist, spec=spec, expect_escalate=bool(exp.get("escalate")), expect_kind=exp.get("kind"),
                   source=str(d.get("source") or ""))


@dataclass
class EvalReport:
    """Figures from one eval pass (ratios 0..1; None when no case of that class)."""

    hard_recall: float | None
    soft_recall: float | None
    routine_silence: float | None
    precision: float | None
    counts: dict[str, int]
    misses: list[str]
    kind_agreed: float | None = None
    per_kind: dict[str, list[int]] = field(default_factory=dict)  # expected kind -> [caught, cases]

    def lines(self, label: str) -> list[str]:
        def pct(x: float | None) -> str:
            return "n/a" if x is None else f"{100 * x:.1f}%"
        c = self.counts
        return [
            f"{label}:",
            f"  hard-class recall      {pct(self.hard_recall):>7}  (goal 100%; {c.get('hard', 0)} cases)",
            f"  soft-anomaly recall    {pct(self.soft_recall):>7}  (goal >=95%; {c.get('soft', 0)} cases;"
            f" expected kind named in {pct(self.kind_agreed)})",
            f"  routine silence        {pct(self.routine_silence):>7}  (goal >=99%; "
            f"{c.get('routine', 0) + c.get('near_miss', 0)} cases)",
            f"  precision              {pct(self.precision):>7}  (goal >=90%; {c.get('escalated', 0)} escalated)",
        ]

    def meets_goals(self) -> bool:
        return ((self.hard_recall is None or self.hard_recall >= 1.0)
                and (self.soft_recall is None or self.soft_recall >= 0.95)
                and (self.routine_silence is None or self.routine_silence >= 0.99)
                and (self.precision is None or self.precision >= 0.90))

    def to_json(self, label: str) -> dict[str, Any]:
        return {"label": label, "hard_recall": self.hard_recall, "soft_recall": self.soft_recall,
                "routine_silence": self.routine_silence, "precision": self.precision,
                "kind_agreed": self.kind_agreed, "counts": self.counts, "per_kind": self.per_kind,
                "misses": self.misses, "meets_goals": self.meets_goals()}


def score(cases: list[EvalCase], verdicts: list[Verdict]) -> EvalReport:
    """Compare verdicts with labels (see the module docstring)."""
    hits = {k: 0 for k in CLASSES}
    counts: dict[str, int] = {}
    misses: list[str] = []
    per_kind: dict[str, list[int]] = {}
    escalated = true_pos = agreed = 0
    for c, v in zip(cases, verdicts, strict=True):
        counts[c.cls] = counts.get(c.cls, 0) + 1
        if c.cls == "hard":
            ok = v.escalate and (c.expect_kind is None or v.kind == c.expect_kind)
        elif c.cls == "soft":
            ok = v.escalate
            agreed += ok and (c.expect_kind is None or c.expect_kind in v.anomalies)
        elif c.cls == "routine":
            ok = v.silent
        else:  # a near miss may carry a note (first success, retried transient) but never pages
            ok = not v.escalate
        hits[c.cls] += ok
        pk = per_kind.setdefault(c.expect_kind or c.cls, [0, 0])
        pk[0] += ok
        pk[1] += 1
        if not ok:
            misses.append(f"{c.id} ({c.cls}, expected {c.expect_kind} escalate={c.expect_escalate}): got {v.kind} "
                          f"escalate={v.escalate} - {v.reason[:200]}")
        if v.escalate:
            escalated += 1
            true_pos += c.expect_escalate
    counts["escalated"] = escalated

    def ratio(n: int, d: int) -> float | None:
        return n / d if d else None
    quiet = counts.get("routine", 0) + counts.get("near_miss", 0)
    return EvalReport(hard_recall=ratio(hits["hard"], counts.get("hard", 0)),
                      soft_recall=ratio(hits["soft"], counts.get("soft", 0)),
                      routine_silence=ratio(hits["routine"] + hits["near_miss"], quiet),
                      precision=ratio(true_pos, escalated), counts=counts, misses=misses,
                      kind_agreed=ratio(agreed, hits["soft"]), per_kind=per_kind)


def load_corpus(path: str) -> list[EvalCase]:
    """Read a JSONL corpus (blank lines and ``#`` lines skipped).

    Raises:
        ValueError: a line is not a valid case; the message names the file and line number.
    """
    out = []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                out.append(EvalCase.from_json(line))
            except Exception as exc:
                raise ValueError(f"{path}:{no}: bad case: {exc}") from None
    return out


def _judge(claude: Any | None) -> Any | None:
    if claude is None:
        return None
    from core.supervisor.claude import ClaudeJudge  # lazy: anthropic only when the judge is on

    return ClaudeJudge(claude)


def judge(case: OutcomeFacts, history: list[OutcomeFacts], spec: JobSpec | None, judge: Any | None,
          calls: dict[str, int]) -> Verdict:
    """The rules verdict, through Claude when ``judge`` (a ``ClaudeJudge``) is given — the same
    gate as ``supervisor.judge_run``: hard and silent verdicts are never sent."""
    v = evaluate(case, history, spec)
    if judge is not None and not v.hard and not v.silent:
        res = judge.consult(case, history, spec, v)
        calls[res.status] = calls.get(res.status, 0) + 1
        v = merge(v, res.verdict)
    return v


def run_eval(cases: list[EvalCase], *, claude: Any | None = None) -> tuple[EvalReport, dict[str, int]]:
    """Judge every case with the rules, and through Claude too when ``claude`` (a
    ``JudgeSettings``) is given; returns the scored report and Claude call statistics
    ``{ok, cached, error, budget}`` (all 0 for rules alone)."""
    calls = {"ok": 0, "cached": 0, "error": 0, "budget": 0}
    j = _judge(claude)
    verdicts = [judge(c.case, c.history, c.spec, j, calls) for c in cases]
    return score(cases, verdicts), calls


# -- replay: today's judge on a real ledger's recorded outcomes (shadow mode) -----------------

@dataclass
class Replayed:
    """One recorded outcome re-judged: what was (``job_outcomes`` verdict columns) and what
    today's supervisor would say."""

    run_id: int
    job: str
    was_kind: str | None
    was_escalate: bool
    now_kind: str
    now_escalate: bool
    now_reason: str

    @property
    def changed(self) -> bool:
        return self.was_escalate != self.now_escalate or (self.now_escalate and self.was_kind != self.now_kind)


def replay(rows: Iterable[tuple[dict[str, Any], OutcomeFacts, list[OutcomeFacts], JobSpec | None]],
           *, claude: Any | None = None) -> tuple[list[Replayed], dict[str, int]]:
    """Re-judge recorded outcomes. ``rows`` yields ``(job_outcomes row, facts, history, spec)``
    (``supervisor.gather`` gives the last three). Nothing is written. Returns the replayed
    outcomes and Claude call statistics."""
    calls = {"ok": 0, "cached": 0, "error": 0, "budget": 0}
    j = _judge(claude)
    out = []
    for row, facts, history, spec in rows:
        v = judge(facts, history, spec, j, calls)
        out.append(Replayed(run_id=int(row["run_id"]), job=str(row["job"]), was_kind=row.get("verdict_kind"),
                            was_escalate=bool(row.get("escalate")), now_kind=v.kind, now_escalate=v.escalate,
                            now_reason=v.reason))
    return out, calls


def replay_summary(items: list[Replayed]) -> dict[str, Any]:
    """Per job: outcomes, escalated then vs now, and how many verdicts changed."""
    jobs: dict[str, dict[str, int]] = {}
    for r in items:
        j = jobs.setdefault(r.job, {"outcomes": 0, "was_escalated": 0, "now_escalated": 0, "changed": 0})
        j["outcomes"] += 1
        j["was_escalated"] += r.was_escalate
        j["now_escalated"] += r.now_escalate
        j["changed"] += r.changed
    return {"generated_at": time.time(), "outcomes": len(items), "jobs": jobs}
