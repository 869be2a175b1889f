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
routine case and a near miss (first success, retried transient: a note at most) when it does
not escalate. Precision is the share of escalations whose case expected one. With a model in
the path, reach is the share of the cases to escalate that the rules left silent which were
put before the model (``core.supervisor.reach``); see ``GOALS`` for each path's goals.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.ledger.records import Outcome
from core.spec.model import JobSpec
from core.supervisor import consult
from core.supervisor.consult import Judged
from core.supervisor.facts import outcome_facts
from core.supervisor.reach import FIRST_SUCCESSES
from core.supervisor.rules import OutcomeFacts, Verdict, evaluate

CLASSES = ("hard", "soft", "routine", "near_miss")


def record_facts(rec: dict[str, Any], job: str, run_id: int = 0) -> OutcomeFacts:
    """Facts of one corpus record (``job_outcomes``-shaped, plus run facts; its ``reason`` is
    the run's closed code, ``runs.reason_code``)."""
    run = {"id": rec.get("run_id", run_id), "job": job, "attempt": rec.get("attempt", 1),
           "state": rec.get("state", "succeeded"), "reason_code": rec.get("reason"), "exit_code": rec.get("exit_code"),
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
        doc = json.loads(line)
        if doc.get("class") not in CLASSES:
            raise ValueError(f"class must be one of {', '.join(CLASSES)}, got {doc.get('class')!r}")
        spec_d = doc.get("spec")
        job = (spec_d or {}).get("name") or doc["case"].get("job") or "job"
        spec = (JobSpec.model_validate({"name": job, "command": "true", **spec_d}) if spec_d is not None else None)
        hist = [record_facts(h, job, i + 1) for i, h in enumerate(doc.get("history", []))]
        exp = doc.get("expect") or {}
        return cls(id=str(doc.get("id")), cls=doc["class"], case=record_facts(doc["case"], job, len(hist) + 1),
                   history=hist, spec=spec, expect_escalate=bool(exp.get("escalate")), expect_kind=exp.get("kind"),
                   source=str(doc.get("source") or ""))


#: Goals per path (ratios 0..1; a missing key: no goal). ``ungrounded`` must besides equal
#: the rules alone, verdict for verdict. "routine" is routine successes of jobs with a learned
#: baseline; "near_miss" first successes and recoveries, which may carry a note but never
#: page — except under quote-anything, where every consulted case pages by design (a job's
#: first successes are consulted), so it has no near-miss goal.
GOALS: dict[str, dict[str, float]] = {
    "rules": {"hard": 1.0, "soft": 0.90, "routine": 0.99, "near_miss": 0.99, "precision": 0.95},
    "oracle": {"hard": 1.0, "soft": 0.98, "routine": 0.99, "near_miss": 0.99, "precision": 0.95},
    "ungrounded": {"hard": 1.0, "soft": 0.90, "routine": 0.99, "near_miss": 0.99, "precision": 0.95},
    "quote-anything": {"hard": 1.0, "routine": 0.95},
    "claude": {"hard": 1.0, "soft": 0.90, "routine": 0.95, "near_miss": 0.95, "precision": 0.90},
}


@dataclass
class EvalReport:
    """Figures from one eval pass (ratios 0..1; None when no case of that class).

    ``reach``: of the cases that should escalate and that the rules left silent, the share
    put before the model (None when the model was not in the path, or no such case).
    ``consulted``: cases put before the model; ``rejected``: answers whose quote failed the
    check. ``goals``: the path's goals (``GOALS``)."""

    hard_recall: float | None
    soft_recall: float | None
    routine_silence: float | None
    precision: float | None
    counts: dict[str, int]
    misses: list[str]
    near_miss_silence: float | None = None
    kind_agreed: float | None = None
    per_kind: dict[str, list[int]] = field(default_factory=dict)  # expected kind -> [caught, cases]
    reach: float | None = None
    consulted: int = 0
    rejected: int = 0
    goals: dict[str, float] = field(default_factory=lambda: dict(GOALS["rules"]))
    same_as: EvalReport | None = None  # ungrounded: must equal this report (the rules alone)

    def figures(self) -> dict[str, float | None]:
        return {"hard": self.hard_recall, "soft": self.soft_recall, "routine": self.routine_silence,
                "near_miss": self.near_miss_silence, "precision": self.precision}

    def missed_goals(self) -> list[str]:
        """Each goal this pass misses, as ``name figure < goal`` (empty: all met)."""
        out = []
        for name, goal in self.goals.items():
            got = self.figures()[name]
            if got is not None and got < goal:
                out.append(f"{name} {100 * got:.1f}% < {100 * goal:g}%")
        if self.same_as is not None and (self.figures() != self.same_as.figures() or self.misses != self.same_as.misses):
            out.append("verdicts differ from the rules alone")
        return out

    def lines(self, label: str) -> list[str]:
        def pct(x: float | None) -> str:
            return "n/a" if x is None else f"{100 * x:.1f}%"

        def goal(name: str) -> str:
            if self.same_as is not None:
                return "= rules alone"
            g = self.goals.get(name)
            return "no goal" if g is None else (f"goal {100 * g:g}%" if g >= 1.0 else f"goal >={100 * g:g}%")
        c = self.counts
        out = [
            f"{label}:",
            f"  hard-class recall      {pct(self.hard_recall):>7}  ({goal('hard')}; {c.get('hard', 0)} cases)",
            f"  soft-anomaly recall    {pct(self.soft_recall):>7}  ({goal('soft')}; {c.get('soft', 0)} cases;"
            f" expected kind named in {pct(self.kind_agreed)})",
            f"  routine not paged      {pct(self.routine_silence):>7}  ({goal('routine')}; {c.get('routine', 0)} cases)",
            f"  near miss not paged    {pct(self.near_miss_silence):>7}  ({goal('near_miss')}; "
            f"{c.get('near_miss', 0)} first successes and recoveries)",
            f"  precision              {pct(self.precision):>7}  ({goal('precision')}; {c.get('escalated', 0)} escalated)",
        ]
        if self.reach is not None or self.consulted:
            out.append(f"  reach                  {pct(self.reach):>7}  (of {c.get('rules_missed', 0)} cases to escalate"
                       f" the rules left silent; {self.consulted} consulted, {self.rejected} quotes rejected)")
        return out

    def meets_goals(self) -> bool:
        return not self.missed_goals()

    def to_json(self, label: str) -> dict[str, Any]:
        return {"label": label, "hard_recall": self.hard_recall, "soft_recall": self.soft_recall,
                "routine_silence": self.routine_silence, "near_miss_silence": self.near_miss_silence,
                "precision": self.precision,
                "kind_agreed": self.kind_agreed, "reach": self.reach, "consulted": self.consulted,
                "rejected": self.rejected, "goals": self.goals, "counts": self.counts, "per_kind": self.per_kind,
                "misses": self.misses, "missed_goals": self.missed_goals(), "meets_goals": self.meets_goals()}


def score(cases: list[EvalCase], verdicts: list[Verdict], judged: list[Judged] | None = None) -> EvalReport:
    """Compare verdicts with labels (see the module docstring); ``judged`` (one per case)
    adds reach, consultations and rejections."""
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
            ok = not v.escalate
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
    reach = None
    consulted = rejected = 0
    if judged is not None:
        missed = [j for c, j in zip(cases, judged, strict=True) if c.expect_escalate and not j.rules.escalate]
        counts["rules_missed"] = len(missed)
        reach = sum(j.consulted for j in missed) / len(missed) if missed else None
        consulted = sum(j.consulted for j in judged)
        rejected = sum(j.rejected is not None for j in judged)

    def ratio(n: int, d: int) -> float | None:
        return n / d if d else None
    return EvalReport(hard_recall=ratio(hits["hard"], counts.get("hard", 0)),
                      soft_recall=ratio(hits["soft"], counts.get("soft", 0)),
                      routine_silence=ratio(hits["routine"], counts.get("routine", 0)),
                      near_miss_silence=ratio(hits["near_miss"], counts.get("near_miss", 0)),
                      precision=ratio(true_pos, escalated), counts=counts, misses=misses,
                      kind_agreed=ratio(agreed, hits["soft"]), per_kind=per_kind, reach=reach,
                      consulted=consulted, rejected=rejected)


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


def _model(claude: Any | None, mood: str | None) -> Any | None:
    if mood is not None:
        from core.supervisor.moods import Mood

        return Mood(mood)
    if claude is None:
        return None
    from core.supervisor.claude import ClaudeJudge  # lazy: anthropic only when the judge is on

    return ClaudeJudge(claude)


def judge(case: OutcomeFacts, history: list[OutcomeFacts], spec: JobSpec | None, model: Any | None,
          calls: dict[str, int], *, first_successes: int = FIRST_SUCCESSES) -> Judged:
    """The rules verdict, then the model's when ``reach`` puts the case before it — the same
    pipeline as ``supervisor.judge_run`` (``consult.judge``). ``calls`` counts statuses."""
    got = consult.judge(case, history, spec, evaluate(case, history, spec), model, first_successes=first_successes)
    if got.status is not None:
        calls[got.status] = calls.get(got.status, 0) + 1
    if got.rejected is not None:
        calls["rejected"] = calls.get("rejected", 0) + 1
    return got


def run_eval(cases: list[EvalCase], *, claude: Any | None = None, mood: str | None = None,
             first_successes: int = FIRST_SUCCESSES) -> tuple[EvalReport, dict[str, int]]:
    """Judge every case with the rules, and through a model too: Claude when ``claude`` (a
    ``JudgeSettings``) is given, or a fake ``mood`` (``core.supervisor.moods``). Returns the
    scored report (with the path's goals) and call statistics ``{ok, cached, error, budget,
    rejected}``."""
    calls = {"ok": 0, "cached": 0, "error": 0, "budget": 0, "rejected": 0}
    model = _model(claude, mood)
    judged = []
    for c in cases:
        if model is not None and hasattr(model, "expect"):
            model.expect = c.expect_escalate
        judged.append(judge(c.case, c.history, c.spec, model, calls, first_successes=first_successes))
    rep = score(cases, [j.verdict for j in judged], judged if model is not None else None)
    rep.goals = dict(GOALS[mood or ("claude" if claude is not None else "rules")])
    return rep, calls


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


def replay(rows: Iterable[tuple[Outcome, OutcomeFacts, list[OutcomeFacts], JobSpec | None]],
           *, claude: Any | None = None) -> tuple[list[Replayed], dict[str, int]]:
    """Re-judge recorded outcomes. ``rows`` yields ``(recorded outcome, facts, history, spec)``
    (``supervisor.gather`` gives the last three). Nothing is written. Returns the replayed
    outcomes and Claude call statistics."""
    calls = {"ok": 0, "cached": 0, "error": 0, "budget": 0, "rejected": 0}
    model = _model(claude, None)
    out = []
    for was, facts, history, spec in rows:
        v = judge(facts, history, spec, model, calls).verdict
        out.append(Replayed(run_id=was.run_id, job=was.job, was_kind=was.verdict_kind,
                            was_escalate=bool(was.escalate), now_kind=v.kind, now_escalate=v.escalate,
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
