"""The supervisor: verify every handoff, judge every outcome, escalate only what a person must see.

Entry points (the runner and the sweep call them from worker threads, each with its own
``Ledger`` connection):

* ``settle(ledger, run_id, settings=..., actor=...) -> str`` — for a run in ``verifying``:
  verify the evidence (``core.supervisor.verify``), move it to succeeded | failed | blocked through
  ``core.ledger.lifecycle`` (outcome completed and retry queued in the same transaction), then judge
  (in that same transaction when the rules decide alone, after it when Claude is consulted).
* ``judge_run(ledger, run_id, settings=...)`` — after any terminal move: the rules verdict
  (``core.supervisor.rules``), optionally annotated/raised by Claude (``core.supervisor.claude``), written to
  ``job_outcomes`` and turned into escalations (``core.ledger.escalations``). Idempotent per run.
* ``note_late_result(ledger, run_id, settings=...)`` — a result arrived after its run was
  declared orphaned or abandoned: a hard ``late_result`` escalation.
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
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from core.ledger import escalations, events, jobs, lifecycle, outcomes, runners, runs, terminal
from core.ledger.connection import Conn, Ledger, StorageError, add_event
from core.ledger.lifecycle import TERMINAL, State
from core.spec.model import JobSpec, spec_from_json
from core.supervisor import notify
from core.supervisor.facts import outcome_facts
from core.supervisor.rules import RECOVERABLE_KINDS, OutcomeFacts, Verdict, evaluate, merge
from core.supervisor.verify import verify_outcome
from core.vocabulary import EscalationKind, Trigger

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


def _job_spec(conn: Conn, job: str) -> tuple[JobSpec | None, dict[str, Any] | None]:
    jrow = jobs.job_row(conn, job)
    if jrow is None:
        return None, None
    try:
        return _spec_of(jrow["spec"]), jrow
    except Exception:
        log.warning("stored spec of job %s is unreadable", job, exc_info=True)
        return None, jrow


def job_cwd(source: str | None, spec: JobSpec | None) -> str:
    """Working directory for a job's verify commands and relative paths: ``spec.cwd`` joined to
    the folder of ``jobs.source`` (same rule as ``core.spec.model.resolve_cwd``); the process cwd when
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
    run = runs.get(ledger.conn, run_id)
    if run is None:
        return "missing"
    if run["state"] != State.VERIFYING:
        return str(run["state"])
    spec, jrow = _job_spec(ledger.conn, run["job"])
    spec = spec or JobSpec(name=run["job"], command="true")
    outcome = outcomes.get(ledger.conn, run_id) or {}
    exit_code = outcome.get("exit_code", run["exit_code"]) if outcome else run["exit_code"]
    sig = outcome.get("signal", run["signal"]) if outcome else run["signal"]
    exit_ok = exit_code == 0 and sig is None
    cwd = job_cwd(jrow["source"] if jrow else None, spec)
    # An operator may abandon the run while its verify commands run: they are stopped then.
    vf = verify_outcome({**outcome, "exit_code": exit_code}, run, spec, cwd, run_commands=exit_ok,
                        stop_when=lambda: runs.state_of(ledger.conn, run_id) != State.VERIFYING)
    handoff = outcome.get("handoff") if isinstance(outcome.get("handoff"), dict) else None
    blockers = [str(b) for b in (handoff or {}).get("blockers") or []]

    if not exit_ok:
        to, status, reason = State.FAILED, "failed", ("signal" if sig is not None else "exit_code")
    elif blockers:
        to, status, reason = State.BLOCKED, "blocked", "blocked"
    elif not vf.ok:
        to, status, reason = State.FAILED, "failed", "verification_failed"
    elif handoff is not None and handoff.get("status") == "partial":
        to, status, reason = State.SUCCEEDED, "partial", "partial"
    else:
        to, status, reason = State.SUCCEEDED, "success", None
    handoff_error = (handoff or {}).get("error")
    handoff_error = str(handoff_error) if handoff_error is not None else None

    detail = {"verification_failed": [c.name for c in vf.failed]} if vf.failed else None
    lifecycle.check(State.VERIFYING, to)

    def tx(conn: Conn) -> bool | None:
        if not terminal.finish(conn, run_id, run["attempt"], State.VERIFYING, to, actor=actor, reason=reason,
                               detail=detail, spec=spec, handoff_error=handoff_error,
                               outcome={"status": status, "verification": vf.to_json(), "exit_code": exit_code,
                                        "signal": sig}):
            return None
        # The verdict in the same transaction when the rules decide alone (a routine success:
        # one commit instead of two). Judging that fails is undone alone and retried by
        # ``judge_run`` after the commit; it never holds back the terminal move.
        conn.execute("SAVEPOINT judge")
        try:
            judged = _judge_in(ledger, conn, run_id, settings)
        except Exception:
            conn.execute("ROLLBACK TO judge")
            log.warning("run %s: judging in the terminal move's transaction failed; judging after it",
                        run_id, exc_info=True)
            judged = False
        conn.execute("RELEASE judge")
        return judged

    judged = ledger.write(tx)
    if judged is False:
        judge_run(ledger, run_id, settings=settings)
    return runs.state_of(ledger.conn, run_id) or "missing"


# -- judging ---------------------------------------------------------------------------------

#: Jobs whose history facts one cache keeps decoded (``_HistoryCache``): at most
#: ``HISTORY_CACHE_JOBS × HISTORY_LIMIT`` facts, each with its outcome's output slices (up to
#: about 20 KB), so about 20 MB at worst and far less for jobs that print little.
HISTORY_CACHE_JOBS = 16


class _HistoryCache:
    """Decoded history facts of one ``Ledger`` connection, per job, keyed by
    ``(run_id, updated_at, retried)``.

    Which outcomes make the history is still asked of the ledger every time
    (``outcomes.job_history_keys``: the same rows as ``outcomes.job_history``), so the set,
    its order and each lineage's ``retried`` are always current; only the decoding of rows
    that have not been written since (``job_outcomes.updated_at`` moves with every write)
    is skipped. The judge therefore sees exactly the facts a fresh read would give. A job's
    entries are those of its latest window only; at most ``HISTORY_CACHE_JOBS`` jobs are
    kept (least recently judged dropped). One cache per ledger handle — the runner's
    threads share one through their common writer (``WriterLedger.writer``); the rows may be
    read through any connection to that file, since a row's key names its content, not the
    connection. A lock serialises its use by those threads.
    """

    def __init__(self) -> None:
        self.jobs: OrderedDict[str, dict[tuple[int, float, bool], OutcomeFacts]] = OrderedDict()
        self.lock = threading.Lock()

    def history(self, conn: Conn, job: str, before_run: int) -> list[OutcomeFacts]:
        with self.lock:
            return self._history(conn, job, before_run)

    def _history(self, conn: Conn, job: str, before_run: int) -> list[OutcomeFacts]:
        keys = outcomes.job_history_keys(conn, job, before_run, HISTORY_LIMIT)
        held = self.jobs.pop(job, {})
        missing = [k[0] for k in keys if k not in held]
        if missing:
            for r in outcomes.history_rows(conn, missing):
                key = (int(r["run_id"]), r["updated_at"], r["retried"])
                held[key] = outcome_facts({"job": job}, r, retry_queued=r["retried"])
        # A row written between the two reads has a newer key than ``keys`` names: read
        # alone, without caching, so it is decoded afresh next time.
        out = [held.get(k) or _history_one(conn, job, k[0]) for k in keys]
        self.jobs[job] = {k: held[k] for k in keys if k in held}
        while len(self.jobs) > HISTORY_CACHE_JOBS:
            self.jobs.popitem(last=False)
        return [f for f in out if f is not None]


def _history_one(conn: Conn, job: str, run_id: int) -> OutcomeFacts | None:
    rows = [r for r in outcomes.job_history(conn, job, run_id + 1, 1) if r["run_id"] == run_id]
    return outcome_facts({"job": job}, rows[0], retry_queued=rows[0]["retried"]) if rows else None


_history_caches: WeakKeyDictionary[object, _HistoryCache] = WeakKeyDictionary()
_history_caches_lock = threading.Lock()


def _history(ledger: Ledger, job: str, before_run: int, conn: Conn | None = None) -> list[OutcomeFacts]:
    """The job's last ``HISTORY_LIMIT`` judged outcomes before ``before_run``, oldest first,
    as facts (``outcomes.job_history``), read through ``conn`` (default ``ledger.conn``) and
    decoded once per ledger handle (``_HistoryCache``)."""
    owner = getattr(ledger, "writer", None) or ledger  # a runner's thread ledgers share their writer
    with _history_caches_lock:
        cache = _history_caches.get(owner)
        if cache is None:
            cache = _history_caches[owner] = _HistoryCache()
    return cache.history(ledger.conn if conn is None else conn, job, before_run)


def gather(ledger: Ledger, run_id: int, conn: Conn | None = None) -> tuple[
        OutcomeFacts, list[OutcomeFacts], JobSpec | None, dict[str, Any]] | None:
    """Facts for judging run ``run_id`` from ``runs``, ``job_outcomes`` and ``jobs``, read
    through ``conn`` (a write transaction's connection; default ``ledger.conn``).

    Returns ``(facts, history oldest first, spec or None, runs row)``, or None when the run
    does not exist.
    """
    conn = ledger.conn if conn is None else conn
    run = runs.get(conn, run_id)
    if run is None:
        return None
    out = outcomes.get(conn, run_id) or {}
    # Only the retry policy's own retry: an operator's later retry must not change how this
    # attempt reads, or a replay (``eval --ledger``) would invent a retry_pending verdict.
    retry = runs.retry_queued(conn, run["lineage"], run["attempt"])
    prior = runs.failed_attempts_before(conn, run["lineage"], run["attempt"])
    spec, _ = _job_spec(conn, run["job"])
    facts = outcome_facts(run, out, retry_queued=retry, prior_failures=int(prior))
    if run.get("trigger") == Trigger.MANUAL_RETRY:
        facts.escalated_as = outcomes.escalated_kind_before(conn, run["lineage"], run["attempt"])
    return facts, _history(ledger, run["job"], run_id, conn), spec, run


def _consult(settings: Any, ledger: Ledger, facts: OutcomeFacts, history: list[OutcomeFacts],
             spec: JobSpec | None, rules: Verdict) -> Verdict:
    if not _needs_claude(settings, rules):
        return rules
    judge_settings = settings.judge
    from core.supervisor import claude as claude_judge  # lazy: anthropic is only needed when the judge is on

    res = claude_judge.shared(judge_settings).consult(facts, history, spec, rules)
    if res.verdict is None:
        if res.status in ("error", "budget"):
            ledger.write(lambda c: add_event(c, actor=ACTOR, kind="judge_error", run_id=facts.run_id,
                                             job=facts.job, attempt=facts.attempt, reason=res.status,
                                             detail={"error": res.error}))
        return rules
    return merge(rules, res.verdict)


def _escaped_finding(conn: Conn, run_id: int) -> str | None:
    """The reason sentence for an ``escaped_processes`` finding on the run's outcome
    (``job_outcomes.handoff_findings``), or None."""
    out = outcomes.get(conn, run_id) or {}
    for f in out.get("handoff_findings") or []:
        if isinstance(f, dict) and f.get("code") == EscalationKind.ESCAPED_PROCESSES:
            return f"run {run_id} left processes outside its process group: {f.get('message') or ''}"[:1000]
    return None


def judge_run(ledger: Ledger, run_id: int, *, settings: Any = None) -> None:
    """Judge a run in a terminal state and act on the verdict. Idempotent per run.

    Writes ``job_outcomes`` verdict, escalate, severity, verdict_kind, verdict_reason, silent,
    judged_by (inserting the outcome row when the terminal move left none); opens or counts an
    escalation of the verdict's kind; after a success auto-resolves the job's other
    recoverable escalations; appends a ``verdict`` event. A second call finds ``judged_by``
    set and does nothing. A run not (yet) terminal is ignored.
    """
    settings = _settings(settings)
    got = _judgeable(ledger, run_id, ledger.conn)
    if got is None:
        return
    facts, history, spec, run, rules = got
    if not run.get("task"):
        rules = _consult(settings, ledger, facts, history, spec, rules)
    ledger.write(lambda conn: _record_verdict(conn, run_id, run, facts, rules, spec, settings))


def _judgeable(ledger: Ledger, run_id: int, conn: Conn) -> tuple[
        OutcomeFacts, list[OutcomeFacts], JobSpec | None, dict[str, Any], Verdict] | None:
    """Facts, history, spec, runs row and the rules verdict (a sub-task's own: never pages)
    of a terminal, not yet judged run, read through ``conn``; None when there is nothing to
    judge."""
    got = gather(ledger, run_id, conn)
    if got is None:
        return None
    facts, history, spec, run = got
    if run["state"] not in {s.value for s in TERMINAL}:
        return None
    if outcomes.judged_by(conn, run_id) is not None:
        return None
    rules = evaluate(facts, history, spec)
    if run.get("task"):
        # A fan-out sub-task never pages on its own: the parent run's verdict names what is missing.
        rules = Verdict("subtask", False, None, f"sub-task {run['task']}: {rules.reason}", silent=True,
                        anomalies=list(rules.anomalies))
    return facts, history, spec, run, rules


def _needs_claude(settings: Any, rules: Verdict) -> bool:
    """Whether ``_consult`` asks the Claude judge about this rules verdict of a top-level
    run (a network call: never inside a write transaction)."""
    judge_settings = getattr(settings, "judge", None)
    return not (judge_settings is None or rules.hard or rules.silent or not judge_settings.is_enabled())


def _judge_in(ledger: Ledger, conn: Conn, run_id: int, settings: Any) -> bool:
    """Judge run ``run_id`` inside the caller's write transaction on ``conn`` (the one that
    just moved it to a terminal state) when the rules decide alone. Returns False, with
    nothing written, when the Claude judge must be consulted (``judge_run`` after the
    commit does it); True otherwise (judged, or nothing to judge)."""
    got = _judgeable(ledger, run_id, conn)
    if got is None:
        return True
    facts, _history_facts, spec, run, rules = got
    if not run.get("task") and _needs_claude(settings, rules):
        return False
    _record_verdict(conn, run_id, run, facts, rules, spec, settings)
    return True


def _record_verdict(conn: Conn, run_id: int, run: dict[str, Any], facts: OutcomeFacts, verdict: Verdict,
                    spec: JobSpec | None, settings: Any) -> None:
    """``judge_run``'s writes, inside the caller's write transaction (see ``judge_run``)."""
    sinks = _sinks(settings)
    owner = (spec.owner if spec else None) or None
    if not outcomes.exists(conn, run_id):
        outcomes.record(conn, run_id, state=run["state"], status=run["state"], reason=run["reason"],
                        exit_code=run["exit_code"], signal=run["signal"])
    if not outcomes.set_verdict(conn, run_id, verdict=verdict.to_json(), escalate=verdict.escalate,
                                severity=verdict.severity, kind=verdict.kind, reason=verdict.reason,
                                silent=verdict.silent, judged_by=verdict.judged_by):
        return  # judged concurrently: the first verdict stands
    esc_id = None
    if verdict.escalate:
        esc_id, _ = escalations.raise_escalation(
            conn, job=facts.job, kind=verdict.kind, severity=verdict.severity or "warning",
            reason=verdict.reason + (f" [claude: {verdict.annotation}]" if verdict.annotation else ""),
            run_id=run_id, owner=owner, sinks=sinks)
    escaped = None if run.get("task") else _escaped_finding(conn, run_id)
    if escaped is not None:
        # Whatever the outcome: the runner ended what the job left outside its process
        # group; the job should not leave it, so its owner hears of it (a warning).
        escalations.raise_escalation(conn, job=facts.job, kind=EscalationKind.ESCAPED_PROCESSES,
                                     severity="warning", reason=escaped, run_id=run_id, owner=owner, sinks=sinks)
    if facts.state == State.SUCCEEDED and not run.get("task"):
        keep = set(verdict.anomalies) if verdict.escalate else set()
        keep |= {EscalationKind.ESCAPED_PROCESSES} if escaped is not None else set()
        # Only failures that had ended before this run started: an overlapping run (concurrency
        # > 1) never resolves another's escalation.
        started = run.get("started_at") or run.get("spawned_at") or run.get("created_at")
        escalations.auto_resolve(conn, facts.job, sorted(RECOVERABLE_KINDS - keep), run_id=run_id,
                                 reason=f"recovered: run {run_id} succeeded ({verdict.kind})", sinks=sinks,
                                 started_at=started)
    add_event(conn, actor=ACTOR, kind="verdict", run_id=run_id, job=facts.job, attempt=facts.attempt,
              reason=verdict.kind, detail={"escalate": verdict.escalate, "severity": verdict.severity,
                                           "silent": verdict.silent, "judged_by": verdict.judged_by,
                                           "escalation_id": esc_id})


def note_late_result(ledger: Ledger, run_id: int, *, settings: Any = None) -> None:
    """Open or count a ``late_result`` escalation for a run whose result arrived after it was
    declared orphaned or abandoned (the runner has recorded the ``late_result`` event).

    Idempotent per run: a ``late_result_judged`` event marks it done. The run's terminal state
    and verdict are not changed.
    """
    settings = _settings(settings)
    run = runs.get(ledger.conn, run_id)
    if run is None:
        return
    ev = events.latest(ledger.conn, run_id, "late_result")
    detail = (ev or {}).get("detail") or {}
    facts = OutcomeFacts(run_id=run_id, job=run["job"], attempt=run["attempt"], state=run["state"],
                         status=run["state"], reason=run["reason"], exit_code=detail.get("exit_code"),
                         signal=detail.get("signal"), late_result=True)
    spec, _ = _job_spec(ledger.conn, run["job"])
    verdict = evaluate(facts, [], spec)
    sinks = _sinks(settings)

    # An operator's abandon kills the process: its death by signal is the abandon itself,
    # not news. A process that exited on its own after the abandon (it finished its work
    # after all) is still a late result a person must see.
    own_kill = run["state"] == State.ABANDONED and detail.get("signal") is not None

    def tx(conn: Conn) -> None:
        if events.exists(conn, run_id, "late_result_judged"):
            return
        if own_kill:
            add_event(conn, actor=ACTOR, kind="late_result_judged", run_id=run_id, job=run["job"],
                      attempt=run["attempt"], reason="killed by the operator's abandon",
                      detail={"escalation_id": None})
            return
        esc_id, _ = escalations.raise_escalation(conn, job=run["job"], kind="late_result",
                                                 severity=verdict.severity or "warning", reason=verdict.reason,
                                                 run_id=run_id, owner=spec.owner if spec else None, sinks=sinks)
        add_event(conn, actor=ACTOR, kind="late_result_judged", run_id=run_id, job=run["job"],
                  attempt=run["attempt"], reason="late_result", detail={"escalation_id": esc_id})

    ledger.write(tx)


# -- periodic --------------------------------------------------------------------------------

def check_runner_gap(ledger: Ledger, *, sinks: Any = (), owner: str | None = None,
                     now: float | None = None) -> str | None:
    """Open the ``runner_gap`` escalation (owned by ``owner``) when no runner is alive while
    one is expected, resolve it once a runner heartbeats again
    (``core.ledger.runners.check_gap``, in one write transaction). Returns ``"opened"``,
    ``"resolved"`` or None (no change)."""
    return ledger.write(lambda conn: runners.check_gap(conn, sinks=sinks, owner=owner, now=now, actor=ACTOR))


def periodic(ledger: Ledger, settings: Any) -> None:
    """Every heartbeat: runner-gap check, snooze expiry, owed notifications (open escalations
    a process without sinks opened), repeats of unacknowledged criticals, then outbox delivery for at most
    ``DELIVERY_BUDGET_S`` seconds (sink timeouts are cut to fit). Each step's error is logged
    and the next step still runs."""
    sinks = _sinks(settings)
    owner = getattr(settings, "runner_owner", None)
    steps = (("runner_gap", lambda: check_runner_gap(ledger, sinks=sinks, owner=owner)),
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
    """Queued runs (``runs.state = 'queued'``, top-level) of a job no spec defines any more
    (``jobs.enabled = 0`` for at least ``grace_s`` seconds, so a runner restarting with a
    moment-old folder does not trigger it) would wait forever — and a pending retry's failure
    would never be reported. Each is moved queued → abandoned (reason ``job_removed``) with its
    outcome in the same transaction, then judged: a ``job_removed`` warning escalation.
    ``now`` is Unix seconds. Returns the run ids cancelled."""
    now = time.time() if now is None else now
    rows = runs.queued_of_removed_jobs(ledger.conn, removed_before=now - grace_s)
    done: list[int] = []
    for row in rows:
        run_id = row["id"]
        if terminal.finish_run(ledger, run_id, row["attempt"], State.QUEUED, State.ABANDONED, actor=ACTOR,
                               reason="job_removed", fields={"ended_at": now}):
            done.append(run_id)
            judge_run(ledger, run_id, settings=settings)
    return done


def report(ledger: Ledger, since: float) -> dict[str, Any]:
    """Figures for ``watchkeeper report``: outcomes judged since ``since`` (Unix seconds).

    Returns ``{since, runs, silent, notes, escalated, silent_share (0..1 or None),
    by_verdict: {kind: n}, escalations: [{kind, escalations, occurrences}],
    notifications: {pending, sent, failed}}`` from ``job_outcomes``, ``escalations`` and
    ``notifications``.
    """
    counts = outcomes.judged_counts(ledger.conn, since)
    n = counts["runs"]
    return {"since": since, "runs": n, "silent": counts["silent"], "notes": counts["notes"],
            "escalated": counts["escalated"], "silent_share": (counts["silent"] / n) if n else None,
            "by_verdict": counts["by_verdict"], "escalations": escalations.counts_by_kind(ledger, since),
            "notifications": notify.summary(ledger, since)}
