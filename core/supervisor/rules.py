"""The rules judge: a pure function from an outcome (and its job's history) to a verdict.

No database here: ``evaluate(case, history, spec)`` is what ``judge_run`` calls with facts read
from the ledger, and what ``watchkeeper eval`` calls with facts read from a labeled corpus.

Policy table (also in docs/supervisor.md). Hard classes cannot be overruled by anything,
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
failed manual retry         as before    critical    the kind the lineage was escalated as
                                                     (``escalated_as``): one escalation
timed_out / orphaned        same         critical    escalate (hard), or retry_pending as above
left behind by a clean stop interrupted  warning     escalate (hard), or retry_pending; never
                                                     critical (``runs.reason_code = interrupted``)
verification failed         verification_failed  critical  escalate (hard); at once, even with a
                                                     retry queued, when the check is marked
                                                     ``deterministic`` or failed the same way
                                                     on the previous attempt
blocked (handoff blockers)  blocked      warning     escalate (hard)
abandoned                   abandoned    -           silent: an operator chose it
queued run of a removed job job_removed  warning     escalate (hard): cancelled, never ran;
                                                     a pending retry's failure would go unseen
claimed work not found      false_claim  critical    escalate (hard), warning while a retry is
                                                     queued; never auto-resolved by a later success
success, result says partial partial_content warning escalate (soft): handoff success, result
                                                     content degraded / failed children / n of m
success, empty claimed file empty_file   warning     escalate (soft)
success, count 0, never 0   zero_work    warning     escalate (soft; learned work counts)
success, forbidden output   forbidden_output warning escalate (soft; ``expect.forbid_output``)
success, file under minimum small_file   warning     escalate (soft; ``expect.min_bytes``)
success, file far smaller   shrunken_file warning    escalate (soft; learned file sizes)
success, count far off      work_count   warning     escalate (soft; learned work counts)
success, new error line     new_output_shape warning escalate (soft; learned line shapes)
success, usual line missing missing_output warning   escalate (soft; a line every success printed)
success, too slow / fast    slow / too_fast  warning escalate (soft)
success, output ≠ expect    output_mismatch  warning escalate (soft)
success, low confidence     low_confidence   warning escalate (soft)
success, output contradicts intent_mismatch warning  escalate (soft), by the Claude judge only,
its intent                                           with a checked quote (``grounding``)
partial                     partial      warning     escalate (soft)
flapping (≥5 flips in 8)    flapping     warning     escalate (soft)
first-ever success          first_success    info    note
success after failed tries  recovered_on_retry info  note (the one low-severity note)
success matching baseline   routine      -           silent
==========================  ===========  ==========  =========================================
"""

from __future__ import annotations

import signal as _signal
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import regex

from core.spec.model import JobSpec
from core.supervisor import evidence
from core.supervisor.baseline import WINDOW as WORK_WINDOW
from core.supervisor.baseline import WorkBaseline, final_counts, learn, learn_work
from core.text import quoted
from core.vocabulary import EndReason, EscalationKind, OutcomeStatus, RunState, Severity, Trigger

HARD_KINDS = frozenset({EscalationKind.FAILED, EscalationKind.TIMED_OUT, EscalationKind.ORPHANED, EscalationKind.VERIFICATION_FAILED, EscalationKind.BLOCKED,
                        EscalationKind.RETRIES_EXHAUSTED, EscalationKind.LATE_RESULT, EscalationKind.RUNNER_GAP, EscalationKind.JOB_REMOVED, EscalationKind.INTERRUPTED,
                        EscalationKind.FALSE_CLAIM})
#: Soft signals found in the work itself (evidence read raw, learned baselines, declared checks).
WORK_KINDS = frozenset({EscalationKind.PARTIAL_CONTENT, EscalationKind.EMPTY_FILE, EscalationKind.ZERO_WORK, EscalationKind.FORBIDDEN_OUTPUT, EscalationKind.SMALL_FILE,
                        EscalationKind.SHRUNKEN_FILE, EscalationKind.WORK_COUNT, EscalationKind.NEW_OUTPUT_SHAPE, EscalationKind.MISSING_OUTPUT})
#: Raised only by the Claude judge with a checked quote (``core.supervisor.grounding``).
JUDGE_KINDS = frozenset({EscalationKind.INTENT_MISMATCH})
SOFT_KINDS = (frozenset({EscalationKind.SLOW, EscalationKind.TOO_FAST, EscalationKind.OUTPUT_MISMATCH, EscalationKind.LOW_CONFIDENCE, EscalationKind.PARTIAL, EscalationKind.FLAPPING})
              | WORK_KINDS | JUDGE_KINDS)
NOTE_KINDS = frozenset({EscalationKind.FIRST_SUCCESS, EscalationKind.RECOVERED_ON_RETRY})
SILENT_KINDS = frozenset({EscalationKind.ROUTINE, EscalationKind.RETRY_PENDING, EscalationKind.ABANDONED})
#: Kinds a lineage's final failure is escalated as; a failed manual retry of that lineage
#: counts on the same kind (``OutcomeFacts.escalated_as``).
LINEAGE_FAILURE_KINDS = frozenset({EscalationKind.FAILED, EscalationKind.TIMED_OUT, EscalationKind.ORPHANED, EscalationKind.VERIFICATION_FAILED, EscalationKind.RETRIES_EXHAUSTED,
                                   EscalationKind.INTERRUPTED})
#: Kinds a later healthy run of the same job auto-resolves (late_result and runner_gap are
#: not about the job's health; they resolve by operator or runner heartbeat).
RECOVERABLE_KINDS = (frozenset({EscalationKind.FAILED, EscalationKind.TIMED_OUT, EscalationKind.ORPHANED, EscalationKind.INTERRUPTED, EscalationKind.VERIFICATION_FAILED, EscalationKind.BLOCKED,
                               EscalationKind.RETRIES_EXHAUSTED, EscalationKind.SLOW, EscalationKind.TOO_FAST, EscalationKind.OUTPUT_MISMATCH,
                               EscalationKind.LOW_CONFIDENCE, EscalationKind.PARTIAL, EscalationKind.FLAPPING, EscalationKind.ESCAPED_PROCESSES}) | WORK_KINDS
                     | JUDGE_KINDS)
#: Outcome window for flapping: FLAP_FLIPS success/failure alternations within FLAP_WINDOW
#: final outcomes (current one included).
FLAP_WINDOW = 8
FLAP_FLIPS = 5
# When several soft anomalies apply, the first in this order names the verdict.
_SOFT_ORDER = (EscalationKind.PARTIAL_CONTENT, EscalationKind.PARTIAL, EscalationKind.EMPTY_FILE, EscalationKind.ZERO_WORK, EscalationKind.FORBIDDEN_OUTPUT, EscalationKind.SMALL_FILE,
               EscalationKind.SHRUNKEN_FILE, EscalationKind.WORK_COUNT, EscalationKind.NEW_OUTPUT_SHAPE, EscalationKind.MISSING_OUTPUT, EscalationKind.OUTPUT_MISMATCH,
               EscalationKind.LOW_CONFIDENCE, EscalationKind.SLOW, EscalationKind.TOO_FAST, EscalationKind.FLAPPING)
#: Verification checks that test the worker's own claims: a failure is a false claim.
CLAIM_CHECKS = ("file_changed", "artifact")
#: Characters of the job's own lines quoted in a failure reason before only the last is kept.
TELLING_CHARS = 100
#: Seconds one ``expect.forbid_output`` pattern may spend on one output line.
FORBID_MATCH_TIMEOUT_S = 0.5


@dataclass
class OutcomeFacts:
    """What the judge knows about one finished run (from ``job_outcomes`` + ``runs``).

    Times in seconds. ``retry_queued``: the retry policy queued the next attempt of this
    lineage (queued or later; an operator's later ``manual_retry`` does not count). ``prior_failures``: failed attempts before this one in the same lineage.
    ``final``: this attempt is the lineage's last (no retry queued).
    """

    run_id: int = 0
    job: str = ""
    attempt: int = 1
    state: str = "succeeded"          # terminal run state
    status: str = "success"           # job_outcomes.status
    #: Why the run ended: the closed code (``runs.reason_code``, a ``core.vocabulary.EndReason``).
    reason: str | None = None
    #: The sentence for people beside it (``runs.reason``: "timed out after 3s; SIGTERM
    #: ignored, killed 2s later"); quoted in verdicts, never parsed.
    run_reason: str | None = None
    duration_s: float | None = None
    exit_code: int | None = 0
    signal: int | None = None
    handoff_status: str | None = None
    confidence: float | None = None
    handoff_error: str | None = None
    blockers: list[str] = field(default_factory=list)
    verification_ok: bool | None = None
    verification_failed: list[str] = field(default_factory=list)
    #: Failed checks the spec marks ``deterministic`` (``verify[].deterministic``), as in
    #: ``verification_failed``: a retry would fail the same way.
    deterministic_failed: list[str] = field(default_factory=list)
    output_matches: bool | None = None  # None: no expect.output in the spec
    retry_queued: bool = False
    prior_failures: int = 0
    late_result: bool = False
    ended_at: float | None = None
    output_excerpt: str = ""          # bounded slice of stdout/stderr, for the Claude judge only
    notes: str | None = None          # handoff notes (e.g. what a partial result is missing)
    # -- evidence, read raw (job_outcomes stdout_head + stdout_tail, stderr_tail, handoff, and
    # the files verification measured) --
    stdout: str = ""
    stderr: str = ""
    handoff: dict[str, Any] | None = None
    files: list[dict[str, Any]] = field(default_factory=list)  # [{path, role, size (bytes) | None}]
    false_claims: list[str] = field(default_factory=list)      # claim checks verification failed
    #: A manual retry only: the kind the lineage's failure was escalated as before it (from
    #: ``job_outcomes``); a failure of the retry counts on that escalation, not a new kind.
    escalated_as: str | None = None
    #: The verdict this outcome was given when judged (``job_outcomes.verdict_kind`` /
    #: ``escalate``); None/False for the case being judged and for corpus history without one.
    verdict_kind: str | None = None
    escalated: bool = False
    trigger: str | None = None        # runs.trigger (a ``Trigger``): why the run row exists
    host: str | None = None           # runs.host: the host whose runner spawned it

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutcomeFacts:
        """Build from a dict, ignoring unknown keys (corpus files may carry comments).

        Raw evidence fills what is not given: a ``handoff`` dict supplies ``handoff_status``,
        ``confidence``, ``handoff_error``, ``blockers`` and ``notes``; ``stdout``/``stderr``
        supply ``output_excerpt``.
        """
        names = set(cls.__dataclass_fields__)
        f = cls(**{k: v for k, v in data.items() if k in names})
        h = f.handoff if isinstance(f.handoff, dict) else None
        if h is not None:
            if f.handoff_status is None and isinstance(h.get("status"), str):
                f.handoff_status = h["status"]
            conf = h.get("confidence")
            if f.confidence is None and isinstance(conf, int | float) and not isinstance(conf, bool):
                f.confidence = float(conf)
            if f.handoff_error is None and h.get("error") is not None:
                f.handoff_error = str(h["error"])
            if not f.blockers and isinstance(h.get("blockers"), list):
                f.blockers = [str(b) for b in h["blockers"]]
            if f.notes is None and isinstance(h.get("notes"), str):
                f.notes = h["notes"][:300]
        if not f.output_excerpt and (f.stdout or f.stderr):
            f.output_excerpt = "\n".join(x for x in (f.stdout, f.stderr) if x)[-4000:]
        return f

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def ok(self) -> bool:
        return self.state == RunState.SUCCEEDED


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


def _hard(kind: str, reason: str, severity: str = Severity.CRITICAL) -> Verdict:
    return Verdict(kind=kind, escalate=True, severity=severity, reason=reason, silent=False, hard=True,
                   anomalies=[kind])


def _signal_name(sig: int) -> str:
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _dq(text: str) -> str:
    """A line of the job's output inside a reason: in double quotes, escaped by the one
    escaper (``core.text.quoted``), so ESC reads ``\x1b`` here as in output sections."""
    return quoted(text, '"')


def _quote(lines: list[str]) -> str:
    return " / ".join(_dq(x) for x in lines)


def _telling_lines(f: OutcomeFacts, n: int = 2) -> list[str]:
    """The job's own most telling output lines: the last stderr lines, else the last
    error-like stdout lines, else the last stdout lines. Only the last one when two would not
    fit a one-line view (the last line is usually the verdict: "aborting because ...")."""
    err = evidence.tail_lines(f.stderr, n)
    if not err:
        out = [ln.text[:160] for ln in evidence.lines(f.stdout) if evidence.error_like(ln.text)]
        err = out[-n:] if out else evidence.tail_lines(f.stdout, n)
    return err[-1:] if sum(len(x) for x in err) > TELLING_CHARS else err


def _orphan_text(f: OutcomeFacts) -> str:
    """What happened to an orphaned run, per its reason code (``runs.reason_code``)
    and the exit status the ledger holds: who ended the process, or how it had ended before
    anyone could record it. The reason code closes the sentence for grep."""
    sig = _signal_name(f.signal) if f.signal is not None else None
    code = f.exit_code
    # A ``watchkeeper exec`` run (``runs.trigger = exec``) has no runner: its wrapper
    # process held the lease and was to record the outcome.
    holder = "its watchkeeper exec wrapper" if f.trigger == Trigger.EXEC else "its runner"
    if f.reason == EndReason.RUNNER_GONE:
        gone = f"{holder} was gone ({'killed, crash, OOM' if f.trigger == Trigger.EXEC else 'crash, kill -9, OOM'})"
        what = (f"was declared orphaned: {gone} while the job still ran, so the sweep ended the process ({sig})"
                if sig else
                f"was declared orphaned: {gone} and the process had ended unobserved, its exit status never recorded")
    elif f.reason == EndReason.INTERRUPTED:
        what = f"was left running by a clean runner stop, and {_interrupted_end(f)}"
    elif f.reason == EndReason.LEASE_EXPIRED:
        if sig:
            what = f"was killed by {sig}, but {holder} died before recording the outcome (the lease expired)"
        elif code == 0:
            what = (f"finished with exit 0 but its verification never completed: {holder} died and the lease"
                    " expired")
        elif code is not None:
            what = (f"exited with code {code}, but {holder} died before recording the outcome (the lease"
                    " expired)")
        elif f.host:
            # Settled by whichever host saw the lease expire: on another host its process
            # could not be looked at, so whether it still runs there is not known here.
            what = (f"was declared orphaned: {holder} on {f.host} died and the lease expired; no exit status"
                    " was recorded (the process had ended, or its host is out of reach)")
        else:
            what = (f"was declared orphaned: {holder} died and the lease expired; the process had already"
                    " ended, its exit status never recorded")
    elif f.reason == EndReason.START_TIMEOUT:
        what = "never started: it stayed spawned past start_timeout (its runner died or hung while launching it)"
    elif f.reason == EndReason.MONITOR_GONE:
        what = ("was declared orphaned: its monitor was killed while the job ran, and the job's exit status"
                " could not be collected when it ended")
    elif f.reason == EndReason.RUNNER_ERROR:
        what = "was declared orphaned: its task in the runner died of an error"
    else:
        what = "was declared orphaned: nobody recorded how its process ended"
    return what + (f" ({f.reason})" if f.reason else "")


def _interrupted_end(f: OutcomeFacts) -> str:
    """How a run a clean runner stop left behind ended (``runs.reason_code = interrupted``)."""
    if f.signal is not None:
        return f"the sweep ended the still-running process ({_signal_name(f.signal)})"
    if f.run_reason and f.run_reason != f.reason:
        # Ended by the runner that took it over, which said why in a sentence (a fan-out
        # parent whose job is no longer a fan-out: core.runner.fanout).
        return f.run_reason
    return "it ended unobserved, its exit status never recorded"


def _failure_text(f: OutcomeFacts) -> str:
    """One sentence: how the run ended, in words, with the job's own last lines."""
    if f.state == RunState.TIMED_OUT:
        # The run's own sentence says the deadline and how the kill went ("timed out after 3s;
        # SIGTERM ignored, killed 2s later"): quoted whole (the duration would add the grace).
        if f.reason in (EndReason.TIMEOUT, EndReason.FANOUT_UNSETTLED) and f.run_reason:
            what = f.run_reason  # a fan-out parent has no process: nothing "was killed"
        else:
            what = "timed out and was killed" + (f" ({f.run_reason or f.reason})" if f.run_reason or f.reason else "")
    elif f.state == RunState.ORPHANED:
        what = _orphan_text(f)
    elif f.reason == EndReason.SPAWN_FAILED and f.run_reason:
        # The run's own sentence ("could not start: no such command 'x'"), with the exit
        # status a shell would have given.
        what = f.run_reason
        if f.exit_code is not None:
            what += f" (exit {f.exit_code})"
    elif f.signal is not None:
        what = f"was killed by {_signal_name(f.signal)}"
    elif f.exit_code is not None and f.exit_code != 0:
        what = f"exited with code {f.exit_code}"
    elif f.reason:
        what = f"ended {f.state} ({f.reason})"
    else:
        what = f"ended {f.state}"
    lines = _telling_lines(f)
    if lines:
        what += f"; last output: {_quote(lines)}"
    if f.handoff_error:
        what += f"; handoff error: {_dq(f.handoff_error[:120])}"
    return what


def _deterministic_failure(case: OutcomeFacts, hist: list[OutcomeFacts]) -> str | None:
    """Why a failed verification will fail the same way again, naming the check: the spec
    marks it ``deterministic``, or the same check failed the same way (numbers masked) on the
    previous attempt of this lineage. None otherwise."""
    if case.deterministic_failed:
        return f"{_dq(case.deterministic_failed[0][:160])}, a check marked deterministic"
    prev = next((h for h in reversed(hist) if h.attempt == case.attempt - 1 and h.retry_queued), None)
    if prev is None or not prev.verification_failed or not case.verification_failed:
        return None
    same = {evidence.mask(c)[0] for c in prev.verification_failed}
    for check in case.verification_failed:
        if evidence.mask(check)[0] in same:
            return f"{_dq(check[:160])}, the same check failing the same way as on attempt {prev.attempt}"
    return None


def _flips(outcomes: list[bool]) -> int:
    return sum(1 for a, b in zip(outcomes, outcomes[1:], strict=False) if a != b)


def evaluate(case: OutcomeFacts, history: Iterable[OutcomeFacts], spec: JobSpec | None) -> Verdict:
    """Judge one outcome with the rules alone (pure; no I/O).

    Args:
        case: the outcome being judged, with its raw evidence (output, handoff, files).
        history: earlier outcomes of the same job, oldest first (other runs only); their
            output and files teach the work baseline.
        spec: the job's spec (``expect``, ``confidence_threshold``, ``max_attempts``), or None.

    Returns:
        A ``Verdict`` per the policy table in the module docstring. Its ``reason`` is a sentence
        carrying the evidence.
    """
    hist = list(history)
    job = case.job or "the job"
    if case.late_result:
        if case.signal is not None:
            ended = f"it was killed by {_signal_name(case.signal)}"
        else:
            ended = f"it exited with code {case.exit_code}" if case.exit_code is not None else "it ended"
        return _hard(EscalationKind.LATE_RESULT, f"run {case.run_id} of {job} reported a result after it was declared "
                                    f"{case.state}: {ended} (exit_code={case.exit_code})", Severity.WARNING)
    if case.state == RunState.ABANDONED and case.reason == EndReason.JOB_REMOVED:
        earlier = f"; earlier attempts failed: {case.prior_failures}" if case.prior_failures else ""
        if case.run_reason and case.run_reason != case.reason:  # a sub-task whose task left the spec
            gone = case.run_reason
        else:
            gone = f"job {quoted(case.job)} is no longer defined in any spec"
        return _hard(EscalationKind.JOB_REMOVED, f"attempt {case.attempt} was cancelled before it ran: {gone}"
                                    f" (runs.reason_code=job_removed){earlier}", Severity.WARNING)
    if case.state == RunState.ABANDONED:
        return Verdict(EscalationKind.ABANDONED, False, None, "abandoned by an operator", silent=True, anomalies=[])

    if case.state == RunState.ORPHANED and case.reason == EndReason.INTERRUPTED:
        # A clean runner stop left it behind: an operator's routine restart, not a crash.
        if case.retry_queued:
            return Verdict(EscalationKind.RETRY_PENDING, False, None, f"attempt {case.attempt} interrupted by a clean runner"
                           " stop; retry queued", silent=True, anomalies=[EscalationKind.INTERRUPTED])
        # Said once: how it ended after the stop, then the job's own last lines.
        told = _failure_text(case).removeprefix(f"{_orphan_text(case)}")
        return _hard(EscalationKind.INTERRUPTED, f"attempt {case.attempt} was interrupted by a clean runner stop and not"
                                    f" retried: {_interrupted_end(case)} ({case.reason}){told}", Severity.WARNING)
    if not case.ok and case.state != RunState.BLOCKED:
        kind = case.state if case.state in (RunState.TIMED_OUT, RunState.ORPHANED) else EscalationKind.FAILED
        if case.reason == EndReason.VERIFICATION_FAILED:
            kind = EscalationKind.VERIFICATION_FAILED
        if kind == EscalationKind.VERIFICATION_FAILED and case.false_claims:
            # A trust problem, not a transient one: surfaced even while a retry is queued.
            claimed = "; ".join(case.false_claims[:3])
            tail = "; a retry is queued" if case.retry_queued else ""
            return _hard(EscalationKind.FALSE_CLAIM, f"attempt {case.attempt} of {job} claimed work verification cannot "
                                        f"find: {claimed}{tail}",
                         Severity.WARNING if case.retry_queued else Severity.CRITICAL)
        repeat = _deterministic_failure(case, hist) if kind == EscalationKind.VERIFICATION_FAILED and case.retry_queued else None
        if repeat is not None:
            # The check will fail the same way on the retry: waiting for it only delays the page.
            return _hard(EscalationKind.VERIFICATION_FAILED, f"attempt {case.attempt} of {job} exited 0 but failed verification:"
                                                f" {repeat}; the queued retry will fail the same way")
        if case.retry_queued:
            return Verdict(EscalationKind.RETRY_PENDING, False, None,
                           f"attempt {case.attempt} {_failure_text(case)}; retry queued",
                           silent=True, anomalies=[kind])
        if kind == EscalationKind.VERIFICATION_FAILED:
            checks = "; ".join(case.verification_failed[:3]) or "a check failed"
            detail = f"exited 0 but failed verification: {checks}"
        else:
            detail = _failure_text(case)
        if case.escalated_as in LINEAGE_FAILURE_KINDS:
            # An operator retried an escalated failure and it failed again: the same problem,
            # counted on the escalation they were looking at, whatever the attempt number.
            return Verdict(case.escalated_as, True, Severity.CRITICAL,
                           f"{job} {detail} again on a manual retry (attempt {case.attempt}; the lineage's failure"
                           f" was escalated as {case.escalated_as})", silent=False, hard=True,
                           anomalies=list(dict.fromkeys([case.escalated_as, kind])))
        if case.attempt > 1:
            return Verdict(EscalationKind.RETRIES_EXHAUSTED, True, Severity.CRITICAL,
                           f"{job} {detail} (attempt {case.attempt}, the last; {case.prior_failures} earlier "
                           "attempt(s) failed too)", silent=False, hard=True, anomalies=[EscalationKind.RETRIES_EXHAUSTED, kind])
        return _hard(kind, f"{job} {detail}")
    if case.state == RunState.BLOCKED:
        blockers = "; ".join(b[:80] for b in case.blockers[:3]) or "handoff blockers"
        return _hard(EscalationKind.BLOCKED, f"{job} is blocked: {blockers}", Severity.WARNING)

    # -- succeeded: soft signals ---------------------------------------------------------
    found: dict[str, str] = {}
    if case.status == OutcomeStatus.PARTIAL or case.handoff_status == OutcomeStatus.PARTIAL:
        found[EscalationKind.PARTIAL] = "its handoff says status partial" + (f": {case.notes}" if case.notes else "")
    elif case.handoff is not None:
        problems = evidence.result_problems(case.handoff)
        if problems:
            found[EscalationKind.PARTIAL_CONTENT] = (f"its handoff says {case.handoff_status or 'success'} while its own "
                                        f"content says {'; '.join(problems[:3])}")
    if case.output_matches is False:
        pat = spec.expect.output if spec is not None else "?"
        found[EscalationKind.OUTPUT_MISMATCH] = f"its output does not match expect.output /{pat}/"
    threshold = spec.confidence_threshold if spec is not None else 0.6
    if case.confidence is not None and case.confidence < threshold:
        found[EscalationKind.LOW_CONFIDENCE] = f"its handoff confidence is {case.confidence:.2f}, under the threshold {threshold:.2f}"
    # Only successes judged unremarkable teach the baselines: a success escalated as an
    # anomaly (zero rows, an empty file, a new error line) would otherwise widen the learned
    # range to include it, and the same wrong thing would pass silently the next time.
    successes = [h for h in hist if h.ok and h.status == OutcomeStatus.SUCCESS and not h.escalated]
    base = learn([h.duration_s for h in successes])
    if case.duration_s is not None:
        dur = case.duration_s
        explicit = spec.expect.duration if spec is not None else None
        if explicit is not None and dur > explicit[1]:
            found[EscalationKind.SLOW] = f"its duration was {dur:.1f}s, above expect.duration max {explicit[1]:g}s"
        elif explicit is not None and dur < explicit[0]:
            found[EscalationKind.TOO_FAST] = f"its duration was {dur:.1f}s, below expect.duration min {explicit[0]:g}s"
        elif base is not None:
            cls = base.classify(dur)
            if cls is not None:
                found[cls] = f"its duration was {dur:.1f}s, outside its learned range ({base.describe()})"
    found.update(work_signals(case, successes, spec))
    finals = [h.ok for h in hist if not h.retry_queued and h.state != RunState.ABANDONED][-(FLAP_WINDOW - 1):]
    finals.append(True)
    flips = _flips(finals)
    if flips >= FLAP_FLIPS:
        found[EscalationKind.FLAPPING] = f"it flipped between success and failure {flips} times in the last {len(finals)} outcomes"
    if found:
        kinds: list[str] = [k for k in _SOFT_ORDER if k in found]
        # The three most telling signals make the sentence; ``anomalies`` keeps them all.
        return Verdict(kinds[0], True, Severity.WARNING, f"{job} succeeded but " + "; ".join(found[k] for k in kinds[:3]),
                       silent=False, anomalies=kinds)
    if case.prior_failures > 0 or case.attempt > 1:
        return Verdict(EscalationKind.RECOVERED_ON_RETRY, False, Severity.INFO,
                       f"{job} succeeded on attempt {case.attempt} after "
                       f"{max(case.prior_failures, case.attempt - 1)} failed attempt(s)",
                       silent=False, anomalies=[EscalationKind.RECOVERED_ON_RETRY])
    if not any(h.ok for h in hist):
        return Verdict(EscalationKind.FIRST_SUCCESS, False, Severity.INFO, f"first-ever success of {job}", silent=False,
                       anomalies=[EscalationKind.FIRST_SUCCESS])
    reason = "routine success"
    if base is not None and case.duration_s is not None:
        reason += f" ({case.duration_s:.1f}s, {base.describe()})"
    return Verdict(EscalationKind.ROUTINE, False, None, reason, silent=True, anomalies=[])


def _sizes(f: OutcomeFacts) -> dict[str, int]:
    return {x.path: x.size for x in evidence.files_from_dicts(f.files) if x.size is not None}


def learn_from(successes: list[OutcomeFacts]) -> WorkBaseline | None:
    """The work baseline (line shapes, work counts, file sizes) of these successful outcomes."""
    return learn_work((((ln.shape, ln.counts, ln.text) for ln in evidence.lines(h.stdout)), _sizes(h))
                      for h in successes)


def work_signals(case: OutcomeFacts, successes: list[OutcomeFacts], spec: JobSpec | None) -> dict[str, str]:
    """Soft signals in the work itself, each ``kind → evidence phrase``: declared checks
    (``expect.forbid_output``, ``expect.min_bytes``), empty claimed/expected files, and —
    once the job has ``MIN_WORK_SAMPLES`` successes — departures from its learned line
    shapes, work counts and file sizes."""
    found: dict[str, str] = {}
    out_lines = evidence.lines(case.stdout)
    all_lines = out_lines + evidence.lines(case.stderr)
    if spec is not None:
        for pat in spec.expect.forbid_output:
            hit = _first_match(pat, all_lines)
            if hit is not None:
                found[EscalationKind.FORBIDDEN_OUTPUT] = (f"it printed {_dq(hit.text[:160])}, "
                                             f"which expect.forbid_output /{pat}/ forbids")
                break
    files = evidence.files_from_dicts(case.files)
    by_path = {f.path: f for f in files}
    if spec is not None:
        for path, minimum in spec.expect.min_bytes.items():
            got = by_path.get(path)
            if got is None or got.size is None:
                found.setdefault(EscalationKind.SMALL_FILE, f"{path} is missing (expect.min_bytes {minimum})")
            elif got.size < minimum:
                found.setdefault(EscalationKind.SMALL_FILE, f"{path} is {got.size} bytes, under expect.min_bytes {minimum}")
    empty = [f.path for f in files if f.size == 0]
    if empty:
        found[EscalationKind.EMPTY_FILE] = f"{'the file it wrote' if len(empty) == 1 else 'files it wrote'} " \
                              f"{', '.join(empty[:3])} {'is' if len(empty) == 1 else 'are'} empty (0 bytes)"
    # Shapes are compared with every success there is (even one): an error-like line that no
    # success of this job ever printed is news, and in a first success every line is new.
    known = {ln.shape for h in successes[-WORK_WINDOW:] for ln in evidence.lines(h.stdout)}
    known |= {ln.shape for h in successes[-WORK_WINDOW:] for ln in evidence.lines(h.stderr)}
    new_errors = [ln for ln in all_lines if ln.shape not in known and evidence.error_like(ln.text)]
    if new_errors:
        shown = _quote([ln.text[:160] for ln in new_errors[:2]])
        found[EscalationKind.NEW_OUTPUT_SHAPE] = (f"it printed {shown}, a line none of its last {len(successes[-WORK_WINDOW:])} "
                                     "successes printed" if successes else
                                     f"its first success printed {shown}")
    work = learn_from(successes)
    if work is None:
        return found
    n = work.samples
    for f in files:
        if f.size and f.path not in empty:
            shrunk = work.size_anomaly(f.path, f.size)
            if shrunk is not None:
                found.setdefault(shrunk[0], f"{f.path} is {f.size} bytes, {shrunk[1]}")
    shapes_now = {ln.shape for ln in out_lines}
    # Each count as learned: its shape's last line in this run (a progress counter's last value).
    last_line = {ln.shape: ln for ln in out_lines}
    for (shape, i), value in final_counts((ln.shape, ln.counts, ln.text) for ln in out_lines).items():
        kind = work.count_anomaly(shape, i, value)
        if kind is not None and kind not in found:
            rng = work.counts[(shape, i)]
            found[kind] = f"it printed {_dq(last_line[shape].text[:160])}; that count is {rng.describe()}"
    missing = [s for s in work.always() if s not in shapes_now]
    if missing:
        example = work.examples.get(missing[0], missing[0])[:160]
        found[EscalationKind.MISSING_OUTPUT] = (f"it did not print a line like {_dq(example)}, "
                                   f"which every one of its last {n} successes printed")
    return found


def _first_match(pattern: str, lines: list[evidence.Line]) -> evidence.Line | None:
    """The first line ``pattern`` matches, under the same ReDoS bound as ``expect.output``
    (the ``regex`` engine the spec validated the pattern with)."""
    try:
        rx = regex.compile(pattern)
        for ln in lines:
            if rx.search(ln.text, timeout=FORBID_MATCH_TIMEOUT_S, concurrent=True):
                return ln
    except (regex.error, TimeoutError):
        return None
    return None
