"""Typed records: what the store hands to the code above it instead of rows.

One frozen dataclass per thing the product passes around — ``Run``, ``Outcome``,
``Escalation``, ``Notification``, ``Job``, ``Runner``, ``Mission``, ``Worker`` (a mission's
worker) — plus ``JudgingCase``, everything the supervisor reads to judge one run. Every field
is one column of the table named in the class docstring, with the same name and meaning;
JSON columns arrive decoded. Conventions for every record:

* timestamps (``*_at``, ``not_before``, ``lease_until``, ``first_seen`` …) are Unix epoch
  seconds, UTC, as ``float`` (None: not happened yet);
* durations are seconds (``*_s``);
* states and kinds are the ledger's own words (``core.vocabulary``), kept as ``str`` so a
  value written by a newer Watchkeeper still reads.

``from_row`` builds a record from any mapping of column names (a driver row, a dict); it is
the store implementations' job to call it — code above ``core.ledger`` never sees the row.
This module imports no database driver.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

R = TypeVar("R")


def _json(value: Any) -> Any:
    """A JSON column decoded (None and undecodable text stay as they are)."""
    if isinstance(value, str) and value:
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _build(cls: type[R], row: Mapping[str, Any], decode: frozenset[str] = frozenset()) -> R:
    """``cls`` from the columns of ``row`` that are its fields (missing ones take the default;
    ``decode`` names JSON columns)."""
    keys = row.keys()
    kw = {f.name: (_json(row[f.name]) if f.name in decode else row[f.name])
          for f in fields(cls) if f.name in keys}  # type: ignore[arg-type]
    return cls(**kw)


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One attempt of one slot of a job: a ``runs`` row."""

    id: int
    #: The job's name (``jobs.name``).
    job: str
    #: Shared by every attempt of one slot; a retry keeps it.
    lineage: str
    #: 1 for the first attempt, +1 per retry.
    attempt: int
    #: ``core.vocabulary.RunState`` value: queued, spawned, running, verifying, or terminal.
    state: str
    #: Dedup key of the slot: scheduled ISO time, ``once``, ``manual:<id>``, ``mission:<id>:<seq>``.
    slot: str = ""
    #: Fan-out sub-task name; ``""`` for an ordinary (top-level) run.
    task: str = ""
    #: ``core.vocabulary.Trigger`` value: schedule, manual, retry, misfire, fanout, exec, ...
    trigger: str = ""
    #: ``primary`` or ``fallback`` (the spec's fallback worker).
    worker: str = "primary"
    #: The fan-out parent run of a sub-task, else None.
    parent_run_id: int | None = None
    #: ``JobSpec.spec_hash()`` of the spec the run was queued under.
    spec_hash: str | None = None
    #: Not to be started before this time (epoch s, UTC): the slot time or the retry's backoff.
    not_before: float = 0.0
    created_at: float = 0.0
    spawned_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    updated_at: float = 0.0
    #: Process id of the run's process group leader (its monitor), when spawned.
    pid: int | None = None
    #: psutil create time of ``pid`` (epoch s), so a reused pid is never mistaken for it.
    pid_create_time: float | None = None
    pgid: int | None = None
    #: ``runners.id`` of the runner that owns the run while it is live.
    runner_id: str | None = None
    #: The run is presumed alive until this time (epoch s, UTC), renewed by its runner.
    lease_until: float | None = None
    exit_code: int | None = None
    #: The signal number that ended the process, None when it exited.
    signal: int | None = None
    #: Why the run ended, for people ("timed out after 3s; SIGTERM ignored, killed 2s later");
    #: never read back by code.
    reason: str | None = None
    #: Why the run ended, the closed code (``core.vocabulary.EndReason``); None while live.
    reason_code: str | None = None
    #: Folder holding the run's captured output and handoff.
    artifacts_dir: str | None = None
    #: Hostname and boot id of the host life that spawned it (None while queued, and on
    #: runs written before hosts were recorded).
    host: str | None = None
    boot_id: str | None = None
    #: An operator on another host asked the owning runner to kill it (epoch s), and who;
    #: the owner kills it and settles it as abandoned.
    abandon_requested_at: float | None = None
    abandon_requested_by: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Run:
        return _build(cls, row)

    @property
    def time(self) -> float:
        """When the run is listed (epoch s): its end, else its start, else when it was queued."""
        return self.ended_at or self.started_at or self.created_at

    @property
    def is_subtask(self) -> bool:
        """A fan-out sub-task (``task`` set): it never pages on its own."""
        return bool(self.task)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The structured record of one finished run: a ``job_outcomes`` row, JSON decoded."""

    run_id: int
    job: str
    lineage: str
    attempt: int
    #: The run's terminal state when recorded.
    state: str
    #: ``core.vocabulary.OutcomeStatus``: success, failed, partial, blocked, timed_out, ...
    status: str
    reason: str | None = None
    #: Wall time from start to end, seconds.
    duration_s: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    #: Bytes the run wrote to stdout / stderr (all of it, not just what is kept).
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    #: 1 when the captured output was cut to its head and tail.
    output_truncated: int = 0
    stdout_head: str | None = None
    stdout_tail: str | None = None
    stderr_head: str | None = None
    stderr_tail: str | None = None
    #: The handoff file verbatim (decoded with replacement, capped).
    handoff_raw: str | None = None
    #: The validated handoff (dict), None when absent or invalid.
    handoff: Any = None
    #: Findings about the handoff: list of ``{code, message}``.
    handoff_findings: Any = None
    #: The supervisor's verification: ``{ok, checks: [...]}``.
    verification: Any = None
    #: The supervisor's verdict as JSON (``core.supervisor.rules.Verdict.to_json``).
    verdict: Any = None
    #: 1 when the verdict escalated, 0 when not, None before judging.
    escalate: int | None = None
    severity: str | None = None
    verdict_kind: str | None = None
    verdict_reason: str | None = None
    silent: int | None = None
    #: Who judged: ``rules``, ``claude:<model>``; None while not judged.
    judged_by: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    JSON_COLUMNS = frozenset({"handoff", "handoff_findings", "verification", "verdict"})

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Outcome:
        return _build(cls, row, cls.JSON_COLUMNS)

    @property
    def handoff_dict(self) -> dict[str, Any] | None:
        """The validated handoff when it is a JSON object, else None."""
        return self.handoff if isinstance(self.handoff, dict) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A job as the ledger knows it: a ``jobs`` row (the spec stays JSON text; parse it with
    ``core.spec.model.spec_from_json``)."""

    name: str
    #: ``command``, ``fanout`` or ``agent``.
    kind: str = "command"
    #: The validated spec as JSON text.
    spec: str = "{}"
    spec_hash: str = ""
    #: The spec file it came from, and its line.
    source: str | None = None
    source_line: int | None = None
    #: Cron expression, ``every 30s`` or ``once``.
    schedule_text: str | None = None
    owner: str | None = None
    intent: str | None = None
    #: 0 once no spec defines the job any more (its history is kept).
    enabled: int = 1
    #: ``core.vocabulary.BreakerState``: closed, open, half_open.
    breaker_state: str = "closed"
    #: An open breaker's cooldown ends at this time (epoch s).
    breaker_until: float | None = None
    breaker_opened_at: float | None = None
    #: The last spec error for this job (the kept spec still applies).
    last_error: str | None = None
    updated_at: float = 0.0
    #: When an operator paused it (epoch s), None when not paused.
    paused_at: float | None = None
    paused_by: str | None = None
    pause_reason: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Job:
        return _build(cls, row)


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalation:
    """An item a person must look at, deduplicated per (job, kind): an ``escalations`` row."""

    id: int
    #: ``"<job>:<kind>"``: one active row per key.
    dedup_key: str
    job: str
    #: ``core.vocabulary.EscalationKind`` value.
    kind: str
    #: critical, warning or info.
    severity: str
    #: open, acknowledged, snoozed or resolved.
    state: str
    #: How many times it was raised while active.
    count: int = 1
    first_seen: float = 0.0
    last_seen: float = 0.0
    latest_run_id: int | None = None
    owner: str | None = None
    #: The sentence with the evidence, shown everywhere the escalation is.
    reason: str | None = None
    acked_by: str | None = None
    acked_at: float | None = None
    snoozed_by: str | None = None
    #: Snoozed until this time (epoch s); it reopens then if still unresolved.
    snoozed_until: float | None = None
    resolved_by: str | None = None
    resolved_at: float | None = None
    #: 1 once its opening was put in the outbox.
    notified: int = 0
    updated_at: float = 0.0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Escalation:
        return _build(cls, row)


@dataclass(frozen=True, slots=True, kw_only=True)
class Notification:
    """One message in the outbox, per escalation event and sink: a ``notifications`` row."""

    id: int
    escalation_id: int | None
    #: ``core.vocabulary.NotificationEvent``: opened, reopened, repeated, recovered.
    event: str
    #: The sink's name from the settings.
    sink: str
    #: The message as JSON (decoded): subject, text, evidence, ...
    payload: Any
    #: pending, sending, sent, failed or cancelled.
    state: str
    #: Delivery tries so far.
    attempts: int = 0
    #: Due (or, while sending, claimed until) this time, epoch s.
    next_attempt_at: float = 0.0
    last_error: str | None = None
    created_at: float = 0.0
    sent_at: float | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Notification:
        return _build(cls, row, frozenset({"payload"}))


@dataclass(frozen=True, slots=True, kw_only=True)
class Runner:
    """One runner process's life: a ``runners`` row."""

    id: str
    hostname: str
    pid: int
    #: The boot id of its host life (``core.liveness.boot_id``); None on rows written before.
    boot_id: str | None = None
    #: Its host's labels (``settings.labels``): what pinned jobs (``host = …``) may name.
    labels: list[str] | None = None
    pid_create_time: float | None = None
    started_at: float = 0.0
    #: Its last heartbeat (epoch s).
    heartbeat_at: float = 0.0
    #: Seconds between heartbeats, and how long a run's lease lasts without one.
    heartbeat_s: float = 0.0
    lease_s: float = 0.0
    #: Set by a clean stop (epoch s), with why; None while running or after a crash.
    stopped_at: float | None = None
    stop_reason: str | None = None
    version: str | None = None
    #: ``settings.runner_owner``: who hears of this runner's gap.
    owner: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Runner:
        return _build(cls, row, frozenset({"labels"}))


@dataclass(frozen=True, slots=True, kw_only=True)
class Mission:
    """A goal worked by a coordinator and its workers: a ``missions`` row (JSON decoded)."""

    id: int
    #: Mission definition name (``adhoc`` without one).
    name: str
    goal: str
    #: claude, scripted or external.
    coordinator: str
    #: A scripted coordinator's argv (list), and the folder it runs in.
    command: Any = None
    cwd: str | None = None
    model: str | None = None
    system: str | None = None
    #: Names of the worker jobs it may spawn (list).
    workers: Any = field(default_factory=list)
    owner: str | None = None
    #: planning, working, waiting_person, awaiting_approval, closed or aborted.
    state: str = "planning"
    #: ``{turns, workers, tokens, cost}`` limits.
    budget: Any = field(default_factory=dict)
    turns: int = 0
    tokens: int = 0
    #: Spent so far, US dollars.
    cost: float = 0.0
    report: str | None = None
    report_status: str | None = None
    close_requested: int = 0
    #: The open ``ask_person`` question.
    question: str | None = None
    reason: str | None = None
    decided_by: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    ended_at: float | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Mission:
        return _build(cls, row, frozenset({"command", "workers", "budget"}))


@dataclass(frozen=True, slots=True, kw_only=True)
class Worker:
    """One task a mission gave one worker job: a ``mission_workers`` row (JSON decoded)."""

    id: int
    mission_id: int
    #: 1, 2, ... within the mission.
    seq: int
    #: The worker's job name.
    worker: str
    task: str
    #: JSON given by the coordinator.
    context: Any = None
    #: The ``spawn_worker`` tool call it answers.
    call_id: str | None = None
    #: running, delivered, failed or abandoned.
    state: str = "running"
    #: ``runs.lineage`` of its attempts, and its latest attempt's run.
    lineage: str = ""
    run_id: int | None = None
    attempts: int = 0
    status: str | None = None
    #: The handoff's confidence, 0..1.
    confidence: float | None = None
    steps_used: int | None = None
    tokens: int | None = None
    cost: float | None = None
    #: The handoff's result (any JSON).
    result: Any = None
    error: str | None = None
    #: The verification verdict, one line.
    note: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    settled_at: float | None = None
    abandoned_by: str | None = None
    #: The state of its latest attempt's run (None when read without it).
    run_state: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Worker:
        return _build(cls, row, frozenset({"context", "result"}))

    def summary(self) -> dict[str, Any]:
        """What the coordinator (and a report) is told about the worker: a JSON object."""
        return {"seq": self.seq, "worker": self.worker, "task": self.task, "state": self.state,
                "status": self.status, "result": self.result, "confidence": self.confidence,
                "steps_used": self.steps_used, "error": self.error, "note": self.note}


@dataclass(frozen=True, slots=True, kw_only=True)
class MissionCall:
    """One tool call of a coordinator turn: a ``mission_calls`` row (JSON decoded)."""

    id: int = 0
    mission_id: int
    #: The coordinator turn that made it (an external coordinator's calls share a turn).
    turn: int
    call_id: str
    #: spawn_worker, ask_person, report or close_mission (anything else is answered as an error).
    name: str
    #: The call's input (any JSON).
    input: Any = None
    #: Its answer (any JSON); None while it waits (a worker, a person).
    result: Any = None
    is_error: bool = False
    created_at: float = 0.0
    answered_at: float | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> MissionCall:
        call = _build(cls, row, frozenset({"input", "result"}))
        return replace(call, is_error=bool(call.is_error))


@dataclass(frozen=True, slots=True, kw_only=True)
class MissionTurn:
    """One coordinator turn: a ``mission_turns`` row (``reply`` decoded)."""

    mission_id: int
    turn: int
    at: float = 0.0
    #: The coordinator's reply: Messages API content blocks (list of JSON objects).
    reply: Any = field(default_factory=list)
    tokens: int = 0
    #: US dollars.
    cost: float = 0.0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> MissionTurn:
        return _build(cls, row, frozenset({"reply"}))


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerAttempt:
    """The newest attempt of a mission worker: its run and what its outcome says (what the
    mission engine verifies a delivery on)."""

    run: Run
    #: The outcome's parsed handoff, its verification verdict (JSON), None when absent.
    handoff: Any = None
    verification: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgingCase:
    """Everything the supervisor reads to settle and judge one run, read in one snapshot
    (``Store.judging_case``)."""

    run: Run
    #: The run's outcome, None when the terminal move left none yet.
    outcome: Outcome | None
    #: The job's ``jobs`` row, None for a job the ledger does not know.
    job: Job | None
    #: The retry policy queued the next attempt of this lineage (``trigger = 'retry'``; an
    #: operator's later retry does not count, so a replay sees what the judge saw).
    retry_queued: bool = False
    #: Attempts of the lineage before this one that ended failed, timed out or orphaned.
    prior_failures: int = 0
    #: The escalation kind an earlier attempt of the lineage was escalated as (what a manual
    #: retry's failure is counted on), None when none escalated.
    escalated_before: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryOutcome:
    """One judged outcome of a job's history, as the judge's baselines read it (the columns of
    ``Outcome`` they need; output columns only for successes, None otherwise)."""

    run_id: int
    attempt: int
    state: str
    status: str
    duration_s: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    stdout_head: str | None = None
    stdout_tail: str | None = None
    stderr_tail: str | None = None
    handoff: Any = None
    verification: Any = None
    verdict_kind: str | None = None
    escalate: int | None = None
    #: ``job_outcomes.updated_at`` (epoch s): moves with every write to the outcome.
    updated_at: float = 0.0
    #: The retry policy queued a next attempt of its lineage.
    retried: bool = False

    @property
    def key(self) -> tuple[int, float, bool]:
        """``(run_id, updated_at, retried)``: names this content (a cache key)."""
        return (self.run_id, self.updated_at, self.retried)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> HistoryOutcome:
        kw = {f.name: row[f.name] for f in fields(cls) if f.name in row.keys()}
        kw["retried"] = bool(kw.get("retried"))
        return cls(**kw)


@dataclass(frozen=True, slots=True, kw_only=True)
class RaiseEscalation:
    """An escalation to open, or to count on the active one of its (job, kind)."""

    kind: str
    #: critical, warning or info.
    severity: str
    #: The sentence with its evidence, shown to people.
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class VerdictWrite:
    """What the supervisor decided about one terminal run, for ``Store.record_verdict``: the
    ``job_outcomes`` verdict columns, the escalations it raises, the recoverable kinds a
    success resolves, and the ``verdict`` audit event."""

    #: ``Verdict.to_json()``.
    verdict: dict[str, Any]
    escalate: bool
    severity: str | None
    #: ``job_outcomes.verdict_kind``.
    kind: str
    reason: str
    silent: bool
    #: ``rules`` or ``claude:<model>``.
    judged_by: str
    #: Escalations raised by the verdict, in order (the first one's id goes in the event).
    escalations: tuple[RaiseEscalation, ...] = ()
    #: Who an opened escalation goes to (``spec.owner``).
    owner: str | None = None
    #: Kinds of the job's active escalations this success resolves (empty: none).
    resolve_kinds: tuple[str, ...] = ()
    resolve_reason: str = ""
    #: When the recovering run started (epoch s): escalations of runs that had not ended by
    #: then (an overlapping run) stay open.
    resolve_started_at: float | None = None
    #: Notification sinks (``settings.notify``) that hear what is opened or resolved.
    sinks: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One entry of the audit trail: an ``events`` row (``detail`` decoded; None when absent
    or not a JSON object)."""

    id: int
    #: When it happened (epoch s, UTC).
    at: float
    run_id: int | None = None
    job: str | None = None
    attempt: int | None = None
    #: ``runner:<id>``, ``sweep``, ``supervisor``, ``operator:<name>``, ``reload``, ``cli``.
    actor: str = ""
    #: transition, late_result, retry_decision, verdict, escalation_opened, ...
    kind: str = ""
    from_state: str | None = None
    to_state: str | None = None
    reason: str | None = None
    detail: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Event:
        got = _build(cls, row, frozenset({"detail"}))
        if got.detail is not None and not isinstance(got.detail, dict):
            return _build(cls, {**row, "detail": None})
        return got


def columns(record: Any) -> dict[str, Any]:
    """A record's fields as a shallow ``{column: value}`` mapping: for code that reads the
    ledger's column-shaped formats (the eval corpus, a ``--json`` listing), never for rows."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageRetry:
    """What ``Store.retry_lineage`` found and did."""

    #: The run asked about; None when there is no such run (nothing written).
    run: Run | None
    #: The lineage's latest attempt as the transaction saw it (before any new one).
    latest: Run | None = None
    #: The id of the attempt queued, None when refused (the latest attempt has not ended).
    new_run_id: int | None = None
    #: When refused: the latest attempt's first event (who queued it, when).
    queued_by: Event | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseChange:
    """What ``Store.set_job_paused`` found and did."""

    #: The job as the transaction read it, before the change; None: no such enabled job.
    job: Job | None
    #: True when the pause state was changed (False: it was in the asked state already).
    changed: bool = False
    #: The job's latest ``job_resumed`` event (who resumed it last, when), when asked to
    #: resume a job that is not paused.
    last_resume: Event | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerFailure:
    """One final failure a breaker counts, with its evidence (``runs`` joined to
    ``job_outcomes``): what a breaker's escalation names."""

    id: int
    ended_at: float | None = None
    state: str = ""
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    #: The last of its stderr (the whole of a short one).
    stderr_tail: str | None = None
    #: The outcome's verification ``{ok, checks}``, decoded.
    verification: Any = None
    #: The verdict's kind once judged.
    verdict_kind: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> BreakerFailure:
        return _build(cls, row, frozenset({"verification"}))


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationMove:
    """What ``Store.move_escalation`` found and did."""

    #: The escalation as the transaction read it, before the move; None: no such escalation.
    before: Escalation | None
    #: True when it was moved (False: it was not in a state the move starts from).
    moved: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedRun:
    """A queued run that is due, as the dispatcher reads it (``Store.due_runs``): the run, and
    the state and start (``runs.started_at``, Unix seconds) of its fan-out parent (None for a
    run without a parent, or whose parent row is gone)."""

    run: Run
    parent_state: str | None = None
    parent_started_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishedRun:
    """A run after its end, as the runner reports it (``Store.finished_run``): the run and its
    outcome's ``duration_s`` (seconds; None while it has no outcome)."""

    run: Run
    duration_s: float | None = None
