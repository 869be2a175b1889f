"""Typed records of the console's page reads (``core.ledger.reads``): one per row shape.

The console's views, screens and the CLI listings read pages of joined columns that are not
one table's row (a finished run with its verdict, a live run with its runner's heartbeat, a
job with its next run and success rate). Each shape here is a frozen dataclass whose
fields are named as the columns they come from (the source table is named per field group),
so code above ``core.ledger`` reads ``row.duration_s``, never ``row["duration_s"]``.

Conventions (as in ``core.ledger.records``): timestamps are Unix epoch seconds, UTC, as
``float`` (None: not happened); durations and ages are seconds (``*_s``); states and kinds
are the ledger's own words as ``str``. ``to_json()`` gives the document the CLI's ``--json``
prints, with the keys in the order they have always had.

This module imports no database driver.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import PurePath
from typing import Any, TypeVar

from core.ledger.records import Escalation, Event, Outcome, Run, columns

R = TypeVar("R")


_NAMES: dict[type, frozenset[str]] = {}


def _names(cls: type) -> frozenset[str]:
    """The field names of record class ``cls`` (looked up once: a page builds hundreds)."""
    got = _NAMES.get(cls)
    if got is None:
        got = _NAMES[cls] = frozenset(f.name for f in fields(cls))
    return got


def _build(cls: type[R], row: Mapping[str, Any], **extra: Any) -> R:
    """``cls`` from the columns of ``row`` that are its fields, plus ``extra`` (which wins)."""
    names = _names(cls)
    if names.issuperset(row.keys()):  # the usual case: the query selected exactly the record's columns
        return cls(**{**row, **extra})
    kw = {name: row[name] for name in names if name in row}
    kw.update(extra)
    return cls(**kw)


def _doc(record: Any) -> dict[str, Any]:
    """A flat record's fields as a JSON-ready dict (declaration order)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


#: The ``runs`` columns in table order (what ``SELECT *`` and the CLI's JSON have always
#: given: ``reason_code`` came with a later migration, so it is last).
RUN_COLUMNS: tuple[str, ...] = tuple(
    [f.name for f in fields(Run) if f.name != "reason_code"] + ["reason_code"])


def run_json(run: Run) -> dict[str, Any]:
    """A ``Run`` as its ``runs`` row in table order (for ``--json``)."""
    return {c: getattr(run, c) for c in RUN_COLUMNS}


def event_json(event: Event) -> dict[str, Any]:
    """An ``Event`` as its ``events`` row: ``detail`` as the JSON text stored."""
    doc = columns(event)
    doc["detail"] = None if event.detail is None else json.dumps(event.detail, default=str)
    return doc


# -- outcomes view (runs ⋈ job_outcomes) ------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeRow:
    """One finished run of the Outcomes view: ``runs`` left-joined with ``job_outcomes``."""

    # runs
    id: int
    job: str
    #: Fan-out sub-task name; "" for a top-level run.
    task: str = ""
    lineage: str = ""
    attempt: int = 1
    state: str = ""
    trigger: str = ""
    #: Hostname of the host life that spawned it (None on older runs).
    host: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    #: ``runs.reason``: why the run ended, for people.
    run_reason: str | None = None
    # job_outcomes (None before the outcome is recorded)
    status: str | None = None
    #: Seconds: the outcome's ``duration_s``, else ``ended_at - started_at``.
    duration_s: float | None = None
    verdict_reason: str | None = None
    verdict_kind: str | None = None
    severity: str | None = None
    #: 1 kept silent, 0 not, None before judging.
    silent: int | None = None
    judged_by: str | None = None
    #: The one-line reason to show: the verdict's reason, else the run's, else "".
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return _doc(self)


# -- live & orphans view (runs ⋈ runners) -------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class LiveRunRow:
    """One run of the "Live & orphans" view: a live or orphaned ``runs`` row with its owning
    runner's heartbeat (``runners``), judged at the read's ``now``."""

    # runs
    id: int
    job: str
    task: str = ""
    attempt: int = 1
    state: str = ""
    pid: int | None = None
    host: str | None = None
    runner_id: str | None = None
    #: Presumed alive until (epoch s); None once ended.
    lease_until: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    reason: str | None = None
    # runners (None when the run has no runner row)
    heartbeat_at: float | None = None
    #: Seconds between the runner's heartbeats.
    heartbeat_s: float | None = None
    stopped_at: float | None = None
    # judged at ``now``
    #: Seconds since the lease expired (negative while still valid), None without a lease.
    lease_age_s: float | None = None
    #: Seconds since the runner's last heartbeat, None without a runner row.
    heartbeat_age_s: float | None = None
    #: A live run at risk (lease expired, runner stopped, silent or gone).
    at_risk: bool = False
    #: spawned, running or verifying (False: orphaned).
    live: bool = False
    #: Why at risk: "lease expired", "runner stopped", "runner silent", "runner gone"; "" otherwise.
    risk: str = ""

    def to_json(self) -> dict[str, Any]:
        return _doc(self)


# -- jobs view (jobs, with their runs) ------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class RecentRun:
    """One bar of a job's sparkline: a finished top-level run (``runs`` ⋈ ``job_outcomes``)."""

    state: str
    #: ``job_outcomes.status`` (``partial`` draws as partial).
    status: str | None = None
    duration_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRow:
    """One job of the Jobs view and ``watchkeeper jobs``: its ``jobs`` columns, its next run
    and its recent finished top-level runs (fan-out sub-tasks left out)."""

    # jobs
    name: str
    kind: str = "command"
    #: Cron expression, ``every 30s`` or ``once``; None for a manual-only job.
    schedule_text: str | None = None
    owner: str | None = None
    intent: str | None = None
    #: 0 once no spec defines it (removed; history kept).
    enabled: int = 1
    breaker_state: str | None = "closed"
    #: An open breaker cools down until (epoch s).
    breaker_until: float | None = None
    #: The last spec error (the kept spec still runs), None when the last load was good.
    last_error: str | None = None
    paused_at: float | None = None
    #: ``operator:<name>`` who paused it.
    paused_by: str | None = None
    pause_reason: str | None = None
    # ``reads.job_next_run``
    #: When it runs next (epoch s), None when nothing is due.
    next_run: float | None = None
    #: Why its slots are held back: ``paused``, ``breaker`` or None.
    next_held: str | None = None
    # runs ⋈ job_outcomes
    #: State, end (epoch s) and outcome status of its latest finished run.
    last_state: str | None = None
    last_status: str | None = None
    last_ended_at: float | None = None
    #: How many outcomes ``recent_runs`` holds.
    recent: int = 0
    #: Its last outcomes, every attempt, oldest first (the sparkline).
    recent_runs: tuple[RecentRun, ...] = ()
    #: Share (0..1) of its recent lineages whose final attempt succeeded; None with none.
    success_rate: float | None = None

    def to_json(self) -> dict[str, Any]:
        doc = _doc(self)
        doc["recent_runs"] = [[r.state, r.status, r.duration_s] for r in self.recent_runs]
        return doc


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidSpec:
    """A spec file the last folder load could not take: an ``invalid_specs`` row. All text
    is untrusted (from the file): show it through the escaper."""

    key: str
    #: The spec file.
    source: str
    #: The job it names, "" when the error names none.
    job: str = ""
    #: 1-based line, or None.
    line: int | None = None
    field: str | None = None
    message: str = ""
    #: ``file:line: job 'x': field 'f': message``.
    text: str = ""
    first_seen: float = 0.0
    last_seen: float = 0.0
    #: An enabled ``jobs`` row has that name (its last good spec still runs).
    loaded: bool = False

    @property
    def name(self) -> str:
        """What a listing calls it: the job's name, else the file's name."""
        return self.job or PurePath(self.source).name


@dataclass(frozen=True, slots=True, kw_only=True)
class JobControls:
    """The control state of one job (``jobs``): what a pause/resume/trigger dialog shows."""

    name: str
    enabled: int = 1
    paused_at: float | None = None
    paused_by: str | None = None
    pause_reason: str | None = None
    breaker_state: str | None = "closed"
    breaker_until: float | None = None
    last_error: str | None = None


# -- run detail ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One attempt of a run's lineage (``runs``)."""

    id: int
    attempt: int
    state: str
    trigger: str = ""
    created_at: float = 0.0
    ended_at: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildRun:
    """A fan-out sub-task run of a parent (``runs`` with ``parent_run_id``)."""

    id: int
    task: str
    attempt: int
    state: str
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationBrief:
    """An escalation naming a run as its latest (``escalations``)."""

    id: int
    kind: str
    severity: str
    state: str
    count: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSlice:
    """Head and tail of one output stream (``<artifacts_dir>/stdout.log`` / ``stderr.log``,
    else the outcome's stored head and tail), decoded as UTF-8 with replacement."""

    #: The file is there (False: read from ``job_outcomes``, or nothing).
    exists: bool = False
    #: Bytes of the file (or the outcome's count when the file is gone).
    size: int = 0
    head: str = ""
    #: "" when the head already covers the stream.
    tail: str = ""
    #: Bytes the job wrote to it: the larger of the outcome's count and the file's size.
    total: int = 0

    def to_json(self) -> dict[str, Any]:
        return _doc(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunDetail:
    """Everything the run detail screen and ``watchkeeper show`` give for one run."""

    run: Run
    #: Its ``job_outcomes`` record (JSON decoded), None before one is recorded.
    outcome: Outcome | None
    #: Every attempt of the lineage, by attempt.
    attempts: tuple[Attempt, ...] = ()
    #: The audit trail of every attempt of the lineage, oldest first.
    events: tuple[Event, ...] = ()
    stdout: OutputSlice = field(default_factory=OutputSlice)
    stderr: OutputSlice = field(default_factory=OutputSlice)
    #: Escalations naming this run as their latest.
    escalations: tuple[EscalationBrief, ...] = ()
    #: Fan-out sub-task runs of this run, by task then attempt.
    children: tuple[ChildRun, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"run": run_json(self.run), "outcome": None if self.outcome is None else columns(self.outcome),
                "attempts": [_doc(a) for a in self.attempts], "events": [event_json(e) for e in self.events],
                "stdout": self.stdout.to_json(), "stderr": self.stderr.to_json(),
                "escalations": [_doc(e) for e in self.escalations], "children": [_doc(c) for c in self.children]}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEvidence:
    """The evidence of one run for a one-glance "why": ``job_outcomes`` status and verdict
    reason with the last characters of each stream (else those of its output files)."""

    run_id: int
    #: None when read from the output files (no outcome yet).
    status: str | None = None
    verdict_reason: str | None = None
    stderr_end: str = ""
    stdout_end: str = ""


# -- escalation detail -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationEvent:
    """One event of an escalation's audit trail (``events``) with the run it names (``runs``)."""

    #: When (epoch s, UTC).
    at: float
    #: escalation_opened / _updated (occurrences) or _acknowledged / _snoozed / _resolved / _reopened.
    kind: str
    actor: str = ""
    run_id: int | None = None
    from_state: str | None = None
    to_state: str | None = None
    reason: str | None = None
    #: A snooze's end (epoch s), from the event's detail.
    until: float | None = None
    # runs (None when the event names no run)
    run_state: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    attempt: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationBrief:
    """One outbox row of an escalation (``notifications``; payload left out)."""

    id: int
    event: str
    sink: str
    #: pending, sending, sent, failed or cancelled.
    state: str
    attempts: int = 0
    last_error: str | None = None
    created_at: float = 0.0
    sent_at: float | None = None
    next_attempt_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunBrief:
    """A run as an escalation detail names it (``runs``)."""

    id: int
    state: str
    exit_code: int | None = None
    signal: int | None = None
    attempt: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationDetail:
    """Everything the escalation detail screen shows."""

    escalation: Escalation
    #: ``escalation_opened`` / ``escalation_updated`` events, newest first.
    occurrences: tuple[EscalationEvent, ...] = ()
    #: What people and the supervisor did to it, newest first.
    acts: tuple[EscalationEvent, ...] = ()
    #: Its outbox rows, newest first.
    notifications: tuple[NotificationBrief, ...] = ()
    #: Its ``latest_run_id`` run, None when it names none.
    latest_run: RunBrief | None = None


# -- job history ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class JobInfo:
    """A job as the history screen heads it (``jobs``; ``timezone`` from its spec)."""

    name: str
    kind: str = "command"
    schedule_text: str | None = None
    owner: str | None = None
    intent: str | None = None
    enabled: int = 1
    breaker_state: str | None = "closed"
    breaker_until: float | None = None
    paused_at: float | None = None
    paused_by: str | None = None
    pause_reason: str | None = None
    last_error: str | None = None
    #: The spec's IANA zone, None for UTC (or a spec this version cannot read).
    timezone: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryRun:
    """One finished top-level run of a job's history (``runs`` ⋈ ``job_outcomes``)."""

    id: int
    lineage: str
    attempt: int
    state: str
    trigger: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    status: str | None = None
    verdict_reason: str | None = None
    #: Seconds: the outcome's, else ``ended_at - started_at``.
    duration_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobHistory:
    """What the job history screen shows for one job."""

    job: JobInfo
    next_run: float | None = None
    next_held: str | None = None
    #: Its last finished top-level runs, newest first.
    runs: tuple[HistoryRun, ...] = ()


# -- spec errors a runner recorded (events) -------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class SpecErrorEvent:
    """A ``spec_error`` event of the audit trail (``events``), its detail unpacked: the
    ``SpecError`` fields as recorded. All text is untrusted (from the spec file)."""

    id: int
    #: When it was recorded (epoch s, UTC).
    at: float
    #: Who recorded it (``runner:<id>``, ``reload``).
    actor: str = ""
    job: str | None = None
    #: ``file:line: job 'x': field 'f': message``.
    text: str | None = None
    file: str | None = None
    #: 1-based, or None.
    line: int | None = None
    field: str | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return _doc(self)


# -- report ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class KindCount:
    """Escalations of one kind seen in a window (``escalations`` grouped by ``kind``)."""

    kind: str
    #: How many escalations (rows) of that kind.
    escalations: int = 0
    #: How many times they were raised in all (the sum of their ``count``).
    occurrences: int | None = 0

    def to_json(self) -> dict[str, Any]:
        return _doc(self)


# -- CLI run listing (runs ⋈ job_outcomes) -------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class ListedRun:
    """One run of ``watchkeeper runs``: the ``runs`` record with its outcome's figures."""

    run: Run
    # job_outcomes (None before the outcome is recorded)
    duration_s: float | None = None
    status: str | None = None
    verdict_reason: str | None = None
    severity: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**run_json(self.run), "duration_s": self.duration_s, "status": self.status,
                "verdict_reason": self.verdict_reason, "severity": self.severity}


def build(cls: type[R], row: Mapping[str, Any], **extra: Any) -> R:
    """A page record from a mapping of its columns (for the read modules of ``core.ledger``)."""
    return _build(cls, row, **extra)
