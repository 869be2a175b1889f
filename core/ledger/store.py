"""The store protocol: the one face of the ledger that the code above ``core.ledger`` uses.

Shaped after APScheduler 4's ``DataStore``: a few coarse operations named for the domain,
each its own transaction (a write is atomic, compare-and-set where it moves something, with
its audit event inside), passing typed records (``core.ledger.records``), never rows or a
driver connection. Policy — whether to retry, what a verdict is, who hears of it, the words
shown to people — is decided above the store and handed to it as data; the store only keeps
what it is told, atomically.

``core.ledger.sql_store.SqlStore`` implements it over the ledger's SQL, the same statements
on SQLite and (through the connection's dialect) PostgreSQL. Every time is Unix epoch
seconds (UTC) as a float; ``now`` parameters default to the current time.

Errors every operation may raise: ``core.ledger.connection.StorageError`` (the store failed:
disk full, damaged, unreachable; locks are waited out, never raised, unless ``max_wait_s``
is given).

A store that may end a failed attempt (``finish_run``, ``settle_run``) is made with the retry
policy (a ``RetryRule``); one made without it refuses a move into a failed state with
``ValueError`` (operator actions only ever abandon).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from core.ledger.mission_tx import MissionTx
from core.ledger.page_records import (
    EscalationDetail,
    InvalidSpec,
    JobControls,
    JobHistory,
    JobRow,
    ListedRun,
    LiveRunRow,
    OutcomeRow,
    RunDetail,
    RunEvidence,
    SpecErrorEvent,
)
from core.ledger.reads import HISTORY_RUNS, PAGE, Filter, Page
from core.ledger.records import (
    BreakerFailure,
    Escalation,
    EscalationMove,
    Event,
    FinishedRun,
    HistoryOutcome,
    Job,
    JudgingCase,
    LineageRetry,
    Mission,
    MissionCall,
    MissionTurn,
    Notification,
    Outcome,
    PauseChange,
    QueuedRun,
    RaiseEscalation,
    Run,
    Runner,
    VerdictWrite,
    Worker,
    WorkerAttempt,
)
from core.ledger.runners import PastGap
from core.spec.model import JobSpec
from core.vocabulary import AuditEvent, EndReason

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """What the retry policy decided about one failed attempt."""

    #: Queue another attempt of the lineage.
    retry: bool
    #: ``primary`` or ``fallback``: which worker the next attempt runs.
    worker: str
    #: The policy rule that decided (recorded in the ``retry_decision`` event).
    rule: str
    #: Backoff before the next attempt is due, seconds.
    delay_s: float = 0.0


class RetryRule(Protocol):
    """The retry policy the store applies inside the transaction of a failed attempt's
    terminal move (``core.supervisor.policy.retry.RetryPolicy``): decided above the store,
    applied by it, so the decision and the next attempt commit with the move."""

    def decide(self, spec: JobSpec, run: Run, state: str, handoff_error: str | None,
               fallback_failures: int) -> RetryDecision:
        """The decision for ``run`` (as it reads after the move) ending in ``state``;
        ``fallback_failures``: how many of the job's fallback runs failed within its breaker
        window (0 when the spec has no fallback)."""
        ...


class BreakerWording(Protocol):
    """The sentences a breaker records (``core.supervisor.policy.breaker.BreakerWords``):
    decided above the store, written by ``core.ledger.breaker`` with the state change."""

    def held_back(self, spec: JobSpec, trigger: str | None, cooldown: float, *, another: bool = False) -> str:
        """What an open breaker holds back (``trigger``: the failing run's)."""
        ...

    def opened(self, failures: list[BreakerFailure], n: int, window: float, held: str) -> str:
        """The reason of the ``circuit_open`` escalation when ``n`` failures open it."""
        ...

    def trial_failed(self, trial: BreakerFailure | None, run_id: int, first: list[BreakerFailure],
                     held: str) -> str:
        """The reason when the half-open trial ``run_id`` failed (``first``: what opened it)."""
        ...


#: The verdicts a caller worked out, outside any write transaction, for a terminal move it is
#: about to make (``Store.settle_run``), keyed by whether the retry policy queues the next
#: attempt in that move — the one fact of the judging case the move itself decides. A missing
#: key records no verdict with the move (the caller judges after the commit, e.g. to consult
#: Claude).
MoveVerdicts = Mapping[bool, VerdictWrite]


class Store(Protocol):
    """The ledger's operations (see the module docstring)."""

    # -- runs ------------------------------------------------------------------------------
    def run(self, run_id: int) -> Run | None:
        """The run ``run_id``, or None when there is no such run (table ``runs``)."""
        ...

    def run_state(self, run_id: int) -> str | None:
        """Only the state of run ``run_id`` (cheaper than ``run``), None for no such run."""
        ...

    def runs_in_states(self, states: Collection[str], *, limit: int = 100_000) -> list[Run]:
        """Runs whose state is one of ``states``, oldest id first, at most ``limit``."""
        ...

    def queued_runs_of_removed_jobs(self, *, removed_before: float, limit: int = 100) -> list[Run]:
        """``queued`` runs (top-level and fan-out sub-tasks) of jobs no spec defines any more (``jobs.enabled = 0``)
        since at least ``removed_before``, oldest first, at most ``limit``."""
        ...

    def live_runs_and_owners(self) -> list[tuple[Run, Runner | None]]:
        """Every live run (spawned, running, verifying), oldest id first, each with the
        runner that owns it (None when unrecorded or gone from ``runners``): what the sweep
        and ``doctor`` judge."""
        ...

    def stranded_parent_runs(self, *, limit: int = 1000) -> list[int]:
        """Ids of terminal fan-out parents that still have ``queued`` sub-tasks (left by a
        path that did not settle them)."""
        ...

    def abandon_queued_subtasks(self, parent_id: int, *, actor: str,
                                max_wait_s: float | None = None) -> list[int]:
        """Abandon (reason ``parent_ended``, each with its outcome) the ``queued`` sub-tasks of
        terminal parent ``parent_id``. Returns their ids; none while the parent is not terminal."""
        ...

    def queue_manual_run(self, job: str, *, actor: str) -> int:
        """Queue attempt 1 of a manual run of ``job`` due now (slot ``manual:<id>``, event
        ``run_queued``). Returns the new run id.

        Raises:
            core.ledger.runs.UnknownJob: no such job, or it was removed (``removed`` says which).
        """
        ...

    def retry_lineage(self, run_id: int, *, actor: str, reason: str, now: float | None = None) -> LineageRetry:
        """An operator's retry: queue attempt ``latest + 1`` of ``run_id``'s lineage (same job,
        slot and task, ``trigger = 'manual_retry'``, due ``now``, event ``manual_retry`` with
        ``reason``) — only when the lineage's latest attempt is terminal (compare-and-set on it
        in one transaction). ``LineageRetry`` says what was found and whether it was queued."""
        ...

    def request_kill(self, run_id: int, *, actor: str) -> bool:
        """Ask the runner owning ``run_id`` on another host to kill its processes (an operator
        abandoned it there): ``runs.abandon_requested_at``/``_by`` and a ``kill_requested``
        event. False when there is no such run."""
        ...

    def kill_requests(self, run_ids: list[int]) -> list[Run]:
        """Of ``run_ids`` (a runner's own), the runs asked to be killed and not yet confirmed."""
        ...

    def confirm_kill(self, run_id: int, *, actor: str, note: str) -> bool:
        """The owner killed (or found gone) what was asked: clears the request once and
        appends an ``abandon_kill`` event saying ``note``. True when this call confirmed it."""
        ...

    def live_subtasks(self, parent_id: int) -> list[int]:
        """Ids of the spawned, running or verifying sub-task runs of fan-out parent ``parent_id``."""
        ...

    def move_run(self, run_id: int, attempt: int, from_state: str, to_state: str, *, actor: str,
                 reason: str | None = None, fields: Mapping[str, Any] | None = None,
                 detail: dict[str, Any] | None = None) -> bool:
        """Move a run compare-and-set on (state, attempt), with its ``transition`` event.

        ``fields``: ``runs`` columns set with the move (``core.ledger.lifecycle.SETTABLE``).
        Returns True when the move won, False when the run was not in ``from_state`` at
        ``attempt`` (nothing written).

        Raises:
            core.ledger.lifecycle.IllegalTransition: the move is not in the transition table.
            ValueError: ``fields`` names a column a move may not set.
        """
        ...

    def finish_run(self, run_id: int, attempt: int, from_state: str, to_state: str, *, actor: str,
                   reason_code: EndReason, reason: str | None = None, fields: Mapping[str, Any] | None = None,
                   detail: dict[str, Any] | None = None, outcome: Mapping[str, Any] | None = None,
                   spec: JobSpec | None = None, handoff_error: str | None = None,
                   max_wait_s: float | None = None) -> bool:
        """End a run: the move into terminal ``to_state`` (compare-and-set, with its event),
        its outcome record (``outcome``: ``job_outcomes`` columns), the abandonment of a
        fan-out parent's queued sub-tasks, and for a failed attempt the retry decision and
        maybe the next attempt — one transaction (``core.ledger.terminal``). ``reason_code``:
        why it ended (``runs.reason_code``); ``reason``: the sentence for people.

        Returns whether the move won. With ``max_wait_s`` (seconds) a ledger locked that
        long raises ``StorageError`` instead of waiting on.

        Raises:
            ValueError: ``to_state`` is not terminal, or ``outcome`` names an unknown column.
            core.ledger.lifecycle.IllegalTransition: the move is not in the transition table.
        """
        ...

    def settle_run(self, run_id: int, attempt: int, from_state: str, to_state: str, *, actor: str,
                   verdicts: MoveVerdicts, at: float, reason_code: EndReason, reason: str | None = None,
                   detail: dict[str, Any] | None = None, outcome: Mapping[str, Any] | None = None,
                   spec: JobSpec | None = None, handoff_error: str | None = None) -> bool | None:
        """``finish_run`` at ``at`` (Unix seconds, UTC: the run's ``ended_at``) and, in the same
        transaction, the one of ``verdicts`` that matches whether the move queued a retry
        (``record_verdict``'s writes). Nothing is judged here: the verdicts were worked out
        before, outside any write transaction. A verdict that fails to write is undone alone;
        the move still commits. When the move loses the compare-and-set, the verdicts are
        discarded.

        Returns None when the move lost (nothing written), True when the verdict was
        recorded with it (or the run was judged already), False when none was (the caller
        judges after the commit).
        """
        ...

    # -- jobs ------------------------------------------------------------------------------
    def set_job_paused(self, job: str, *, paused: bool, actor: str, reason: str | None = None,
                       now: float | None = None) -> PauseChange:
        """Pause or resume enabled ``job`` (``jobs.paused_at/paused_by/pause_reason``)
        compare-and-set on its pause state, with a ``job_paused`` / ``job_resumed`` event.
        Nothing is written when no enabled job has that name or it is in the asked state
        already; ``PauseChange`` says which."""
        ...

    # -- escalations -------------------------------------------------------------------------
    def move_escalation(self, esc_id: int, *, allowed_from: Sequence[str], to_state: str,
                        fields: Mapping[str, Any], event: AuditEvent, actor: str, detail: dict[str, Any] | None = None,
                        now: float) -> EscalationMove:
        """An operator's move of escalation ``esc_id`` (acknowledge, snooze, resolve): into
        ``to_state`` with ``fields`` set (``acked_by``/``acked_at``, ...), compare-and-set on
        the state read and only from ``allowed_from``, with its ``event`` audit row by
        ``actor`` (``detail`` added to it). ``EscalationMove`` says what it found and whether
        it moved; of two operators acting at once exactly one moves it."""
        ...

    # -- judging ---------------------------------------------------------------------------
    def outcome(self, run_id: int) -> Outcome | None:
        """The outcome of run ``run_id`` (table ``job_outcomes``), None when it has none yet."""
        ...

    def job(self, name: str) -> Job | None:
        """The job ``name`` (table ``jobs``, enabled or removed), None when unknown."""
        ...

    def judging_case(self, run_id: int) -> JudgingCase | None:
        """Everything about run ``run_id`` the supervisor needs to settle or judge it — run,
        outcome, job, whether a retry is queued, earlier failed attempts, the kind an earlier
        attempt escalated as — in one read snapshot. None when there is no such run."""
        ...

    def history_keys(self, job: str, *, before_run: int, limit: int) -> list[tuple[int, float, bool]]:
        """The last ``limit`` judged top-level outcomes of ``job`` before run ``before_run``,
        oldest first, each as ``HistoryOutcome.key`` only (for a caller that keeps decoded
        outcomes: it reads only those it lacks with ``history_outcomes``)."""
        ...

    def history_outcomes(self, run_ids: Sequence[int]) -> list[HistoryOutcome]:
        """The history outcomes ``run_ids`` (as ``history_keys`` names them), ascending run
        id; an id without an outcome is left out."""
        ...

    def record_verdict(self, run_id: int, verdict: VerdictWrite) -> bool:
        """Record the verdict of terminal run ``run_id``: its outcome's verdict columns (the
        outcome row is created from the run when missing), the escalations it raises (each
        with its outbox rows), the recoverable escalations a success resolves, and the
        ``verdict`` event. Compare-and-set on "not judged yet": returns False, with nothing
        written, when the run was judged already (the first verdict stands)."""
        ...

    def judge_late_result(self, run_id: int, *, escalation: RaiseEscalation | None, reason: str,
                          owner: str | None, sinks: Sequence[Any] = ()) -> bool:
        """Mark the late result of run ``run_id`` judged (a ``late_result_judged`` event with
        ``reason``), raising ``escalation`` (with its outbox rows) when given. Idempotent:
        returns False, with nothing written, when it was judged already."""
        ...

    def latest_event(self, run_id: int, kind: str | None = None) -> Event | None:
        """The newest audit event of run ``run_id`` (of ``kind`` when given), or None."""
        ...

    def record_event(self, *, actor: str, kind: AuditEvent, run_id: int | None = None, job: str | None = None,
                     attempt: int | None = None, reason: str | None = None,
                     detail: dict[str, Any] | None = None, max_wait_s: float | None = None) -> int:
        """Append one audit event that goes with no state change (``judge_error``,
        ``sweep_paused``, ...). Returns its id."""
        ...

    def judged_counts(self, since: float) -> dict[str, Any]:
        """Outcomes judged since ``since`` (by ``created_at``): ``{runs, silent, escalated,
        notes, by_verdict: {verdict_kind: n}}``."""
        ...

    # -- outbox ------------------------------------------------------------------------------
    def due_notifications(self, now: float, *, limit: int) -> list[Notification]:
        """``pending`` notifications due by ``now`` (``next_attempt_at``), oldest first."""
        ...

    def fresh_notifications(self, sink: str, *, exclude: Sequence[int], limit: int) -> list[Notification]:
        """``pending`` notifications of ``sink`` never tried yet, besides ``exclude``: the rest
        of a burst still inside the sink's group_wait, sent in the same message."""
        ...

    def claim_notifications(self, rows: Sequence[Notification], *, until: float) -> tuple[list[int], list[int]]:
        """In one transaction: cancel the ``repeated`` rows whose escalation is no longer open,
        then claim the rest for one delivery (``next_attempt_at = until``, compare-and-set on
        the value read, so of two processes exactly one sends a row). Returns (ids cancelled,
        ids claimed)."""
        ...

    def mark_notifications_sent(self, ids: Sequence[int], *, at: float) -> None:
        """``pending`` → ``sent`` for ``ids`` (one more attempt, ``sent_at = at``)."""
        ...

    def mark_notification_failed(self, ids: Sequence[int], *, error: str, next_at: float | None) -> None:
        """One failed try: ``attempts + 1`` and ``last_error``; due again at ``next_at``, or
        ``failed`` for good when it is None."""
        ...

    def enqueue_repeats(self, sinks: Sequence[Any], *, now: float | None = None) -> int:
        """Queue a ``repeated`` notification of each open critical escalation nobody
        acknowledged, per sink ``repeat`` interval. Returns how many were queued."""
        ...

    def enqueue_owed(self, sinks: Sequence[Any], *, now: float | None = None) -> int:
        """Queue the opening notice of open escalations no sink was told about yet (opened
        by a process without sinks). Returns how many were queued."""
        ...

    def notification_counts(self, since: float) -> dict[str, int]:
        """Notifications created since ``since`` by state: ``{pending, sent, failed}``."""
        ...

    # -- runners ---------------------------------------------------------------------------
    def past_runner_gap(self, *, runner_id: str, started_at: float) -> PastGap | None:
        """The gap a runner starting at ``started_at`` finds behind it: the most recent other
        runner vanished without a clean stop and none is alive. None otherwise."""
        ...

    def last_scheduled_slots(self) -> dict[str, float]:
        """``{job: newest not_before}`` of every job's attempt-1 scheduled (or misfire) runs:
        which slots were queued already."""
        ...

    def record_runner_gap(self, gap: PastGap, *, runner_id: str, slots: list[dict[str, Any]],
                          sinks: Sequence[Any] = (), owner: str | None = None) -> int:
        """Open (or update the open) ``runner_gap`` escalation for ``gap``, found after the
        fact by runner ``runner_id``, with its outbox rows and a ``runner_gap_recorded`` event
        (``slots``: what fell in the gap, ``core.sweep.watch.slots_in_gap``). Returns its id."""
        ...

    def expire_snoozes(self, *, sinks: Sequence[Any] = (), now: float | None = None) -> list[int]:
        """Reopen snoozed escalations whose ``snoozed_until`` has passed, with ``reopened``
        outbox rows. Returns the reopened ids."""
        ...

    # -- runner gap (live) ---------------------------------------------------------------------------
    def check_runner_gap(self, *, sinks: Sequence[Any] = (), owner: str | None = None,
                         now: float | None = None, actor: str = "supervisor") -> str | None:
        """Open the ``runner_gap`` escalation (with its outbox rows; owned by the gone
        runner's owner, else ``owner``) when no runner is alive while one is expected, or
        resolve it once one heartbeats again. Returns ``"opened"``, ``"resolved"`` or None."""
        ...

    def check_hosts(self, *, sinks: Sequence[Any] = (), owner: str | None = None,
                    now: float | None = None, actor: str = "supervisor") -> dict[str, list[str]]:
        """Open ``host_down`` (with its outbox rows) for each host whose runners all stopped
        heartbeating while another host's runner is alive, and for each job pinned only to
        down hosts; resolve them once a runner there heartbeats again
        (``core.ledger.hosts``). Returns ``{"opened": [job], "resolved": [job]}``."""
        ...

    # -- the runner ------------------------------------------------------------------------
    def register_runner(self, *, runner_id: str, hostname: str, boot_id: str | None, pid: int,
                        pid_create_time: float | None, labels: Sequence[str], heartbeat_s: float, lease_s: float,
                        version: str, spec_dir: str, actor: str, owner: str | None = None) -> None:
        """Record a starting runner (``runners`` row: host, boot id, pid and its create time,
        heartbeat and lease seconds) with a ``runner_started`` event."""
        ...

    def renew_leases(self, runner_id: str, run_ids: Sequence[int], *, lease_s: float) -> int:
        """One heartbeat of runner ``runner_id``: ``runners.heartbeat_at`` = now and a lease of
        ``lease_s`` seconds for each of ``run_ids`` still live and its own, in one small
        transaction. Returns how many leases were renewed."""
        ...

    def queue_slot(self, spec: JobSpec, slot: str, not_before: float, trigger: str, *, actor: str,
                   now: float | None = None) -> int | None:
        """Queue attempt 1 of ``spec``'s scheduled slot ``slot`` (due at ``not_before``) with its
        ``run_queued`` event, unless the breaker, a pause, an overlap or a newer slot holds it
        back (each recorded as its own event; ``core.ledger.queue.queue_slot``). Returns the
        new run id, None when nothing was queued (also when another runner queued the slot)."""
        ...

    def adopt_job(self, spec: JobSpec, *, source: str | None, line: int | None, actor: str) -> str:
        """Write the ``jobs`` row of ``spec`` alone (``watchkeeper exec``'s job; no other job is
        touched), enabled, with ``spec_loaded`` / ``spec_changed`` when it is new or differs.
        Returns ``"added"``, ``"changed"`` or ``"unchanged"``."""
        ...

    def start_adopted_run(self, spec: JobSpec, *, actor: str, lease_s: float, host: str | None = None,
                          boot_id: str | None = None) -> Run:
        """Attempt 1 of a new lineage of ``spec`` (trigger ``exec``) created and moved
        ``queued → spawned`` in one transaction, so no runner sharing the ledger claims it;
        leased for ``lease_s`` seconds, on host life ``host``/``boot_id`` (``runs.host``,
        ``runs.boot_id``). Returns the run as moved."""
        ...

    def claim_adopted_retry(self, run: Run, *, actor: str, lease_s: float, host: str | None = None,
                            boot_id: str | None = None) -> Run:
        """``queued → spawned`` of retry ``run`` for ``watchkeeper exec`` (compare-and-set on
        state and attempt), leased for ``lease_s`` seconds, on host life ``host``/``boot_id``.
        Returns the run as moved.

        Raises:
            LookupError: someone else moved it first (a runner, an operator).
        """
        ...

    def queued_retry(self, lineage: str, after_attempt: int) -> Run | None:
        """The ``queued`` next attempt (``after_attempt + 1``) of ``lineage`` that the retry
        policy created, or None."""
        ...

    def due_runs(self, now: float, *, limit: int) -> list[QueuedRun]:
        """Up to ``limit`` queued runs with ``not_before <= now``, oldest first, each with its
        fan-out parent's state and start (``runs``)."""
        ...

    def next_queued_at(self) -> float | None:
        """The earliest ``not_before`` of any queued run (None: nothing queued): how long the
        dispatcher may sleep."""
        ...

    def live_run_count(self, *, job: str | None = None, parent_run_id: int | None = None) -> int:
        """How many spawned, running or verifying runs count against a concurrency limit: of
        ``job``'s own runs (sub-tasks not counted), or of the sub-tasks of ``parent_run_id``.

        Raises:
            ValueError: neither or both of ``job`` and ``parent_run_id`` given.
        """
        ...

    def claim_runs(self, runs: Sequence[Run], *, runner_id: str, actor: str, now: float, lease_s: float,
                   host: str | None = None, boot_id: str | None = None) -> list[bool]:
        """Claim queued ``runs`` for ``runner_id``, all in one transaction: for each, the
        ``queued → spawned`` compare-and-set on its (state, attempt), setting ``runner_id``,
        ``spawned_at = now``, a first lease of ``lease_s`` seconds and this host (``host``,
        ``boot_id``), with its event. One bool per run, in order; False: another runner (or an
        operator) got there first, or (PostgreSQL) is claiming it right now; nothing written
        for that run. On PostgreSQL the transaction is its own, at ``READ COMMITTED``
        (``Ledger.write_alone``): runners racing for the same due runs split them instead of
        failing serialization."""
        ...

    def finished_run(self, run_id: int) -> FinishedRun | None:
        """The run and its outcome's duration, read after its end (None: no such run)."""
        ...

    def breaker_state(self, job: str) -> str:
        """``jobs.breaker_state`` of ``job`` (closed, open, half_open); closed for an unknown job."""
        ...

    def close_breaker(self, job: str, *, actor: str, reason: str, now: float) -> bool:
        """Close ``job``'s breaker by hand (``core.ledger.breaker.close``: open or half open →
        closed, with its ``breaker_closed`` event), in one transaction. True when it was
        open or half open."""
        ...

    def record_breaker(self, spec: JobSpec, run_id: int, state: str, *, actor: str, words: BreakerWording,
                       owner: str | None, sinks: Sequence[Any]) -> str | None:
        """Move ``spec``'s breaker after run ``run_id`` ended in ``state`` (``core.ledger.breaker``:
        open after too many failures, close on a trial's success), with its escalation and
        outbox rows, in one transaction. Returns the new breaker state when it changed, else None."""
        ...

    def subtask_results(self, parent_id: int, spec: JobSpec) -> tuple[bool, list[dict[str, Any]]]:
        """(every sub-task settled?, one result per task of ``spec``) for fan-out parent
        ``parent_id``. Each result is the JSON document ``synthesize`` reads
        (``core.ledger.fanout.task_results``: task, settled, state, status, attempts, run_id,
        exit_code, signal, reason, result, error, stdout_tail)."""
        ...

    def worker_input(self, mission_id: int, seq: int) -> dict[str, Any] | None:
        """The JSON document mission worker ``seq`` of ``mission_id`` is started with (its task,
        the mission's goal, earlier deliveries); None when there is no such worker."""
        ...

    def record_spec_errors(self, errors: Sequence[Any], *, actor: str) -> None:
        """A ``spec_error`` event per error of a spec load (``core.spec.loader.SpecError``:
        its sentence as the reason, ``to_dict()`` as the detail), in one transaction."""
        ...

    # -- audit -----------------------------------------------------------------------------------
    def judged_outcomes(self, since: float, *, limit: int) -> list[Outcome]:
        """Top-level judged outcomes created at or after ``since``, oldest first, at most
        ``limit`` (``job_outcomes``; what ``eval --ledger`` replays)."""
        ...

    def invariant_violations(self) -> list[Any]:
        """Every query-only invariant check of the ledger (``core.ledger.invariants.check``):
        ``Violation`` records, run-less ones (integrity) first; [] when all hold."""
        ...

    # -- missions ------------------------------------------------------------------------------
    def missions_due(self, *, limit: int = 50) -> list[int]:
        """Ids of missions that are not ended (closed, aborted), oldest first: the mission
        engine's work list (``missions``)."""
        ...

    def mission(self, mission_id: int) -> Mission | None:
        """The mission (``missions``, JSON decoded), or None when there is no such mission."""
        ...

    def missions(self, *, states: Collection[str] = (), limit: int = 100) -> list[Mission]:
        """Missions newest first, at most ``limit``; only those in ``states`` when given."""
        ...

    def mission_events(self, mission_id: int, *, limit: int = 200) -> list[Event]:
        """The mission's own audit trail (``events`` under ``job = 'mission:<id>'``), oldest
        first: the newest ``limit``."""
        ...

    def mission_workers(self, mission_id: int) -> list[Worker]:
        """The mission's workers by seq (``mission_workers``), each with ``run_state`` (its
        latest attempt's run state); [] for an unknown mission."""
        ...

    def mission_calls(self, mission_id: int, turn: int | None = None) -> list[MissionCall]:
        """The mission's tool calls (of coordinator turn ``turn``, or all), in order
        (``mission_calls``)."""
        ...

    def mission_call(self, mission_id: int, call_id: str) -> MissionCall | None:
        """One tool call by its ``call_id``, or None (``mission_calls``)."""
        ...

    def mission_turns(self, mission_id: int) -> list[MissionTurn]:
        """The coordinator's turns in order (``mission_turns``)."""
        ...

    def worker_attempt(self, lineage: str) -> WorkerAttempt | None:
        """The newest attempt (run) of a worker's lineage with its outcome's handoff and
        verification (``runs`` joined with ``job_outcomes``), in one read; None without a run."""
        ...

    def live_worker_runs(self, mission_id: int) -> list[Run]:
        """Runs of the mission's workers that are queued or live (for abort and abandon)."""
        ...

    def note_worker_attempt(self, worker_id: int, run: Run) -> None:
        """Point a running worker at its newest attempt ``run`` (a retry was queued); one
        transaction, no event (the retry has its own)."""
        ...

    def mission_write(self, fn: Callable[[MissionTx], T]) -> T:
        """Run ``fn`` in one write transaction with a ``MissionTx`` (the mission statements bound
        to it: reads see the transaction, the moves are compare-and-set with their audit
        events) and return what it returns. ``fn`` may be run again when the transaction is
        retried after a lock, so it must decide only from what it reads through the handle.
        Errors ``fn`` raises roll the transaction back and propagate."""
        ...


class PageReads(Protocol):
    """The console's and the CLI's reads: bounded pages and one-screen reads of the ledger,
    returned as the typed records of ``core.ledger.page_records`` (one per row shape), never
    rows. ``core.ledger.reads`` holds the SQL (one statement set for both backends); every
    operation is one read, never a whole table. Times are epoch seconds (UTC); ``now``
    arguments exist so callers can freeze time. ``flt`` is a parsed ``/`` filter
    (``core.ledger.reads.parse_filter``); ``after`` is a page's ``cursor`` handed back
    unchanged; ``offset`` skips rows after it.
    """

    def escalations_page(self, *, after: tuple | None = None, limit: int = PAGE, flt: Filter | None = None,
                         include_resolved: bool = True, offset: int = 0) -> Page[Escalation]:
        """Escalations (``escalations``), open first, then by severity, newest ``last_seen`` first."""
        ...

    def outcomes_page(self, *, after: tuple | None = None, limit: int = PAGE, flt: Filter | None = None,
                      offset: int = 0) -> Page[OutcomeRow]:
        """Finished runs with their verdicts (``runs`` ⋈ ``job_outcomes``), newest end first."""
        ...

    def orphans_page(self, *, now: float, after: tuple | None = None, limit: int = PAGE, flt: Filter | None = None,
                     offset: int = 0) -> Page[LiveRunRow]:
        """Live runs (at-risk first) then orphaned runs, with their runner's heartbeat
        (``runs`` ⋈ ``runners``), judged at ``now``."""
        ...

    def jobs_page(self, *, now: float, after: tuple | None = None, limit: int = PAGE, flt: Filter | None = None,
                  offset: int = 0) -> Page[JobRow]:
        """Jobs by name (``jobs``) with next run, last outcome, success rate and recent runs."""
        ...

    def count_rows(self, view: str, *, now: float, flt: Filter | None = None) -> int:
        """How many rows ``view`` ("escalations", "outcomes", "orphans", "jobs") lists under
        ``flt``. Raises ``ValueError`` for another view."""
        ...

    def run_detail(self, run_id: int, *, events_limit: int = 500) -> RunDetail | None:
        """Everything about one run (run, outcome, attempts, audit trail, output head and tail,
        escalations, sub-tasks); None when there is no such run."""
        ...

    def run_evidence(self, run_id: int, tail_chars: int = 2000) -> RunEvidence | None:
        """A run's status, verdict reason and output ends for a one-glance why; None when
        there is neither an outcome nor an output file."""
        ...

    def escalation_detail(self, esc_id: int, *, limit: int = 200) -> EscalationDetail | None:
        """One escalation with its occurrences, acts, notifications and latest run; None
        when there is no such id."""
        ...

    def job_history(self, job: str, *, now: float, limit: int = HISTORY_RUNS) -> JobHistory | None:
        """One job's head (``jobs``), next run and last finished runs; None for no such job."""
        ...

    def job_controls(self, job: str) -> JobControls | None:
        """One job's pause and breaker state (``jobs``); None for no such job."""
        ...

    def invalid_specs(self, *, limit: int = PAGE, never_loaded: bool = False) -> list[InvalidSpec]:
        """Spec files the last folder load could not take (``invalid_specs``), by file and line."""
        ...

    def listed_runs(self, *, job: str | None = None, state: str | None = None, limit: int = 50,
                    host: str | None = None) -> list[ListedRun]:
        """The newest runs by ``Run.time`` with their outcome's figures (``watchkeeper runs``)."""
        ...

    def escalations(self, state: str | Sequence[str] | None = None, limit: int = 100, *,
                    job: str | None = None) -> list[Escalation]:
        """Escalations newest activity first; ``state``: one, several, ``"active"`` or None for all."""
        ...

    def escalations_changed_since(self, after_updated: float, after_id: int, *, limit: int = 200) -> list[Escalation]:
        """Escalations changed after the keyset ``(updated_at, id)``, oldest change first (tail)."""
        ...

    def spec_errors(self, *, limit: int = 50) -> list[SpecErrorEvent]:
        """The newest ``spec_error`` events of the audit trail, newest first."""
        ...

    def host_count(self) -> int:
        """How many hosts the ledger's runners ran on (``runners``): the console shows its Host
        columns from 2."""
        ...
