"""``SqlStore``: the store protocol (``core.ledger.store.Store``) over the ledger's SQL.

It wraps a ``Ledger`` (or a runner's ``WriterLedger``, whose writes join the runner's group
commits) and composes the ledger's statement modules (``runs``, ``lifecycle``, ``terminal``,
``outcomes``, ``escalations``, ...) into one transaction per operation. The statements are
shared by every backend: the connection's dialect runs them on SQLite or PostgreSQL.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar, cast

from core.ledger import (
    adoption,
    breaker,
    escalations,
    events,
    fanout,
    hosts,
    invariants,
    jobs,
    lifecycle,
    missions,
    outbox,
    outcomes,
    queue,
    reads,
    runners,
    runs,
    terminal,
)
from core.ledger.connection import Conn, Ledger, add_event
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
from core.ledger.records import (
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
from core.ledger.store import BreakerWording, MoveVerdicts, RetryRule, Store
from core.spec.model import JobSpec
from core.vocabulary import AuditEvent, EndReason, Trigger

log = logging.getLogger(__name__)
T = TypeVar("T")


class SqlStore:
    """The ``Store`` and the ``PageReads`` over one ``Ledger`` handle (same-thread, like the
    ``Ledger`` itself).

    Args:
        ledger: the open ledger; its ``write`` gives each operation its transaction.
        retry: the retry policy applied when a run ends failed (``finish_run``,
            ``settle_run``); without it such a move raises ``ValueError``.
    """

    def __init__(self, ledger: Ledger, *, retry: RetryRule | None = None) -> None:
        self.ledger = ledger
        self.retry = retry

    @property
    def _conn(self) -> Conn:
        return self.ledger.conn

    # -- runs ------------------------------------------------------------------------------
    def run(self, run_id: int) -> Run | None:
        return _run(self._conn, run_id)

    def run_state(self, run_id: int) -> str | None:
        return runs.state_of(self._conn, run_id)

    def runs_in_states(self, states: Collection[str], *, limit: int = 100_000) -> list[Run]:
        return [Run.from_row(r) for r in runs.in_states(self._conn, states, limit=limit)]

    def queued_runs_of_removed_jobs(self, *, removed_before: float, limit: int = 100) -> list[Run]:
        return [Run.from_row(r) for r in runs.queued_of_removed_jobs(self._conn, removed_before=removed_before,
                                                                     limit=limit)]

    def live_runs_and_owners(self) -> list[tuple[Run, Runner | None]]:
        with self.ledger.read() as conn:
            live = [Run.from_row(r) for r in runs.in_states(conn, lifecycle.LIVE)]
            owners = {k: Runner.from_row(v) for k, v in runners.owners_of_live_runs(conn).items()}
        return [(r, owners.get(r.runner_id) if r.runner_id else None) for r in live]

    def stranded_parent_runs(self, *, limit: int = 1000) -> list[int]:
        return fanout.stranded_parents(self._conn, limit)

    def abandon_queued_subtasks(self, parent_id: int, *, actor: str,
                                max_wait_s: float | None = None) -> list[int]:
        return self.ledger.write(lambda conn: fanout.settle_children(conn, parent_id, actor=actor),
                                 max_wait_s=max_wait_s)

    def queue_manual_run(self, job: str, *, actor: str) -> int:
        return runs.trigger(self.ledger, job, actor=actor)

    def retry_lineage(self, run_id: int, *, actor: str, reason: str, now: float | None = None) -> LineageRetry:
        def tx(conn: Conn) -> LineageRetry:
            run = _run(conn, run_id)
            if run is None:
                return LineageRetry(run=None)
            top = runs.latest_attempt(conn, run.lineage)
            latest = _run(conn, int(top["id"])) if top is not None else None
            assert latest is not None  # the lineage holds at least ``run``
            if latest.state not in lifecycle.TERMINAL:
                first = events.first(conn, latest.id)
                return LineageRetry(run=run, latest=latest, queued_by=None if first is None else Event.from_row(first))
            ts = now if now is not None else time.time()
            job = jobs.job_row(conn, run.job)
            new_id = runs.create(conn, job=run.job, lineage=run.lineage, attempt=latest.attempt + 1, slot=run.slot,
                                 task=run.task, trigger=Trigger.MANUAL_RETRY, parent_run_id=run.parent_run_id,
                                 spec_hash=job["spec_hash"] if job else run.spec_hash, not_before=ts, now=ts,
                                 actor=actor, event=AuditEvent.MANUAL_RETRY, reason=reason,
                                 detail={"retry_of": run_id, "previous_attempt": latest.attempt})
            assert new_id is not None  # the lineage's next attempt: a conflict raises IntegrityError instead
            return LineageRetry(run=run, latest=latest, new_run_id=new_id)
        return self.ledger.write(tx)

    def request_kill(self, run_id: int, *, actor: str) -> bool:
        return bool(self.ledger.write(lambda conn: runs.request_kill(conn, run_id, actor=actor)))

    def kill_requests(self, run_ids: list[int]) -> list[Run]:
        return [Run.from_row(r) for r in runs.kill_requests(self._conn, run_ids)]

    def confirm_kill(self, run_id: int, *, actor: str, note: str) -> bool:
        return bool(self.ledger.write(lambda conn: runs.confirm_kill(conn, run_id, actor=actor, note=note)))

    def live_subtasks(self, parent_id: int) -> list[int]:
        return runs.children_in_states(self._conn, parent_id, lifecycle.LIVE)

    def move_run(self, run_id: int, attempt: int, from_state: str, to_state: str, *, actor: str,
                 reason: str | None = None, fields: Mapping[str, Any] | None = None,
                 detail: dict[str, Any] | None = None) -> bool:
        return lifecycle.transition(self.ledger, run_id, attempt, from_state, to_state, actor=actor,
                                    reason=reason, fields=fields, detail=detail)

    def finish_run(self, run_id: int, attempt: int, from_state: str, to_state: str, *, actor: str,
                   reason_code: EndReason, reason: str | None = None, fields: Mapping[str, Any] | None = None,
                   detail: dict[str, Any] | None = None, outcome: Mapping[str, Any] | None = None,
                   spec: JobSpec | None = None, handoff_error: str | None = None,
                   max_wait_s: float | None = None) -> bool:
        return terminal.finish_run(self.ledger, run_id, attempt, from_state, to_state, actor=actor,
                                   reason_code=reason_code, reason=reason, fields=fields, detail=detail,
                                   outcome=outcome, spec=spec, handoff_error=handoff_error, max_wait_s=max_wait_s,
                                   retry=self.retry)

    def settle_run(self, run_id: int, attempt: int, from_state: str, to_state: str, *, actor: str,
                   verdicts: MoveVerdicts, at: float, reason_code: EndReason, reason: str | None = None,
                   detail: dict[str, Any] | None = None, outcome: Mapping[str, Any] | None = None,
                   spec: JobSpec | None = None, handoff_error: str | None = None) -> bool | None:
        lifecycle.check(from_state, to_state)

        def tx(conn: Conn) -> bool | None:
            if not terminal.finish(conn, run_id, attempt, from_state, to_state, actor=actor,
                                   reason_code=reason_code, reason=reason, at=at,
                                   detail=detail, outcome=outcome, spec=spec, handoff_error=handoff_error,
                                   retry=self.retry):
                return None  # the compare-and-set lost: the verdicts are discarded
            # The verdict in the move's transaction (one commit instead of two). A write that
            # fails is undone alone and left to the caller; it never holds back the move.
            conn.execute("SAVEPOINT verdict")
            try:
                judged = _write_move_verdict(conn, run_id, verdicts)
            except Exception:
                conn.execute("ROLLBACK TO verdict")
                log.warning("run %s: writing the verdict with the terminal move failed; judging after it",
                            run_id, exc_info=True)
                judged = False
            conn.execute("RELEASE verdict")
            return judged

        return self.ledger.write(tx)

    # -- jobs ------------------------------------------------------------------------------
    def set_job_paused(self, job: str, *, paused: bool, actor: str, reason: str | None = None,
                       now: float | None = None) -> PauseChange:
        def tx(conn: Conn) -> PauseChange:
            got = jobs.set_paused_in(conn, job, paused=paused, actor=actor, reason=reason, now=now)
            if got is None:
                return PauseChange(job=None)
            row, changed = got
            last = None if changed or paused else jobs.last_resume(conn, job)
            return PauseChange(job=Job.from_row(row), changed=changed,
                               last_resume=None if last is None else Event.from_row(last))
        return self.ledger.write(tx)

    # -- escalations -------------------------------------------------------------------------
    def move_escalation(self, esc_id: int, *, allowed_from: Sequence[str], to_state: str,
                        fields: Mapping[str, Any], event: AuditEvent, actor: str, detail: dict[str, Any] | None = None,
                        now: float) -> EscalationMove:
        def tx(conn: Conn) -> EscalationMove:
            row, moved = escalations.move(conn, esc_id, allowed_from=allowed_from, to_state=to_state,
                                          sets=dict(fields), event=event, actor=actor, extra=detail, now=now)
            return EscalationMove(before=None if row is None else Escalation.from_row(row), moved=moved)
        return self.ledger.write(tx)

    # -- judging ---------------------------------------------------------------------------
    def outcome(self, run_id: int) -> Outcome | None:
        row = outcomes.get(self._conn, run_id)
        return None if row is None else Outcome.from_row(row)

    def job(self, name: str) -> Job | None:
        row = jobs.job_row(self._conn, name)
        return None if row is None else Job.from_row(row)

    def judging_case(self, run_id: int) -> JudgingCase | None:
        with self.ledger.read() as conn:
            return _case(conn, run_id)

    def history_keys(self, job: str, *, before_run: int, limit: int) -> list[tuple[int, float, bool]]:
        return outcomes.job_history_keys(self._conn, job, before_run, limit)

    def history_outcomes(self, run_ids: Sequence[int]) -> list[HistoryOutcome]:
        return [HistoryOutcome.from_row(r) for r in outcomes.history_rows(self._conn, list(run_ids))]

    def record_verdict(self, run_id: int, verdict: VerdictWrite) -> bool:
        return self.ledger.write(lambda conn: _write_verdict(conn, run_id, verdict))

    def judge_late_result(self, run_id: int, *, escalation: RaiseEscalation | None, reason: str,
                          owner: str | None, sinks: Sequence[Any] = ()) -> bool:
        def tx(conn: Conn) -> bool:
            run = _run(conn, run_id)
            if run is None or events.exists(conn, run_id, AuditEvent.LATE_RESULT_JUDGED):
                return False
            esc_id = None
            if escalation is not None:
                esc_id, _ = escalations.raise_escalation(
                    conn, job=run.job, kind=escalation.kind, severity=escalation.severity,
                    reason=escalation.reason, run_id=run_id, owner=owner, sinks=sinks)
            add_event(conn, actor="supervisor", kind=AuditEvent.LATE_RESULT_JUDGED, run_id=run_id, job=run.job,
                      attempt=run.attempt, reason=reason, detail={"escalation_id": esc_id})
            return True
        return self.ledger.write(tx)

    def latest_event(self, run_id: int, kind: str | None = None) -> Event | None:
        row = events.latest(self._conn, run_id, kind)
        return None if row is None else Event.from_row(row)

    def record_event(self, *, actor: str, kind: AuditEvent, run_id: int | None = None, job: str | None = None,
                     attempt: int | None = None, reason: str | None = None,
                     detail: dict[str, Any] | None = None, max_wait_s: float | None = None) -> int:
        return self.ledger.write(lambda conn: add_event(conn, actor=actor, kind=kind, run_id=run_id, job=job,
                                                        attempt=attempt, reason=reason, detail=detail),
                                 max_wait_s=max_wait_s)

    def judged_counts(self, since: float) -> dict[str, Any]:
        return outcomes.judged_counts(self._conn, since)

    # -- outbox ------------------------------------------------------------------------------
    def due_notifications(self, now: float, *, limit: int) -> list[Notification]:
        return outbox.due(self._conn, now, limit)

    def fresh_notifications(self, sink: str, *, exclude: Sequence[int], limit: int) -> list[Notification]:
        return outbox.fresh_for_sink(self._conn, sink, exclude=exclude, limit=limit)

    def claim_notifications(self, rows: Sequence[Notification], *, until: float) -> tuple[list[int], list[int]]:
        return self.ledger.write(lambda conn: outbox.cancel_stale_then_claim(conn, rows, until))

    def mark_notifications_sent(self, ids: Sequence[int], *, at: float) -> None:
        self.ledger.write(lambda conn: outbox.mark_sent(conn, ids, at))

    def mark_notification_failed(self, ids: Sequence[int], *, error: str, next_at: float | None) -> None:
        self.ledger.write(lambda conn: outbox.mark_failed_try(conn, ids, error, next_at=next_at))

    def enqueue_repeats(self, sinks: Sequence[Any], *, now: float | None = None) -> int:
        return len(self.ledger.write(lambda conn: outbox.enqueue_repeats(conn, sinks, now=now)))

    def enqueue_owed(self, sinks: Sequence[Any], *, now: float | None = None) -> int:
        return len(self.ledger.write(lambda conn: outbox.enqueue_owed(conn, sinks, now=now)))

    def notification_counts(self, since: float) -> dict[str, int]:
        return outbox.summary(self._conn, since)

    # -- runners ---------------------------------------------------------------------------
    def past_runner_gap(self, *, runner_id: str, started_at: float) -> PastGap | None:
        return runners.past_gap(self.ledger, runner_id=runner_id, started_at=started_at)

    def last_scheduled_slots(self) -> dict[str, float]:
        with self.ledger.read() as conn:
            return queue.last_scheduled_slots(conn)

    def record_runner_gap(self, gap: PastGap, *, runner_id: str, slots: list[dict[str, Any]],
                          sinks: Sequence[Any] = (), owner: str | None = None) -> int:
        return self.ledger.write(lambda conn: runners.record_gap_after(conn, gap, runner_id=runner_id, slots=slots,
                                                                       sinks=sinks, owner=owner))

    def expire_snoozes(self, *, sinks: Sequence[Any] = (), now: float | None = None) -> list[int]:
        return escalations.expire_snoozes(self.ledger, sinks=sinks, now=now)

    # -- runner gap (live) ---------------------------------------------------------------------------
    def check_runner_gap(self, *, sinks: Sequence[Any] = (), owner: str | None = None,
                         now: float | None = None, actor: str = "supervisor") -> str | None:
        return self.ledger.write(lambda conn: runners.check_gap(conn, sinks=sinks, owner=owner, now=now,
                                                                actor=actor))

    def check_hosts(self, *, sinks: Sequence[Any] = (), owner: str | None = None,
                    now: float | None = None, actor: str = "supervisor") -> dict[str, list[str]]:
        return self.ledger.write(lambda conn: hosts.check_hosts(conn, sinks=sinks, owner=owner, now=now,
                                                                actor=actor))


    # -- the runner ------------------------------------------------------------------------
    def register_runner(self, *, runner_id: str, hostname: str, boot_id: str | None, pid: int,
                        pid_create_time: float | None, labels: Sequence[str], heartbeat_s: float, lease_s: float,
                        version: str, spec_dir: str, actor: str, owner: str | None = None) -> None:
        self.ledger.write(lambda conn: runners.register_runner(
            conn, runner_id=runner_id, hostname=hostname, boot_id=boot_id, pid=pid, pid_create_time=pid_create_time,
            labels=labels, heartbeat_s=heartbeat_s, lease_s=lease_s, version=version, spec_dir=spec_dir,
            actor=actor, owner=owner))

    def renew_leases(self, runner_id: str, run_ids: Sequence[int], *, lease_s: float) -> int:
        ids = list(run_ids)
        return int(self.ledger.write(lambda conn: runners.renew(conn, runner_id, ids, lease_s=lease_s)))

    def queue_slot(self, spec: JobSpec, slot: str, not_before: float, trigger: str, *, actor: str,
                   now: float | None = None) -> int | None:
        return self.ledger.write(lambda conn: queue.queue_slot(conn, spec, slot, not_before, trigger,
                                                               actor=actor, now=now))

    def adopt_job(self, spec: JobSpec, *, source: str | None, line: int | None, actor: str) -> str:
        return str(self.ledger.write(lambda conn: adoption.upsert_job(conn, spec, source=source, line=line,
                                                                      actor=actor)))

    def start_adopted_run(self, spec: JobSpec, *, actor: str, lease_s: float, host: str | None = None,
                          boot_id: str | None = None) -> Run:
        return Run.from_row(self.ledger.write(lambda conn: adoption.start_run(conn, spec, actor=actor,
                                                                              lease_s=lease_s, host=host,
                                                                              boot_id=boot_id)))

    def claim_adopted_retry(self, run: Run, *, actor: str, lease_s: float, host: str | None = None,
                            boot_id: str | None = None) -> Run:
        return Run.from_row(self.ledger.write(lambda conn: adoption.claim(conn, run.id, run.attempt, actor=actor,
                                                                          lease_s=lease_s, host=host,
                                                                          boot_id=boot_id)))

    def queued_retry(self, lineage: str, after_attempt: int) -> Run | None:
        row = adoption.queued_retry(self._conn, lineage, after_attempt)
        return None if row is None else Run.from_row(row)

    def due_runs(self, now: float, *, limit: int) -> list[QueuedRun]:
        return [QueuedRun(run=Run.from_row(r), parent_state=r["parent_state"],
                          parent_started_at=r["parent_started_at"])
                for r in queue.due_queued(self._conn, now, limit)]

    def next_queued_at(self) -> float | None:
        return queue.next_queued_at(self._conn)

    def live_run_count(self, *, job: str | None = None, parent_run_id: int | None = None) -> int:
        if (job is None) == (parent_run_id is None):
            raise ValueError("live_run_count: give exactly one of job and parent_run_id")
        if job is not None:
            return queue.live_runs_of_job(self._conn, job)
        assert parent_run_id is not None
        return queue.live_runs_of_parent(self._conn, parent_run_id)

    def claim_runs(self, runs: Sequence[Run], *, runner_id: str, actor: str, now: float, lease_s: float,
                   host: str | None = None, boot_id: str | None = None) -> list[bool]:
        fields = {"runner_id": runner_id, "spawned_at": now, "lease_until": now + lease_s, "host": host,
                  "boot_id": boot_id}
        pg = self.ledger.backend == "postgresql"

        def tx(conn: Conn) -> list[bool]:
            free = queue.lock_queued(conn, [r.id for r in runs]) if pg else None
            return [(free is None or run.id in free) and bool(lifecycle.apply(
                conn, run.id, run.attempt, lifecycle.State.QUEUED, lifecycle.State.SPAWNED, actor=actor,
                fields=fields)) for run in runs]
        return list(self.ledger.write_alone(tx))

    def finished_run(self, run_id: int) -> FinishedRun | None:
        row = queue.finished_row(self._conn, run_id)
        return None if row is None else FinishedRun(run=Run.from_row(row), duration_s=row["duration_s"])

    def breaker_state(self, job: str) -> str:
        return breaker.state_of(self._conn, job)[0]

    def close_breaker(self, job: str, *, actor: str, reason: str, now: float) -> bool:
        return bool(self.ledger.write(lambda conn: breaker.close(conn, job, actor=actor, reason=reason, now=now)))

    def record_breaker(self, spec: JobSpec, run_id: int, state: str, *, actor: str, words: BreakerWording,
                       owner: str | None, sinks: Sequence[Any]) -> str | None:
        return self.ledger.write(lambda conn: breaker.record(conn, spec, run_id, state, actor=actor, words=words,
                                                             owner=owner, sinks=sinks))

    def subtask_results(self, parent_id: int, spec: JobSpec) -> tuple[bool, list[dict[str, Any]]]:
        return fanout.task_results(self._conn, parent_id, spec)

    def worker_input(self, mission_id: int, seq: int) -> dict[str, Any] | None:
        return missions.worker_input(self._conn, mission_id, seq)

    def record_spec_errors(self, errors: Sequence[Any], *, actor: str) -> None:
        def tx(conn: Conn) -> None:
            for err in errors:
                add_event(conn, actor=actor, kind=AuditEvent.SPEC_ERROR, job=None, reason=str(err), detail=err.to_dict())
        self.ledger.write(tx)

    # -- audit -----------------------------------------------------------------------------------
    def judged_outcomes(self, since: float, *, limit: int) -> list[Outcome]:
        return [Outcome.from_row(r) for r in outcomes.judged_since(self._conn, since, limit)]

    def invariant_violations(self) -> list[Any]:
        return list(invariants.check(self._conn))

    # -- missions ------------------------------------------------------------------------------
    def missions_due(self, *, limit: int = 50) -> list[int]:
        return missions.due(self._conn, limit)

    def mission(self, mission_id: int) -> Mission | None:
        return MissionTx(self._conn).mission(mission_id)

    def missions(self, *, states: Collection[str] = (), limit: int = 100) -> list[Mission]:
        return [Mission.from_row(m) for m in missions.list_missions(self._conn, states=states, limit=limit)]

    def mission_events(self, mission_id: int, *, limit: int = 200) -> list[Event]:
        rows = self._conn.execute("SELECT * FROM (SELECT * FROM events WHERE job = ? ORDER BY id DESC LIMIT ?) t"
                                  " ORDER BY id", (missions.mission_job(mission_id), int(limit))).fetchall()
        return [Event.from_row(r) for r in rows]

    def mission_workers(self, mission_id: int) -> list[Worker]:
        return MissionTx(self._conn).workers(mission_id)

    def mission_calls(self, mission_id: int, turn: int | None = None) -> list[MissionCall]:
        return MissionTx(self._conn).calls(mission_id, turn)

    def mission_call(self, mission_id: int, call_id: str) -> MissionCall | None:
        return next((c for c in self.mission_calls(mission_id) if c.call_id == call_id), None)

    def mission_turns(self, mission_id: int) -> list[MissionTurn]:
        return [MissionTurn.from_row(t) for t in missions.turns_of(self._conn, mission_id)]

    def worker_attempt(self, lineage: str) -> WorkerAttempt | None:
        row = missions.latest_attempt(self._conn, lineage)
        if row is None:
            return None
        return WorkerAttempt(run=Run.from_row(row), handoff=row.get("handoff"), verification=row.get("verification"))

    def live_worker_runs(self, mission_id: int) -> list[Run]:
        return [Run.from_row(r) for r in missions.live_worker_runs(self._conn, mission_id)]

    def note_worker_attempt(self, worker_id: int, run: Run) -> None:
        self.ledger.write(lambda conn: missions.note_attempt(conn, worker_id, run.id, run.attempt))

    def mission_write(self, fn: Callable[[MissionTx], T]) -> T:
        return self.ledger.write(lambda conn: fn(MissionTx(conn)))

    # -- lifetime (a store made by ``open_store`` owns its ledger handle) ----------------------
    # -- page reads (PageReads) ---------------------------------------------------------------
    def escalations_page(self, *, after: tuple | None = None, limit: int = reads.PAGE,
                         flt: reads.Filter | None = None, include_resolved: bool = True,
                         offset: int = 0) -> reads.Page[Escalation]:
        return reads.escalations_page(self.ledger, after=after, limit=limit, flt=flt,
                                      include_resolved=include_resolved, offset=offset)

    def outcomes_page(self, *, after: tuple | None = None, limit: int = reads.PAGE,
                      flt: reads.Filter | None = None, offset: int = 0) -> reads.Page[OutcomeRow]:
        return reads.outcomes_page(self.ledger, after=after, limit=limit, flt=flt, offset=offset)

    def orphans_page(self, *, now: float, after: tuple | None = None, limit: int = reads.PAGE,
                     flt: reads.Filter | None = None, offset: int = 0) -> reads.Page[LiveRunRow]:
        return reads.orphans_page(self.ledger, now=now, after=after, limit=limit, flt=flt, offset=offset)

    def jobs_page(self, *, now: float, after: tuple | None = None, limit: int = reads.PAGE,
                  flt: reads.Filter | None = None, offset: int = 0) -> reads.Page[JobRow]:
        return reads.jobs_page(self.ledger, now=now, after=after, limit=limit, flt=flt, offset=offset)

    def count_rows(self, view: str, *, now: float, flt: reads.Filter | None = None) -> int:
        return reads.count_rows(self.ledger, view, now=now, flt=flt)

    def run_detail(self, run_id: int, *, events_limit: int = 500) -> RunDetail | None:
        return reads.run_detail(self.ledger, run_id, events_limit=events_limit)

    def run_evidence(self, run_id: int, tail_chars: int = 2000) -> RunEvidence | None:
        return reads.run_evidence(self.ledger, run_id, tail_chars)

    def escalation_detail(self, esc_id: int, *, limit: int = 200) -> EscalationDetail | None:
        return reads.escalation_detail(self.ledger, esc_id, limit=limit)

    def job_history(self, job: str, *, now: float, limit: int = reads.HISTORY_RUNS) -> JobHistory | None:
        return reads.job_history(self.ledger, job, now=now, limit=limit)

    def job_controls(self, job: str) -> JobControls | None:
        return reads.job_controls(self.ledger, job)

    def invalid_specs(self, *, limit: int = reads.PAGE, never_loaded: bool = False) -> list[InvalidSpec]:
        return reads.invalid_specs(self.ledger, limit=limit, never_loaded=never_loaded)

    def listed_runs(self, *, job: str | None = None, state: str | None = None, limit: int = 50,
                    host: str | None = None) -> list[ListedRun]:
        return runs.list_runs(self.ledger, job=job, state=state, limit=limit, host=host)

    def escalations(self, state: str | Sequence[str] | None = None, limit: int = 100, *,
                    job: str | None = None) -> list[Escalation]:
        return escalations.list_escalations(self.ledger, state, limit, job=job)

    def escalations_changed_since(self, after_updated: float, after_id: int, *,
                                  limit: int = 200) -> list[Escalation]:
        return escalations.changed_since(self.ledger, after_updated, after_id, limit)

    def spec_errors(self, *, limit: int = 50) -> list[SpecErrorEvent]:
        return jobs.recent_spec_errors(self.ledger, limit=limit)

    def host_count(self) -> int:
        return reads.host_count(self.ledger)

    def close(self) -> None:
        """Close the ledger handle (for a store made by ``open_store``)."""
        self.ledger.close()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(target: str | os.PathLike[str], *, retry: RetryRule | None = None,
               read_only: bool = False) -> SqlStore:
    """The store over the ledger at ``target``: a SQLite file path (created and migrated unless
    ``read_only``) or a ``postgresql://`` URL. Use it as a context manager, or ``close()`` it.

    ``retry``: the retry policy (``core.supervisor.policy.retry.RETRY``) for a store that
    ends failed attempts. Raises what ``Ledger`` raises (``SchemaTooNew``, ``NotALedger``,
    ``sqlite3.DatabaseError``)."""
    return SqlStore(Ledger(target, read_only=read_only), retry=retry)


def as_store(handle: Ledger | Store) -> Store:
    """``handle`` when it is a store already, else a ``SqlStore`` over the ledger handle (for
    callers that are given a ``Ledger`` by code not yet passing a store)."""
    return handle if isinstance(handle, SqlStore) else SqlStore(cast(Ledger, handle))

def _run(conn: Conn, run_id: int) -> Run | None:
    row = runs.get(conn, run_id)
    return None if row is None else Run.from_row(row)


def _case(conn: Conn, run_id: int) -> JudgingCase | None:
    """The judging case of ``run_id`` read through ``conn`` (a read snapshot, or the write
    transaction that just moved the run)."""
    run = _run(conn, run_id)
    if run is None:
        return None
    out = outcomes.get(conn, run_id)
    job = jobs.job_row(conn, run.job)
    # Only the retry policy's own retry: an operator's later retry must not change how this
    # attempt reads, or a replay (``eval --ledger``) would invent a retry_pending verdict.
    retry = runs.retry_queued(conn, run.lineage, run.attempt)
    prior = runs.failed_attempts_before(conn, run.lineage, run.attempt)
    before = (outcomes.escalated_kind_before(conn, run.lineage, run.attempt)
              if run.trigger == Trigger.MANUAL_RETRY else None)
    return JudgingCase(run=run, outcome=None if out is None else Outcome.from_row(out),
                       job=None if job is None else Job.from_row(job), retry_queued=retry,
                       prior_failures=int(prior), escalated_before=before)


def _write_move_verdict(conn: Conn, run_id: int, verdicts: MoveVerdicts) -> bool:
    """Write, inside the terminal move's transaction, the one of ``verdicts`` worked out for
    what the move did about a retry; False when there is none for it (judged after)."""
    if not verdicts:
        return False
    run = _run(conn, run_id)
    if run is None:
        return True
    verdict = verdicts.get(runs.retry_queued(conn, run.lineage, run.attempt))
    if verdict is None:
        return False
    _write_verdict(conn, run_id, verdict)  # False: judged concurrently, the first verdict stands
    return True


def _write_verdict(conn: Conn, run_id: int, v: VerdictWrite) -> bool:
    row = runs.get(conn, run_id)
    if row is None:
        return False
    run = Run.from_row(row)
    if not outcomes.exists(conn, run_id):
        outcomes.record(conn, run_id, state=run.state, status=run.state, reason=run.reason,
                        exit_code=run.exit_code, signal=run.signal)
    if not outcomes.set_verdict(conn, run_id, verdict=v.verdict, escalate=v.escalate, severity=v.severity,
                                kind=v.kind, reason=v.reason, silent=v.silent, judged_by=v.judged_by):
        return False  # judged concurrently: the first verdict stands
    ids = [escalations.raise_escalation(conn, job=run.job, kind=e.kind, severity=e.severity, reason=e.reason,
                                        run_id=run_id, owner=v.owner, sinks=v.sinks)[0]
           for e in v.escalations]
    if v.resolve_kinds:
        escalations.auto_resolve(conn, run.job, list(v.resolve_kinds), run_id=run_id, reason=v.resolve_reason,
                                 sinks=v.sinks, started_at=v.resolve_started_at)
    add_event(conn, actor="supervisor", kind=AuditEvent.VERDICT, run_id=run_id, job=run.job, attempt=run.attempt,
              reason=v.kind, detail={"escalate": v.escalate, "severity": v.severity, "silent": v.silent,
                                     "judged_by": v.judged_by,
                                     "escalation_id": ids[0] if v.escalate and ids else None})
    return True

