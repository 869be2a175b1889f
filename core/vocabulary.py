"""Closed sets as StrEnums, and the result of an operator action.

One word per fact: these values are what the ledger stores, the CLI prints and the console
labels (through ``console.labels``). Nothing here imports anything of Watchkeeper's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum, unique


class RunState(StrEnum):
    """Where a run is in its lifecycle (``runs.state``, ``job_outcomes.state``).

    The moves between them are ``core.ledger.lifecycle.TRANSITIONS``.
    """

    QUEUED = "queued"
    SPAWNED = "spawned"
    RUNNING = "running"
    VERIFYING = "verifying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"
    TIMED_OUT = "timed_out"
    ORPHANED = "orphaned"
    ABANDONED = "abandoned"


class Trigger(StrEnum):
    """Why a run row exists (``runs.trigger``)."""

    SCHEDULE = "schedule"          # a cron / interval / once slot fell due
    MISFIRE = "misfire"            # a slot missed while no runner ran, replayed (misfire = run_once)
    MANUAL = "manual"              # ``watchkeeper trigger`` / the console
    RETRY = "retry"                # the retry policy after a failed attempt
    MANUAL_RETRY = "manual_retry"  # an operator's retry of a finished lineage
    FANOUT = "fanout"              # a sub-task of a fan-out parent
    MISSION = "mission"            # a worker spawned by a mission's coordinator
    EXEC = "exec"                  # ``watchkeeper exec``: a command run outside a runner (a wrapped cron line)


class OutcomeStatus(StrEnum):
    """What a finished run delivered (``job_outcomes.status``).

    Not a synonym of ``RunState``: the run state says where the lifecycle ended
    (``succeeded``), the status says what the work amounted to, in the handoff's own words
    (``success`` or ``partial`` for a succeeded run; docs/concepts.md, "Worker handoff", fixes the handoff contract).
    Runs that ended otherwise carry their state's word.
    """

    SUCCESS = "success"
    PARTIAL = "partial"
    FAILED = "failed"
    BLOCKED = "blocked"
    TIMED_OUT = "timed_out"
    ORPHANED = "orphaned"
    ABANDONED = "abandoned"


class RunCommand(StrEnum):
    """Which of its job's commands a run executes (``runs.worker``, a column name kept from
    schema 1): the spec's ``command``, or its ``fallback``. Not a mission worker."""

    PRIMARY = "primary"
    FALLBACK = "fallback"


class EscalationState(StrEnum):
    """``escalations.state``: open → acknowledged | snoozed → resolved (reopened on news)."""

    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    SNOOZED = "snoozed"
    RESOLVED = "resolved"


class EscalationKind(StrEnum):
    """``escalations.kind`` and ``job_outcomes.verdict_kind``: what the supervisor found.

    ``core.supervisor.rules`` sorts them into hard, soft, note and silent classes.
    """

    # hard: a person must look, Claude can never silence them
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    ORPHANED = "orphaned"
    INTERRUPTED = "interrupted"
    VERIFICATION_FAILED = "verification_failed"
    BLOCKED = "blocked"
    RETRIES_EXHAUSTED = "retries_exhausted"
    LATE_RESULT = "late_result"
    RUNNER_GAP = "runner_gap"
    JOB_REMOVED = "job_removed"
    FALSE_CLAIM = "false_claim"
    # soft: the run succeeded but departs from what it declared or usually does
    SLOW = "slow"
    TOO_FAST = "too_fast"
    OUTPUT_MISMATCH = "output_mismatch"
    LOW_CONFIDENCE = "low_confidence"
    PARTIAL = "partial"
    FLAPPING = "flapping"
    PARTIAL_CONTENT = "partial_content"
    EMPTY_FILE = "empty_file"
    ZERO_WORK = "zero_work"
    FORBIDDEN_OUTPUT = "forbidden_output"
    SMALL_FILE = "small_file"
    SHRUNKEN_FILE = "shrunken_file"
    WORK_COUNT = "work_count"
    NEW_OUTPUT_SHAPE = "new_output_shape"
    MISSING_OUTPUT = "missing_output"
    #: raised by the Claude judge alone, with a checked quote of the evidence and the intent
    #: clause it contradicts (``core.supervisor.grounding``)
    INTENT_MISMATCH = "intent_mismatch"
    # notes and silent verdicts (never an escalation on their own)
    FIRST_SUCCESS = "first_success"
    RECOVERED_ON_RETRY = "recovered_on_retry"
    ROUTINE = "routine"
    RETRY_PENDING = "retry_pending"
    ABANDONED = "abandoned"
    SUBTASK = "subtask"
    # raised outside the rules: the breaker, the spec loader, and the supervisor for a run
    # that left processes outside its process group (ended by the runner; a warning)
    CIRCUIT_OPEN = "circuit_open"
    SPEC_INVALID = "spec_invalid"
    ESCAPED_PROCESSES = "escaped_processes"
    # raised by the mission engine (job 'mission:<id>', to the mission's owner)
    MISSION_QUESTION = "mission_question"
    MISSION_WORKER_FAILED = "mission_worker_failed"
    MISSION_REPORT = "mission_report"
    MISSION_BUDGET_EXHAUSTED = "mission_budget_exhausted"
    MISSION_COORDINATOR_FAILED = "mission_coordinator_failed"
    # raised by any surviving runner's periodic pass (``core.ledger.hosts``): every runner of
    # a host stopped heartbeating (job ``(host <name>)``), or a pinned job has no live host
    HOST_DOWN = "host_down"


class BreakerState(StrEnum):
    """``jobs.breaker_state``: closed (runs), open (cooling down, slots skipped), half_open
    (one trial run decides)."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class NotificationState(StrEnum):
    """``notifications.state``: pending until sent, or failed for good after its retries;
    ``cancelled``: a ``repeated`` row dropped at delivery because its escalation was no longer
    open and unacknowledged (``last_error`` says why)."""

    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"
    CANCELLED = "cancelled"


class NotificationEvent(StrEnum):
    """``notifications.event``: which change of an escalation a notification tells of."""

    OPENED = "opened"
    REOPENED = "reopened"
    RECOVERED = "recovered"
    REPEATED = "repeated"
    #: ``watchkeeper notify test``: sent straight to a sink, never stored in the outbox.
    TEST = "test"


class RunnerLiveness(StrEnum):
    """How a runner is judged from ``runners`` (``core.liveness.runner_liveness``): alive
    (fresh heartbeat), stalled (its process alive on this host, heartbeat stale), gone."""

    ALIVE = "alive"
    STALLED = "stalled"
    GONE = "gone"


class SweepAction(StrEnum):
    """What the orphan sweep does with one live run (``core.sweep.sweep.assess``)."""

    SKIP = "skip"          # its owner runner is alive, or it is the sweeping runner's own
    STALLED = "stalled"    # its owner's process is alive but not heartbeating: left alone
    PENDING = "pending"    # its owner is gone but the lease has not expired yet
    ORPHAN = "orphan"      # nothing runs it: declare it orphaned
    KILL = "kill"          # its process is still alive: kill the group, then orphan it


class Severity(StrEnum):
    """How loudly an escalation speaks (``escalations.severity``)."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@unique
class AuditEvent(StrEnum):
    """Every kind of the audit trail (``events.kind``): one closed set, written by the ledger in
    the same transaction as the change it records. Who wrote it is ``events.actor``; a move
    has ``from_state``/``to_state``; ``reason`` is a sentence for people, never parsed.
    """

    # a run's life (``core.ledger.runs``, ``lifecycle``, ``queue``, ``retries``, ``terminal``)
    #: a run row was created ``queued`` (by a slot, a trigger, a fan-out, a mission)
    RUN_QUEUED = "run_queued"
    #: the run moved between states (``core.ledger.lifecycle.TRANSITIONS``)
    TRANSITION = "transition"
    #: the retry policy queued the next attempt of a lineage
    RETRY_SCHEDULED = "retry_scheduled"
    #: an operator queued a new attempt of a finished lineage
    MANUAL_RETRY = "manual_retry"
    #: the retry policy decided on a finished attempt (retry, or why not)
    RETRY_DECISION = "retry_decision"
    #: a result came back after its run was declared orphaned or abandoned; the state stays
    LATE_RESULT = "late_result"
    #: the supervisor judged a late result (marks it judged once)
    LATE_RESULT_JUDGED = "late_result_judged"
    #: the supervisor's verdict on a finished run
    VERDICT = "verdict"
    #: an operator asked another host's runner to kill a run's processes
    KILL_REQUESTED = "kill_requested"
    #: the processes of an abandoned run were killed (confirmed once)
    ABANDON_KILL = "abandon_kill"
    #: a starting runner took over a run that outlived its runner
    REATTACHED = "reattached"
    # slots that did not run (``core.runner.scheduler``, ``core.ledger.queue``, ``breaker``)
    #: a slot fell due while a newer one was already due: only the newest runs
    SKIPPED_LATE = "skipped_late"
    #: a slot fell due while the job's concurrency was used up
    SKIPPED_OVERLAP = "skipped_overlap"
    #: a slot fell due while the job's breaker was open
    SKIPPED_BREAKER_OPEN = "skipped_breaker_open"
    #: slots missed while no runner ran, not replayed (``misfire = "skip"``)
    MISFIRE_SKIPPED = "misfire_skipped"
    #: a scheduled slot fell due while the job was paused and was not run
    SLOT_SKIPPED_PAUSED = "slot_skipped_paused"
    # a job as a whole (``core.ledger.jobs``, ``adoption``, ``breaker``)
    #: a job's spec was loaded for the first time
    SPEC_LOADED = "spec_loaded"
    #: a job's spec changed
    SPEC_CHANGED = "spec_changed"
    #: a job left every spec file
    SPEC_REMOVED = "spec_removed"
    #: a spec file did not load (file, line, field in ``detail``)
    SPEC_ERROR = "spec_error"
    #: an operator paused the job: its scheduled slots are skipped until resumed
    JOB_PAUSED = "job_paused"
    #: an operator resumed a paused job
    JOB_RESUMED = "job_resumed"
    #: the job's breaker opened, half-opened (one trial run) or closed
    BREAKER_OPEN = "breaker_open"
    BREAKER_HALF_OPEN = "breaker_half_open"
    BREAKER_CLOSED = "breaker_closed"
    # escalations (``core.ledger.escalations``, ``core.actions``)
    ESCALATION_OPENED = "escalation_opened"
    #: a new occurrence of an open escalation (its counter went up)
    ESCALATION_UPDATED = "escalation_updated"
    ESCALATION_ACKNOWLEDGED = "escalation_acknowledged"
    ESCALATION_SNOOZED = "escalation_snoozed"
    ESCALATION_RESOLVED = "escalation_resolved"
    #: a snooze ran out while the job had not recovered
    ESCALATION_REOPENED = "escalation_reopened"
    # the Claude judge on one run (``core.supervisor.supervisor``)
    #: the model was to be consulted and could not be (API error, timeout, budget spent)
    JUDGE_ERROR = "judge_error"
    #: the model escalated without a quote found in the run's evidence: nothing paged
    JUDGE_REJECTED = "judge_rejected"
    # runners and the sweep (``core.ledger.runners``, ``core.sweep``, ``retention``)
    RUNNER_STARTED = "runner_started"
    RUNNER_STOPPED = "runner_stopped"
    #: a runner gap was recorded (the escalation carries the news)
    RUNNER_GAP_RECORDED = "runner_gap_recorded"
    #: the sweep saw the machine had been paused (suspend, SIGSTOP) and declared nothing dead
    SWEEP_PAUSED = "sweep_paused"
    #: runs past retention were deleted
    RUNS_PRUNED = "runs_pruned"
    # missions (``core.ledger.missions``, ``core.mission``)
    MISSION_STARTED = "mission_started"
    MISSION_TRANSITION = "mission_transition"
    MISSION_TURN = "mission_turn"
    MISSION_QUESTION = "mission_question"
    MISSION_ANSWER = "mission_answer"
    MISSION_REPORT = "mission_report"
    MISSION_COORDINATOR_ERROR = "mission_coordinator_error"
    MISSION_WORKER_SPAWNED = "mission_worker_spawned"
    MISSION_WORKER_DELIVERED = "mission_worker_delivered"
    MISSION_WORKER_FAILED = "mission_worker_failed"
    MISSION_WORKER_ABANDONED = "mission_worker_abandoned"


class EndReason(StrEnum):
    """Why a run ended: the closed code in ``runs.reason_code``, written with every move into
    a terminal state (``core.ledger.terminal.finish``). ``runs.reason`` keeps a sentence for
    people beside it ("timed out after 3s; SIGTERM ignored, killed 2s later"); code decides on
    this code only and never reads the sentence back.
    """

    # succeeded
    COMPLETED = "completed"
    """Exited 0 and passed verification."""
    PARTIAL = "partial"
    """Succeeded, but its handoff said ``partial``."""
    # failed / blocked
    EXIT_CODE = "exit_code"
    """Exited non-zero."""
    SIGNAL = "signal"
    """Killed by a signal it did not ask for."""
    VERIFICATION_FAILED = "verification_failed"
    """Exited 0, but a check (files, artifacts, ``verify`` commands) failed."""
    BLOCKED = "blocked"
    """Its handoff named blockers."""
    SPAWN_FAILED = "spawn_failed"
    """Its process could not be started (no such command, no such user, ...)."""
    SUPERVISOR_ERROR = "supervisor_error"
    """The supervisor broke while settling it: decided by its exit code alone."""
    # timed out
    TIMEOUT = "timeout"
    """Ran past its ``timeout`` and was stopped."""
    BUDGET_EXCEEDED = "budget_exceeded"
    """Ran past its ``budget.wall`` and was stopped."""
    FANOUT_UNSETTLED = "fanout_unsettled"
    """A fan-out parent whose sub-tasks did not all end within its timeout."""
    # abandoned
    OPERATOR = "operator"
    """A person abandoned it (``watchkeeper abandon``, the console, a mission abort)."""
    JOB_REMOVED = "job_removed"
    """Still queued when its job left every spec (or, a fan-out sub-task, its task left its
    job's spec)."""
    PARENT_ENDED = "parent_ended"
    """A fan-out sub-task still queued when its parent ended."""
    # orphaned (the sweep, or a starting runner)
    LEASE_EXPIRED = "lease_expired"
    """Its runner is gone and the lease ran out; the process was already dead."""
    START_TIMEOUT = "start_timeout"
    """It stayed ``spawned`` past ``start_timeout``."""
    RUNNER_GONE = "runner_gone"
    """Its runner vanished (crash, kill -9) while the process still ran: the group was killed."""
    RUNNER_ERROR = "runner_error"
    """Its task died of an error inside a live runner."""
    MONITOR_GONE = "monitor_gone"
    """Its monitor was killed while the job ran, and the job's exit status could not be collected."""
    INTERRUPTED = "interrupted"
    """Its runner stopped cleanly (SIGINT/SIGTERM) and left it behind: a warning at most."""


#: Rank for comparisons: None < info < warning < critical.
SEVERITY_RANK: dict[str | None, int] = {None: 0, "info": 1, "warning": 2, "critical": 3}


def max_severity(a: str | None, b: str | None) -> str | None:
    """The higher of two severities (None < info < warning < critical)."""
    return a if SEVERITY_RANK.get(a, 0) >= SEVERITY_RANK.get(b, 0) else b


def sql_set(values: object) -> str:
    """A closed set rendered as an SQL list literal, e.g. ``('failed', 'timed_out')``, sorted
    so the text is stable. Only for enum values (never for user text)."""
    vals = sorted(str(getattr(v, "value", v)) for v in values)  # type: ignore[attr-defined]
    for v in vals:
        if "'" in v:
            raise ValueError(f"not a closed-set value: {v!r}")
    return "(" + ", ".join(f"'{v}'" for v in vals) + ")"


@dataclass(frozen=True)
class ActionResult:
    """What an operator action did.

    ``ok`` is False when the action lost a race or was refused; ``message`` is one line for
    the operator, e.g. "already acknowledged by ana at 04:12 UTC"; ``missing`` is True when
    the target (escalation or run id) does not exist at all (the CLI exits 2 then, not 1).
    """

    ok: bool
    message: str
    target_id: int | None = None
    missing: bool = False


class MissionState(StrEnum):
    """Where a mission is (``missions.state``).

    ``planning``: the coordinator has news to read (a new goal, results, an answer);
    ``working``: it waits, without tokens, for workers or a person; ``waiting_person``: an
    ``ask_person`` question is open; ``awaiting_approval``: a report is in and the coordinator
    asked to close (or its budget ran out); ``closed``: a person approved the report;
    ``aborted``: a person aborted it (live workers killed, every artifact kept).
    """

    PLANNING = "planning"
    WORKING = "working"
    WAITING_PERSON = "waiting_person"
    AWAITING_APPROVAL = "awaiting_approval"
    CLOSED = "closed"
    ABORTED = "aborted"


#: Mission states nothing moves out of.
MISSION_ENDED: frozenset[MissionState] = frozenset({MissionState.CLOSED, MissionState.ABORTED})


class WorkerState(StrEnum):
    """One spawned worker of a mission (``mission_workers.state``).

    ``running`` covers queued, live and retrying attempts of its run lineage; ``delivered``
    means the mission engine verified its delivery; ``failed`` that its last attempt
    failed or its claim did not verify; ``abandoned`` that a person (or an abort) gave it up.
    """

    RUNNING = "running"
    DELIVERED = "delivered"
    FAILED = "failed"
    ABANDONED = "abandoned"


class CoordinatorKind(StrEnum):
    """Who plans a mission: Claude through tool use, a program speaking the same tool
    protocol, or an external agent over MCP (``watchkeeper mcp``)."""

    CLAUDE = "claude"
    SCRIPTED = "scripted"
    EXTERNAL = "external"


class AgentTool(StrEnum):
    """The tools an agent worker may be given (none by default)."""

    READ_FILE = "read_file"
    WRITE_FILE = "write_file"
    RUN_COMMAND = "run_command"
