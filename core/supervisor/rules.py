"""The rules judge: a pure function from an outcome (and its job's history) to a verdict.

No database here: ``evaluate(case, history, spec)`` is what ``judge_run`` calls with facts read
from the ledger, and what ``watchkeeper eval`` calls with facts read from a labeled corpus.

Policy table (also in README.md, "Supervisor"). Hard classes cannot be overruled by anything,
including the Claude judge; "note" verdicts are recorded on the outcome but open no
escalation; routine success is silent.

==========================  ===========  ==========  =========================================
case                        kind         severity    result
==========================  ===========  ==========  =========================================
late result after orphan    late_result  warning     escalate (hard)
runner stopped heartbeating runner_gap   critical    escalate (hard, ``supervisor.periodic``)
failed, retry queued        retry_pending  -         silent: the lineage's last attempt decides
failed, no retry left       failed       critical    escalate (hard); ``retries_exhausted``
                                                     when attempt > 1
timed_out / orphaned        same         critical    escalate (hard), or retry_pending as above
left behind by a clean stop interrupted  warning     escalate (hard), or retry_pending; never
                                                     critical (``runs.reason = interrupted``)
verification failed         verification_failed  critical  escalate (hard)
blocked (handoff blockers)  blocked      warning     escalate (hard)
abandoned                   abandoned    -           silent: an operator chose it
queued run of a removed job job_removed  warning     escalate (hard): cancelled, never ran;
                                                     a pending retry's failure would go unseen
success, too slow / fast    slow / too_fast  warning escalate (soft)
success, output ≠ expect    output_mismatch  warning escalate (soft)
success, low confidence     low_confidence   warning escalate (soft)
partial                     partial      warning     escalate (soft)
flapping (≥5 flips in 8)    flapping     warning     escalate (soft)
first-ever success          first_success    info    note
success after failed tries  recovered_on_retry info  note (the one low-severity note)
success matching baseline   routine      -           silent
==========================  ===========  ==========  =========================================
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from core.spec.model import JobSpec
from core.supervisor.baseline import learn
from core.vocabulary import OrphanReason, max_severity

HARD_KINDS = frozenset({"failed", "timed_out", "orphaned", "verification_failed", "blocked",
                        "retries_exhausted", "late_result", "runner_gap", "job_removed", "interrupted"})
SOFT_KINDS = frozenset({"slow", "too_fast", "output_mismatch", "low_confidence", "partial", "flapping"})
NOTE_KINDS = frozenset({"first_success", "recovered_on_retry"})
SILENT_KINDS = frozenset({"routine", "retry_pending", "abandoned"})
#: Kinds a later healthy run of the same job auto-resolves (late_result and runner_gap are
#: not about the job's health; they resolve by operator or runner heartbeat).
RECOVERABLE_KINDS = frozenset({"failed", "timed_out", "orphaned", "interrupted", "verification_failed", "blocked",
                               "retries_exhausted", "slow", "too_fast", "output_mismatch",
                               "low_confidence", "partial", "flapping"})
#: Outcome window for flapping: FLAP_FLIPS success/failure alternations within FLAP_WINDOW
#: final outcomes (current one included).
FLAP_WINDOW = 8
FLAP_FLIPS = 5
# When several soft anomalies apply, the first in this order names the verdict.
_SOFT_ORDER = ("partial", "output_mismatch", "low_confidence", "slow", "too_fast", "flapping")


@dataclass
class OutcomeFacts:
    """What the judge knows about one finished run (from ``job_outcomes`` + ``runs``).

    Times in seconds. ``retry_queued``: the next attempt of this lineage exists (queued or
    later). ``prior_failures``: failed attempts before this one in the same lineage.
    ``final``: this attempt is the lineage's last (no retry queued).
    """

    run_id: int = 0
    job: str = ""
    attempt: int = 1
    state: str = "succeeded"          # terminal run state
    status: str = "success"           # job_outcomes.status
    reason: str | None = None
    duration_s: float | None = None
    exit_code: int | None = 0
    signal: int | None = None
    handoff_status: str | None = None
    confidence: float | None = None
    handoff_error: str | None = None
    blockers: list[str] = field(default_factory=list)
    verification_ok: bool | None = None
    verification_failed: list[str] = field(default_factory=list)
    output_matches: bool | None = None  # None: no expect.output in the spec
    retry_queued: bool = False
    prior_failures: int = 0
    late_result: bool = False
    ended_at: float | None = None
    output_excerpt: str = ""          # bounded slice of stdout/stderr, for the Claude judge only
    notes: str | None = None          # handoff notes (e.g. what a partial result is missing)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutcomeFacts:
        """Build from a dict, ignoring unknown keys (corpus files may carry comments)."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return self.state == "succeeded"


@dataclass
class Verdict:
    """The judgement of one outcome.

    ``escalate``: open/update an escalation of ``kind``. ``silent``: nothing to show.
    ``hard``: a rules-decided class nothing may overrule. ``reason`` is one line citing
    ledger fields. ``anomalies`` lists every kind found (``kind`` is the first).
    """

    kind: str
    escalate: bool
    severity: str | None
    reason: str
    silent: bool
    hard: bool = False
    anomalies: list[str] = field(default_factory=list)
    judged_by: str = "rules"
    annotation: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def soft(self) -> bool:
        return not self.hard and not self.silent


def _hard(kind: str, reason: str, severity: str = "critical") -> Verdict:
    return Verdict(kind=kind, escalate=True, severity=severity, reason=reason, silent=False, hard=True,
                   anomalies=[kind])


def _failure_text(f: OutcomeFacts) -> str:
    bits = [f"state={f.state}"]
    if f.exit_code is not None:
        bits.append(f"exit_code={f.exit_code}")
    if f.signal is not None:
        bits.append(f"signal={f.signal}")
    if f.reason:
        bits.append(f"reason={f.reason}")
    if f.handoff_error:
        bits.append(f"handoff.error={f.handoff_error[:80]}")
    return ", ".join(bits)


def _flips(outcomes: list[bool]) -> int:
    return sum(1 for a, b in zip(outcomes, outcomes[1:], strict=False) if a != b)


def evaluate(case: OutcomeFacts, history: Iterable[OutcomeFacts], spec: JobSpec | None) -> Verdict:
    """Judge one outcome with the rules alone (pure; no I/O).

    Args:
        case: the outcome being judged.
        history: earlier outcomes of the same job, oldest first (other runs only).
        spec: the job's spec (``expect``, ``confidence_threshold``, ``max_attempts``), or None.

    Returns:
        A ``Verdict`` per the policy table in the module docstring.
    """
    hist = list(history)
    if case.late_result:
        return _hard("late_result", f"late result for run {case.run_id} after it was declared "
                                    f"{case.state}: {_failure_text(case)}", "warning")
    if case.state == "abandoned" and case.reason == "job_removed":
        earlier = f"; earlier attempts failed: {case.prior_failures}" if case.prior_failures else ""
        return _hard("job_removed", f"attempt {case.attempt} was cancelled before it ran: job {case.job!r} is no "
                                    f"longer defined in any spec (runs.reason=job_removed){earlier}", "warning")
    if case.state == "abandoned":
        return Verdict("abandoned", False, None, "abandoned by an operator", silent=True, anomalies=[])

    if case.state == "orphaned" and case.reason == OrphanReason.INTERRUPTED:
        # A clean runner stop left it behind: an operator's routine restart, not a crash.
        if case.retry_queued:
            return Verdict("retry_pending", False, None, f"attempt {case.attempt} interrupted by a clean runner"
                           " stop; retry queued", silent=True, anomalies=["interrupted"])
        return _hard("interrupted", f"attempt {case.attempt} was interrupted by a clean runner stop and not"
                                    f" retried ({_failure_text(case)})", "warning")
    if not case.ok and case.state != "blocked":
        kind = case.state if case.state in ("timed_out", "orphaned") else "failed"
        if case.reason == "verification_failed":
            kind = "verification_failed"
        if case.retry_queued:
            return Verdict("retry_pending", False, None,
                           f"attempt {case.attempt} {_failure_text(case)}; retry queued",
                           silent=True, anomalies=[kind])
        detail = _failure_text(case)
        if kind == "verification_failed" and case.verification_failed:
            detail += f"; failed checks: {', '.join(case.verification_failed[:5])}"
        if case.attempt > 1:
            return Verdict("retries_exhausted", True, "critical",
                           f"attempt {case.attempt} (last) {detail}; earlier: {case.prior_failures} failed",
                           silent=False, hard=True, anomalies=["retries_exhausted", kind])
        return _hard(kind, detail)
    if case.state == "blocked":
        blockers = "; ".join(b[:80] for b in case.blockers[:3]) or "handoff blockers"
        return _hard("blocked", f"blocked: {blockers}", "warning")

    # -- succeeded: soft anomalies ------------------------------------------------------
    found: dict[str, str] = {}
    if case.status == "partial" or case.handoff_status == "partial":
        found["partial"] = "handoff status=partial" + (f": {case.notes}" if case.notes else "")
    if case.output_matches is False:
        pat = spec.expect.output if spec is not None else "?"
        found["output_mismatch"] = f"stdout does not match expect.output /{pat}/"
    threshold = spec.confidence_threshold if spec is not None else 0.6
    if case.confidence is not None and case.confidence < threshold:
        found["low_confidence"] = f"handoff confidence={case.confidence:.2f} < threshold {threshold:.2f}"
    successes = [h.duration_s for h in hist if h.ok and h.status == "success"]
    base = learn(successes)
    if case.duration_s is not None:
        dur = case.duration_s
        explicit = spec.expect.duration if spec is not None else None
        if explicit is not None and dur > explicit[1]:
            found["slow"] = f"duration_s={dur:.1f} above expect.duration max {explicit[1]:g}s"
        elif explicit is not None and dur < explicit[0]:
            found["too_fast"] = f"duration_s={dur:.1f} below expect.duration min {explicit[0]:g}s"
        elif base is not None:
            cls = base.classify(dur)
            if cls is not None:
                found[cls] = f"duration_s={dur:.1f} outside learned range ({base.describe()})"
    finals = [h.ok for h in hist if not h.retry_queued and h.state != "abandoned"][-(FLAP_WINDOW - 1):]
    finals.append(True)
    flips = _flips(finals)
    if flips >= FLAP_FLIPS:
        found["flapping"] = f"{flips} success/failure flips in the last {len(finals)} outcomes"
    if found:
        kinds = [k for k in _SOFT_ORDER if k in found]
        return Verdict(kinds[0], True, "warning", "; ".join(found[k] for k in kinds), silent=False,
                       anomalies=kinds)
    if case.prior_failures > 0 or case.attempt > 1:
        return Verdict("recovered_on_retry", False, "info",
                       f"succeeded on attempt {case.attempt} after {max(case.prior_failures, case.attempt - 1)}"
                       " failed attempt(s)", silent=False, anomalies=["recovered_on_retry"])
    if not any(h.ok for h in hist):
        return Verdict("first_success", False, "info", "first-ever success of this job", silent=False,
                       anomalies=["first_success"])
    reason = "routine success"
    if base is not None:
        reason += f" (duration_s={case.duration_s:.1f}, {base.describe()})" if case.duration_s is not None else ""
    return Verdict("routine", False, None, reason, silent=True, anomalies=[])


def merge(rules: Verdict, llm: Any | None, *, error: str | None = None) -> Verdict:
    """Combine the rules verdict with a Claude answer (``claude_judge.ClaudeVerdict``) or None.

    Claude may raise severity, turn a note into an escalation, and annotate; it may never
    lower severity, silence anything, or change a hard verdict's kind or escalation.
    """
    if llm is None:
        return rules
    out = Verdict(**{**asdict(rules)})
    out.judged_by = "rules+claude"
    if llm.escalate and not out.escalate and not out.silent:
        out.escalate = True
    out.severity = max_severity(out.severity, llm.severity) if out.escalate else out.severity
    note = (llm.reason or "").strip().replace("\n", " ")[:300]
    out.annotation = note or None
    return out


# -- measured judgement quality ----------------------------------------------------------

@dataclass
class EvalCase:
    """One labeled corpus line: ``{id, class, case, history, spec, expect: {escalate, kind}}``.

    ``class`` is hard | soft | routine | near_miss. Soft and note cases count as detected
    when the verdict is not silent and names the expected kind; routine and near-miss cases
    count as silent when the verdict is silent or a non-escalating note.
    """

    id: str
    cls: str
    case: OutcomeFacts
    history: list[OutcomeFacts]
    spec: JobSpec | None
    expect_escalate: bool
    expect_kind: str | None

    @classmethod
    def from_json(cls, line: str) -> EvalCase:
        """Parse one JSONL line. Raises ValueError / pydantic.ValidationError on a bad line."""
        d = json.loads(line)
        spec_d = d.get("spec")
        spec = JobSpec.model_validate({"name": "job", "command": "true", **spec_d}) if spec_d is not None else None
        exp = d.get("expect") or {}
        return cls(id=str(d.get("id")), cls=d["class"], case=OutcomeFacts.from_dict(d["case"]),
                   history=[OutcomeFacts.from_dict(h) for h in d.get("history", [])], spec=spec,
                   expect_escalate=bool(exp.get("escalate")), expect_kind=exp.get("kind"))


@dataclass
class EvalReport:
    """Figures from one eval pass (ratios 0..1; None when no case of that class)."""

    hard_recall: float | None
    soft_recall: float | None
    routine_silence: float | None
    precision: float | None
    counts: dict[str, int]
    misses: list[str]

    def lines(self, label: str) -> list[str]:
        def pct(x: float | None) -> str:
            return "n/a" if x is None else f"{100 * x:.1f}%"
        c = self.counts
        return [
            f"{label}:",
            f"  hard-class recall      {pct(self.hard_recall):>7}  (goal 100%; {c.get('hard', 0)} cases)",
            f"  soft-anomaly recall    {pct(self.soft_recall):>7}  (goal >=95%; {c.get('soft', 0)} cases)",
            f"  routine silence        {pct(self.routine_silence):>7}  (goal >=99%; "
            f"{c.get('routine', 0) + c.get('near_miss', 0)} cases)",
            f"  precision              {pct(self.precision):>7}  (goal >=90%; {c.get('escalated', 0)} escalated)",
        ]

    def meets_goals(self) -> bool:
        return ((self.hard_recall is None or self.hard_recall >= 1.0)
                and (self.soft_recall is None or self.soft_recall >= 0.95)
                and (self.routine_silence is None or self.routine_silence >= 0.99)
                and (self.precision is None or self.precision >= 0.90))


def score(cases: list[EvalCase], verdicts: list[Verdict]) -> EvalReport:
    """Compare verdicts with labels (see ``EvalCase``)."""
    hard = soft = routine = 0
    hard_hit = soft_hit = silent_hit = 0
    escalated = true_pos = 0
    counts: dict[str, int] = {}
    misses: list[str] = []
    for c, v in zip(cases, verdicts, strict=True):
        counts[c.cls] = counts.get(c.cls, 0) + 1
        if c.cls == "hard":
            hard += 1
            ok = v.escalate and (c.expect_kind is None or v.kind == c.expect_kind)
            hard_hit += ok
        elif c.cls == "soft":
            soft += 1
            ok = (not v.silent) and v.escalate == c.expect_escalate and (
                c.expect_kind is None or c.expect_kind in v.anomalies or v.kind == c.expect_kind)
            soft_hit += ok
        else:
            routine += 1
            # a near miss may carry a note (first success, retried transient) but never pages
            ok = v.silent if c.cls == "routine" else not v.escalate
            silent_hit += ok
        if not ok:
            misses.append(f"{c.id} ({c.cls}): expected {c.expect_kind} escalate={c.expect_escalate}, "
                          f"got {v.kind} escalate={v.escalate}")
        if v.escalate:
            escalated += 1
            true_pos += c.expect_escalate
    counts["escalated"] = escalated
    return EvalReport(hard_recall=hard_hit / hard if hard else None,
                      soft_recall=soft_hit / soft if soft else None,
                      routine_silence=silent_hit / routine if routine else None,
                      precision=true_pos / escalated if escalated else None,
                      counts=counts, misses=misses)


def load_corpus(path: str) -> list[EvalCase]:
    """Read a JSONL corpus (blank lines and ``#`` lines skipped).

    Raises:
        ValueError: a line is not a valid case; the message names the line number.
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


def run_eval(cases: list[EvalCase], *, claude: Any | None = None) -> tuple[EvalReport, dict[str, int]]:
    """Judge every case with the rules, and through Claude too when ``claude`` (a
    ``JudgeSettings``) is given; returns the scored report and Claude call statistics
    ``{ok, cached, error, budget}`` (all 0 for rules alone)."""
    calls = {"ok": 0, "cached": 0, "error": 0, "budget": 0}
    judge = None
    if claude is not None:
        from core.supervisor.claude import ClaudeJudge  # lazy: claude_judge imports this module

        judge = ClaudeJudge(claude)
    verdicts = []
    for c in cases:
        v = evaluate(c.case, c.history, c.spec)
        if judge is not None and not v.hard and not v.silent:
            res = judge.consult(c.case, c.history, c.spec, v)
            calls[res.status] = calls.get(res.status, 0) + 1
            v = merge(v, res.verdict)
        verdicts.append(v)
    return score(cases, verdicts), calls
