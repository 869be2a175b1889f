"""The supervisor: verify every handoff, judge every outcome, escalate only what a person must see.

Entry points (the runner and the sweep call them from pool threads, each with its own
``Ledger`` connection):

* ``settle(ledger, run_id, settings=..., actor=...) -> str`` — for a run in ``verifying``:
  verify the evidence (``core.supervisor.verify``), move it to succeeded | failed | blocked through
  ``core.ledger.lifecycle`` (outcome completed and retry queued in the same transaction), then judge
  (in that same transaction when the rules decide alone, after it when Claude is consulted).
* ``judge_run(ledger, run_id, settings=...)`` — after any terminal move: the rules verdict
  (``core.supervisor.rules``), optionally annotated/raised by Claude (``core.supervisor.claude``), written to
  ``job_outcomes`` and turned into escalations (``core.ledger.escalations``). Idempotent per run.
* ``note_late_result(ledger, run_id, settings=...)`` — a result arrived after its run was
  declared orphaned: a hard ``late_result`` escalation (after an abandon: recorded, silent).
* ``periodic(ledger, settings)`` — every heartbeat: runner-gap check, snooze expiry, outbox
  delivery (bounded time).

The policy table lives in ``core.supervisor.rules`` and docs/supervisor.md.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from core.ledger import escalations, runners
from core.ledger.connection import Ledger, StorageError
from core.ledger.lifecycle import FAILED_STATES, TERMINAL, State
from core.ledger.page_records import KindCount
from core.ledger.records import Job, JudgingCase, RaiseEscalation, Run, VerdictWrite
from core.ledger.sql_store import SqlStore
from core.ledger.store import Store
from core.spec.model import JobSpec, spec_from_json
from core.supervisor import consult, notify, reach
from core.supervisor.facts import case_facts, history_facts
from core.supervisor.policy.retry import RETRY
from core.supervisor.rules import RECOVERABLE_KINDS, OutcomeFacts, Verdict, evaluate
from core.supervisor.verify import verify_outcome
from core.vocabulary import AuditEvent, EndReason, EscalationKind, OutcomeStatus

log = logging.getLogger(__name__)

ACTOR = "supervisor"
#: Outcomes of a job read as history (baseline, flapping, first success).
HISTORY_LIMIT = 60
#: ``job`` column of runner-gap escalations (not about one job).
RUNNER_JOB = runners.RUNNER_JOB
#: Longest time ``periodic`` spends delivering notifications per call, seconds.
DELIVERY_BUDGET_S = 2.0


def _settings(settings: Any) -> Any:
    if settings is not None:
        return settings
    try:
        from core.spec.settings import Settings
        return Settings()
    except Exception:  # a broken environment must not stop judging; sinks/judge just stay off
        log.warning("settings could not be loaded; judging with defaults and no sinks", exc_info=True)
        return None


def _sinks(settings: Any) -> list[Any]:
    return list(getattr(settings, "notify", None) or [])


@functools.lru_cache(maxsize=256)
def _spec_of(text: str) -> JobSpec:
    """``spec_from_json``, parsed once per distinct ``jobs.spec`` text (a ``JobSpec`` is
    frozen, so one parse can be shared; settle and judge each read it for every run)."""
    return spec_from_json(text)


def _job_spec(job: Job | None) -> JobSpec | None:
    """The spec of a ``jobs`` record, None for an unknown job or a stored spec that no longer
    reads (logged)."""
    if job is None:
        return None
    try:
        return _spec_of(job.spec)
    except Exception:
        log.warning("stored spec of job %s is unreadable", job.name, exc_info=True)
        return None


def job_cwd(source: str | None, spec: JobSpec | None) -> str:
    """Working directory for a job's verify commands and relative paths: ``spec.cwd`` joined to
    the folder of ``jobs.source`` (same rule as ``core.spec.loader.resolve_cwd``); the process cwd when
    the source is unknown."""
    base = Path(source).resolve().parent if source else Path(os.getcwd())
    if spec is None or spec.cwd is None:
        return str(base)
    return str((base / spec.cwd).resolve())


# -- settle ----------------------------------------------------------------------------------

def settle(ledger: Ledger, run_id: int, *, settings: Any = None, actor: str = ACTOR) -> str:
    """Verify a run in ``verifying`` and move it to succeeded | failed | blocked, then judge it.

    Decision: a non-zero exit or a signal → ``failed`` (reason ``exit_code``/``signal``);
    handoff ``blockers`` → ``blocked``; a failed verification check → ``failed`` (reason
    ``verification_failed``); otherwise ``succeeded`` with status ``success`` or ``partial``.
    The ``job_outcomes`` row (inserted by the runner) gets state, status, reason and
    ``verification`` in the transaction of the move; a failure queues the next attempt there
    too (``retries.follow_up`` with the handoff's ``error``). The verdict (``judge_run``'s
    writes) is committed in that transaction too when the rules decide alone; when the
    Claude judge is to be consulted, or judging there raised, ``judge_run`` runs after it.

    Returns:
        The run's state afterwards; if the run is not in ``verifying`` (someone else moved
        it), nothing is done and its current state is returned (``"missing"`` for no run).
    """
    settings = _settings(settings)
    store = SqlStore(ledger, retry=RETRY)
    case = store.judging_case(run_id)
    if case is None:
        return "missing"
    run, outcome = case.run, case.outcome
    if run.state != State.VERIFYING:
        return run.state
    spec = _job_spec(case.job) or JobSpec(name=run.job, command="true")
    exit_code = outcome.exit_code if outcome is not None else run.exit_code
    sig = outcome.signal if outcome is not None else run.signal
    exit_ok = exit_code == 0 and sig is None
    cwd = job_cwd(case.job.source if case.job else None, spec)
    # An operator may abandon the run while its verify commands run: they are stopped then.
    vf = verify_outcome(outcome, run, spec, cwd, exit_code=exit_code, run_commands=exit_ok,
                        stop_when=lambda: store.run_state(run_id) != State.VERIFYING)
    handoff = outcome.handoff_dict if outcome is not None else None
    blockers = [str(b) for b in (handoff or {}).get("blockers") or []]

    code: EndReason
    if not exit_ok:
        to, status, code = State.FAILED, OutcomeStatus.FAILED, (EndReason.SIGNAL if sig is not None else EndReason.EXIT_CODE)
    elif blockers:
        to, status, code = State.BLOCKED, OutcomeStatus.BLOCKED, EndReason.BLOCKED
    elif not vf.ok:
        to, status, code = State.FAILED, OutcomeStatus.FAILED, EndReason.VERIFICATION_FAILED
    elif handoff is not None and handoff.get("status") == OutcomeStatus.PARTIAL:
        to, status, code = State.SUCCEEDED, OutcomeStatus.PARTIAL, EndReason.PARTIAL
    else:
        to, status, code = State.SUCCEEDED, OutcomeStatus.SUCCESS, EndReason.COMPLETED
    # Nothing more to say than the code, except on success (no reason at all).
    reason = None if code == EndReason.COMPLETED else code.value
    handoff_error = (handoff or {}).get("error")
    handoff_error = str(handoff_error) if handoff_error is not None else None

    detail = {"verification_failed": [c.name for c in vf.failed]} if vf.failed else None
    # The verdict is worked out here, outside any write transaction, for the case as the move
    # will leave it; it is written in the move's transaction when the rules decide alone (a
    # routine success: one commit instead of two); when Claude is to be consulted, or the
    # move lost, ``judge_run`` after it.
    at = time.time()
    out = {"status": status, "verification": vf.to_json(), "exit_code": exit_code, "signal": sig}
    after = _case_after_move(case, to, code, reason, out, at)
    verdicts = _verdicts_for_move(ledger, after, store, settings) if after is not None else {}
    judged = store.settle_run(run_id, run.attempt, State.VERIFYING, to, actor=actor, reason_code=code,
                              reason=reason, detail=detail, at=at,
                              spec=spec, handoff_error=handoff_error, outcome=out, verdicts=verdicts)
    if judged is False:
        judge_run(ledger, run_id, settings=settings)
    return store.run_state(run_id) or "missing"


# -- judging ---------------------------------------------------------------------------------

#: Jobs whose history facts one cache keeps decoded (``_HistoryCache``): at most
#: ``HISTORY_CACHE_JOBS × HISTORY_LIMIT`` facts, each with its outcome's output slices (up to
#: about 20 KB), so about 20 MB at worst and far less for jobs that print little.
HISTORY_CACHE_JOBS = 16


class _HistoryCache:
    """Decoded history facts of one ledger handle, per job, keyed by
    ``(run_id, updated_at, retried)`` (``HistoryOutcome.key``).

    Which outcomes make the history is still asked of the store every time
    (``Store.history_keys``), so the set, its order and each lineage's ``retried`` are always
    current; only the reading and decoding of outcomes that have not been written since
    (``job_outcomes.updated_at`` moves with every write) is skipped. The judge therefore sees
    exactly the facts a fresh read would give. A job's entries are those of its latest window
    only; at most ``HISTORY_CACHE_JOBS`` jobs are kept (least recently judged dropped). One
    cache per ledger handle — the runner's threads share one through their common writer
    (``WriterLedger.writer``); the outcomes may be read through any store of that ledger,
    since a key names its content, not the connection. A lock serialises its use by those
    threads.
    """

    def __init__(self) -> None:
        self.jobs: OrderedDict[str, dict[tuple[int, float, bool], OutcomeFacts]] = OrderedDict()
        self.lock = threading.Lock()

    def history(self, store: Store, job: str, before_run: int) -> list[OutcomeFacts]:
        with self.lock:
            return self._history(store, job, before_run)

    def _history(self, store: Store, job: str, before_run: int) -> list[OutcomeFacts]:
        keys = store.history_keys(job, before_run=before_run, limit=HISTORY_LIMIT)
        held = self.jobs.pop(job, {})
        missing = [k[0] for k in keys if k not in held]
        if missing:
            for h in store.history_outcomes(missing):
                held[h.key] = history_facts(job, h)
        # An outcome written between the two reads has a newer key than ``keys`` names: it is
        # left out of the cache, so it is decoded afresh next time.
        out = [held.get(k) or _history_one(store, job, k) for k in keys]
        self.jobs[job] = {k: held[k] for k in keys if k in held}
        while len(self.jobs) > HISTORY_CACHE_JOBS:
            self.jobs.popitem(last=False)
        return [f for f in out if f is not None]


def _history_one(store: Store, job: str, key: tuple[int, float, bool]) -> OutcomeFacts | None:
    got = store.history_outcomes([key[0]])
    return history_facts(job, got[0]) if got else None


_history_caches: WeakKeyDictionary[object, _HistoryCache] = WeakKeyDictionary()
_history_caches_lock = threading.Lock()


def _history(ledger: Ledger, job: str, before_run: int, store: Store | None = None) -> list[OutcomeFacts]:
    """The job's last ``HISTORY_LIMIT`` judged outcomes before ``before_run``, oldest first,
    as facts, read through ``store`` (default: ``ledger``'s) and decoded once per ledger
    handle (``_HistoryCache``)."""
    owner = getattr(ledger, "writer", None) or ledger  # a runner's thread ledgers share their writer
    with _history_caches_lock:
        cache = _history_caches.get(owner)
        if cache is None:
            cache = _history_caches[owner] = _HistoryCache()
    return cache.history(store or SqlStore(ledger), job, before_run)


def gather(ledger: Ledger, run_id: int) -> tuple[OutcomeFacts, list[OutcomeFacts], JobSpec | None, Run] | None:
    """Facts for judging run ``run_id``: its judging case (``Store.judging_case``, one read)
    and the job's history.

    Returns ``(facts, history oldest first, spec or None, run)``, or None when the run does
    not exist.
    """
    case = SqlStore(ledger).judging_case(run_id)
    if case is None:
        return None
    return case_facts(case), _history(ledger, case.run.job, run_id), _job_spec(case.job), case.run


def _consult(settings: Any, store: Store, facts: OutcomeFacts, history: list[OutcomeFacts],
             spec: JobSpec | None, rules: Verdict) -> Verdict:
    """The verdict after consulting the Claude judge when ``reach`` says the rules cannot
    vouch for the outcome (``consult.judge``); an error, a spent budget or an unverifiable
    quote is recorded as a ``judge_error`` / ``judge_rejected`` event and the rules verdict
    stands."""
    if not _needs_claude(settings, facts, history, spec, rules):
        return rules
    judge_settings = settings.judge
    from core.supervisor import claude as claude_judge  # lazy: anthropic is only needed when the judge is on

    got = consult.judge(facts, history, spec, rules, claude_judge.shared(judge_settings),
                        first_successes=judge_settings.first_successes)
    if got.status in ("error", "budget") and got.answer is None:
        store.record_event(actor=ACTOR, kind=AuditEvent.JUDGE_ERROR, run_id=facts.run_id, job=facts.job,
                           attempt=facts.attempt, reason=got.status,
                           detail={"error": got.error, "consulted_for": got.reasons})
    elif got.rejected is not None:
        answer = got.answer
        store.record_event(actor=ACTOR, kind=AuditEvent.JUDGE_REJECTED, run_id=facts.run_id, job=facts.job,
                           attempt=facts.attempt, reason="quote_not_found",
                           detail={"why": got.rejected, "quote": getattr(answer, "quote", ""),
                                   "clause": getattr(answer, "clause", ""), "consulted_for": got.reasons})
    return got.verdict


def _escaped_finding(case: JudgingCase) -> str | None:
    """The reason sentence for an ``escaped_processes`` finding on the run's outcome
    (``Outcome.handoff_findings``), or None."""
    findings = case.outcome.handoff_findings if case.outcome is not None else None
    for f in findings if isinstance(findings, list) else []:
        if isinstance(f, dict) and f.get("code") == EscalationKind.ESCAPED_PROCESSES:
            return f"run {case.run.id} left processes outside its process group: {f.get('message') or ''}"[:1000]
    return None


def judge_run(ledger: Ledger, run_id: int, *, settings: Any = None) -> None:
    """Judge a run in a terminal state and act on the verdict. Idempotent per run.

    Writes ``job_outcomes`` verdict, escalate, severity, verdict_kind, verdict_reason, silent,
    judged_by (inserting the outcome row when the terminal move left none); opens or counts an
    escalation of the verdict's kind; after a success auto-resolves the job's other
    recoverable escalations; appends a ``verdict`` event (``Store.record_verdict``). A second
    call finds the run judged and does nothing. A run not (yet) terminal is ignored.
    """
    settings = _settings(settings)
    store = SqlStore(ledger)
    case = store.judging_case(run_id)
    if case is None:
        return
    got = _judgeable(ledger, case, store)
    if got is None:
        return
    facts, history, spec, rules = got
    if not case.run.is_subtask:
        rules = _consult(settings, store, facts, history, spec, rules)
    store.record_verdict(run_id, _verdict_write(case, facts, rules, spec, settings))


def _judgeable(ledger: Ledger, case: JudgingCase, store: Store) -> tuple[
        OutcomeFacts, list[OutcomeFacts], JobSpec | None, Verdict] | None:
    """Facts, history, spec and the rules verdict (a sub-task's own: never pages) of a
    terminal, not yet judged run, its history read through ``store``; None when there is
    nothing to judge."""
    run = case.run
    if run.state not in {s.value for s in TERMINAL}:
        return None
    if case.outcome is not None and case.outcome.judged_by is not None:
        return None
    facts = case_facts(case)
    history = _history(ledger, run.job, run.id, store)
    spec = _job_spec(case.job)
    rules = evaluate(facts, history, spec)
    if run.is_subtask:
        # A fan-out sub-task never pages on its own: the parent run's verdict names what is missing.
        rules = Verdict("subtask", False, None, f"sub-task {run.task}: {rules.reason}", silent=True,
                        anomalies=list(rules.anomalies))
    return facts, history, spec, rules


def _needs_claude(settings: Any, facts: OutcomeFacts, history: list[OutcomeFacts], spec: JobSpec | None,
                  rules: Verdict) -> bool:
    """Whether ``_consult`` asks the Claude judge about this outcome of a top-level run (a
    network call: never inside a write transaction): the judge is on and ``reach`` finds a
    reason the rules cannot vouch for it."""
    judge_settings = getattr(settings, "judge", None)
    if judge_settings is None or rules.hard or not judge_settings.is_enabled():
        return False
    return bool(reach.reasons(facts, history, spec, rules, first_successes=judge_settings.first_successes))


def _case_after_move(case: JudgingCase, to: State, code: EndReason, reason: str | None,
                     outcome: dict[str, Any], at: float) -> JudgingCase | None:
    """The judging case of ``case``'s run as its terminal move (``Store.settle_run`` with these
    arguments, at ``at`` Unix seconds) will leave it, retry not queued; None when the run has
    no outcome row yet (the move inserts one: it is judged after the commit)."""
    if case.outcome is None:
        return None
    run = replace(case.run, state=to.value, reason_code=code.value, ended_at=at,
                  reason=reason if reason is not None else case.run.reason)
    return replace(case, run=run, retry_queued=False,
                   outcome=replace(case.outcome, state=to.value, reason=reason, **outcome))


def _verdicts_for_move(ledger: Ledger, after: JudgingCase, store: Store, settings: Any) -> dict[bool, VerdictWrite]:
    """The verdicts (``MoveVerdicts``) of the run whose terminal move will leave it as
    ``after``, worked out outside any write transaction: one for each way the retry policy
    may decide in the move (only "no retry" for a success), each present only when the rules
    decide alone (no Claude judge to consult: ``judge_run`` after the commit does that)."""
    out: dict[bool, VerdictWrite] = {}
    for queued in (False, True) if after.run.state in {s.value for s in FAILED_STATES} else (False,):
        case = replace(after, retry_queued=queued)
        got = _judgeable(ledger, case, store)
        if got is None:
            continue
        facts, history, spec, rules = got
        if not case.run.is_subtask and _needs_claude(settings, facts, history, spec, rules):
            continue
        out[queued] = _verdict_write(case, facts, rules, spec, settings)
    return out


def _verdict_write(case: JudgingCase, facts: OutcomeFacts, verdict: Verdict, spec: JobSpec | None,
                   settings: Any) -> VerdictWrite:
    """What ``Store.record_verdict`` writes for ``verdict``: its escalation, an escaped-processes
    warning, and on a top-level success the recoverable escalations it resolves."""
    run = case.run
    raised: list[RaiseEscalation] = []
    if verdict.escalate:
        raised.append(RaiseEscalation(
            kind=verdict.kind, severity=verdict.severity or "warning",
            reason=verdict.reason + (f" [claude: {verdict.annotation}]" if verdict.annotation else "")))
    escaped = None if run.is_subtask else _escaped_finding(case)
    if escaped is not None:
        # Whatever the outcome: the runner ended what the job left outside its process
        # group; the job should not leave it, so its owner hears of it (a warning).
        raised.append(RaiseEscalation(kind=EscalationKind.ESCAPED_PROCESSES, severity="warning", reason=escaped))
    resolve: list[str] = []
    if facts.state == State.SUCCEEDED and not run.is_subtask:
        keep = set(verdict.anomalies) if verdict.escalate else set()
        keep |= {EscalationKind.ESCAPED_PROCESSES} if escaped is not None else set()
        resolve = sorted(RECOVERABLE_KINDS - keep)
    return VerdictWrite(
        verdict=verdict.to_json(), escalate=verdict.escalate, severity=verdict.severity, kind=verdict.kind,
        reason=verdict.reason, silent=verdict.silent, judged_by=verdict.judged_by, escalations=tuple(raised),
        owner=(spec.owner if spec else None) or None, resolve_kinds=tuple(resolve),
        resolve_reason=f"recovered: run {run.id} succeeded ({verdict.kind})",
        # Only failures that had ended before this run started: an overlapping run (concurrency
        # > 1) never resolves another's escalation.
        resolve_started_at=run.started_at or run.spawned_at or run.created_at,
        sinks=tuple(_sinks(settings)))


def note_late_result(ledger: Ledger, run_id: int, *, settings: Any = None) -> None:
    """Open or count a ``late_result`` escalation for a run whose result arrived after it was
    declared orphaned (the runner has recorded the ``late_result`` event); for an abandoned
    run, record the judgement silently (an operator already decided about it).

    Idempotent per run: a ``late_result_judged`` event marks it done. The run's terminal state
    and verdict are not changed.
    """
    settings = _settings(settings)
    store = SqlStore(ledger)
    case = store.judging_case(run_id)
    if case is None:
        return
    run = case.run
    ev = store.latest_event(run_id, AuditEvent.LATE_RESULT)
    detail = (ev.detail if ev is not None else None) or {}
    facts = OutcomeFacts(run_id=run_id, job=run.job, attempt=run.attempt, state=run.state,
                         status=run.state, reason=run.reason_code, run_reason=run.reason, exit_code=detail.get("exit_code"),
                         signal=detail.get("signal"), late_result=True)
    spec = _job_spec(case.job)
    verdict = evaluate(facts, [], spec)
    # An abandoned run's later end is never news a person must be paged for: the operator (or
    # an operator's stop with --kill) already decided about this run. Its death by the
    # abandon's signal, a trapped SIGTERM's own exit code, or the job ending by itself while
    # the abandon was being carried out (the ``abandon_kill`` event is written only after the
    # kill, so it cannot tell these apart in time) are all recorded in the audit trail — the
    # ``late_result`` event with the real status — and judged silently.
    if run.state == State.ABANDONED:
        killed = detail.get("signal") is not None or store.latest_event(run_id, AuditEvent.ABANDON_KILL) is not None
        store.judge_late_result(run_id, escalation=None, owner=None,
                                reason="ended by the operator's abandon" if killed
                                else "ended after the operator's abandon; the operator had decided")
        return
    store.judge_late_result(run_id, reason="late_result", owner=spec.owner if spec else None,
                            sinks=_sinks(settings),
                            escalation=RaiseEscalation(kind=EscalationKind.LATE_RESULT, severity=verdict.severity or "warning",
                                                       reason=verdict.reason))


# -- periodic --------------------------------------------------------------------------------

def check_runner_gap(ledger: Ledger, *, sinks: Any = (), owner: str | None = None,
                     now: float | None = None) -> str | None:
    """Open the ``runner_gap`` escalation (owned by ``owner``) when no runner is alive while
    one is expected, resolve it once a runner heartbeats again
    (``core.ledger.runners.check_gap``, in one write transaction). Returns ``"opened"``,
    ``"resolved"`` or None (no change)."""
    return SqlStore(ledger).check_runner_gap(sinks=sinks, owner=owner, now=now, actor=ACTOR)


def periodic(ledger: Ledger, settings: Any, *, judge_others: bool = True) -> None:
    """Every heartbeat: runner-gap check, down hosts (``host_down``), snooze expiry, owed notifications (open escalations
    a process without sinks opened), repeats of unacknowledged criticals, then outbox delivery for at most
    ``DELIVERY_BUDGET_S`` seconds (sink timeouts are cut to fit). Each step's error is logged
    and the next step still runs. ``judge_others`` False leaves out the runner-gap and
    down-host checks (the caller's view of the ledger was just interrupted: the others'
    heartbeats are stale for the same reason, not because they died)."""
    sinks = _sinks(settings)
    owner = getattr(settings, "runner_owner", None)
    judging = (("runner_gap", lambda: check_runner_gap(ledger, sinks=sinks, owner=owner)),
               ("host_down", lambda: SqlStore(ledger).check_hosts(sinks=sinks, owner=owner, actor=ACTOR)))
    steps = (*(judging if judge_others else ()),
             ("removed_jobs", lambda: cancel_removed_job_runs(ledger, settings=settings,
                                                              grace_s=getattr(settings, "lease", 30.0))),
             ("snooze_expiry", lambda: escalations.expire_snoozes(ledger, sinks=sinks)),
             ("owed", lambda: notify.enqueue_owed(ledger, sinks)),
             ("repeat", lambda: notify.repeat_unacknowledged(ledger, sinks)),
             ("deliver", lambda: notify.deliver_due(ledger, sinks, budget_s=DELIVERY_BUDGET_S)))
    for name, step in steps:
        try:
            step()
        except StorageError as exc:  # the ledger is unwritable for now: one line, retried next beat
            log.warning("supervisor periodic step %s failed (%s); retrying next beat", name, exc)
        except Exception:
            log.exception("supervisor periodic step %s failed", name)


def cancel_removed_job_runs(ledger: Ledger, *, settings: Any = None, grace_s: float = 30.0,
                            now: float | None = None) -> list[int]:
    """Queued runs (``runs.state = 'queued'``, top-level and fan-out sub-tasks) of a job no spec defines any more
    (``jobs.enabled = 0`` for at least ``grace_s`` seconds, so a runner restarting with a
    moment-old folder does not trigger it) would wait forever — and a pending retry's failure
    would never be reported. Each is moved queued → abandoned (reason ``job_removed``) with its
    outcome in the same transaction, then judged: a ``job_removed`` warning escalation.
    ``now`` is Unix seconds. Returns the run ids cancelled."""
    now = time.time() if now is None else now
    store = SqlStore(ledger)
    done: list[int] = []
    for run in store.queued_runs_of_removed_jobs(removed_before=now - grace_s):
        if store.finish_run(run.id, run.attempt, State.QUEUED, State.ABANDONED, actor=ACTOR,
                            reason_code=EndReason.JOB_REMOVED, reason=EndReason.JOB_REMOVED.value,
                            fields={"ended_at": now}):
            done.append(run.id)
            judge_run(ledger, run.id, settings=settings)
    return done


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """Figures for ``watchkeeper report`` over a window from ``since`` (epoch s, UTC): from
    ``job_outcomes``, ``escalations`` and ``notifications``."""

    since: float
    #: Outcomes judged in the window, and how many were kept silent, noted, escalated.
    runs: int = 0
    silent: int = 0
    notes: int = 0
    escalated: int = 0
    #: ``silent / runs`` (0..1), None when nothing was judged.
    silent_share: float | None = None
    #: Judged outcomes per verdict kind.
    by_verdict: dict[str, int] = field(default_factory=dict)
    #: Escalations seen in the window per kind, most occurrences first.
    escalations: tuple[KindCount, ...] = ()
    #: Notifications created in the window per delivery state (pending, sent, failed, cancelled).
    notifications: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document (keys in this order, as they have always been)."""
        return {"since": self.since, "runs": self.runs, "silent": self.silent, "notes": self.notes,
                "escalated": self.escalated, "silent_share": self.silent_share, "by_verdict": self.by_verdict,
                "escalations": [k.to_json() for k in self.escalations], "notifications": self.notifications}


def report(ledger: Ledger, since: float) -> Report:
    """Figures for ``watchkeeper report``: outcomes judged since ``since`` (Unix seconds)."""
    counts = SqlStore(ledger).judged_counts(since)
    n = counts["runs"]
    return Report(since=since, runs=n, silent=counts["silent"], notes=counts["notes"],
                  escalated=counts["escalated"], silent_share=(counts["silent"] / n) if n else None,
                  by_verdict=counts["by_verdict"], escalations=tuple(escalations.counts_by_kind(ledger, since)),
                  notifications=notify.summary(ledger, since))
