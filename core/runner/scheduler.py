"""The scheduler: turns job schedules into queued runs, one slot at a time.

It keeps each scheduled job's next due time (Unix seconds) in a heap, so a tick touches
only the jobs that are due and an idle runner costs the same with 1 job or 1,000: the
runner sleeps until ``tick`` says the next slot is due (or a spec changes). The slots
already queued are read from the ledger once (``core.ledger.queue.last_scheduled_slots``)
and remembered afterwards.

``tick(now)`` is synchronous and takes the time as an argument, so unit tests drive it with
a fake clock.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Mapping

from core.ledger.store import Store
from core.runner.failures import FailureLog
from core.spec import schedule
from core.spec.loader import LoadedJob
from core.spec.model import JobSpec
from core.vocabulary import AuditEvent

log = logging.getLogger(__name__)

#: Longest sleep between two ticks, seconds. A bound, not a poll: it only matters when the
#: wall clock jumps (suspend, NTP step), since due times are wall-clock instants.
MAX_SLEEP_S = 30.0
#: A one-shot job is queued this many seconds before its ``at`` (the dispatcher still
#: waits for ``not_before``).
ONCE_LEAD_S = 0.5
#: After a tick failed for a job (a ledger error), it is tried again this many seconds later.
RETRY_S = 1.0
#: A one-shot job that fell due while paused is held; the scheduler asks again this often
#: (seconds) whether it was resumed (the resume may come from another process).
PAUSED_RECHECK_S = 5.0


class Scheduler:
    """Queues the due slots of ``jobs`` (``{name: LoadedJob}``) in the ledger.

    Args:
        store: gives the calling thread's store (``core.ledger.store.Store``; a tick runs in
            a pool thread, and its writes join the runner's group commits).
        actor: who the events name (``runner:<id>``).
        on_queued: called with each new run id (the runner wakes its dispatcher).
    """

    def __init__(self, *, store: Callable[[], Store], actor: str,
                 on_queued: Callable[[int], None] | None = None) -> None:
        self._store = store
        self.actor = actor
        self.on_queued = on_queued
        self.jobs: Mapping[str, LoadedJob] = {}
        self._last_slot: dict[str, float] | None = None  # newest queued (or skipped) slot per job
        self._heap: list[tuple[float, str]] = []
        self._due_at: dict[str, float] = {}  # the live heap entry per job (older ones are stale)
        # set_jobs may run on the loop while a tick runs in a pool thread: a generation
        # count (not a flag a finishing rebuild could clear) makes the next tick rebuild.
        self._generation = 0
        self._built = -1
        self._expected: float | None = None  # when the previous tick asked to be woken
        self.failures = FailureLog(log)  # a full disk fails every job every tick: one line per kind

    def set_jobs(self, jobs: Mapping[str, LoadedJob]) -> None:
        """New specs (startup or reload): every job's due time is recomputed at the next tick."""
        self.jobs = jobs
        self._generation += 1

    def tick(self, now: float) -> float:
        """Queue every slot due at ``now`` (Unix seconds); returns when to tick next (Unix
        seconds, at most ``MAX_SLEEP_S`` ahead). Ledger errors of one job are logged and that
        job is retried ``RETRY_S`` later; the others go on."""
        # Lateness up to the time since this tick was due (+1 s) is "due now", not a misfire:
        # a runner that was alive but slow (a ledger lock held for seconds) owes the slot.
        tolerance = 2.0 if self._expected is None else max(2.0, now - self._expected + 1.0)
        if self._last_slot is None:
            self._last_slot = self._store().last_scheduled_slots()
        if self._built != self._generation:
            self._rebuild(now, tolerance)
        while self._heap and self._heap[0][0] <= now:
            at, name = heapq.heappop(self._heap)
            if self._due_at.get(name) != at:
                continue  # stale entry: the job was rescheduled or removed
            del self._due_at[name]
            lj = self.jobs.get(name)
            if lj is None:
                continue
            try:
                nxt = self._tick_job(lj.spec, now, tolerance)
                self.failures.ok(f"scheduling {name}")
            except Exception as exc:
                self.failures.failed(f"scheduling {name}", exc)
                nxt = now + RETRY_S
            if nxt is not None:
                self._push(name, nxt)
        wake = min(self._heap[0][0], now + MAX_SLEEP_S) if self._heap else now + MAX_SLEEP_S
        self._expected = max(wake, now)
        return wake

    def next_due(self) -> float | None:
        """The earliest due time in the heap (Unix seconds), None when no job is scheduled."""
        while self._heap and self._due_at.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    # -- internals -----------------------------------------------------------------------
    def _push(self, name: str, at: float) -> None:
        self._due_at[name] = at
        heapq.heappush(self._heap, (at, name))

    def _rebuild(self, now: float, tolerance: float) -> None:
        generation, jobs = self._generation, self.jobs
        self._heap.clear()
        self._due_at.clear()
        for name, lj in jobs.items():
            at = self._first_due(lj.spec, now, tolerance)
            if at is not None:
                self._push(name, at)
        self._built = generation

    def _first_due(self, spec: JobSpec, now: float, tolerance: float) -> float | None:
        if spec.once:
            slot = schedule.once_slot(spec, now)
            return None if slot is None else max(now, slot[1] - ONCE_LEAD_S)
        if not (spec.schedule or spec.every):
            return None
        assert self._last_slot is not None
        last = self._last_slot.get(spec.name)
        nxt = schedule.next_fire(spec, last if last is not None else now - tolerance)
        return None if nxt is None else nxt

    def _tick_job(self, spec: JobSpec, now: float, tolerance: float) -> float | None:
        """Queue what is due for one job; returns its next due time (None: never again)."""
        assert self._last_slot is not None
        if spec.once:
            slot = schedule.once_slot(spec, now)
            if slot is not None:
                if slot[1] > now + ONCE_LEAD_S:
                    return slot[1] - ONCE_LEAD_S
                if self._queue(spec, slot[0], slot[1], "schedule", now) is None and self._paused(spec.name):
                    return now + PAUSED_RECHECK_S  # held while paused: it runs once resumed
            return None  # queued (or already there): a one-shot is due again only after a reload
        last = self._last_slot.get(spec.name)
        plan = schedule.plan_slots(spec, last, now, tolerance=tolerance)
        if plan.missed:
            self._record_misfire(spec, plan)
        due = plan.due
        if len(due) > 1:
            # Several slots fell due during one stall (a ledger lock held for seconds):
            # run the newest once, record the others — never a burst of catch-up runs.
            self._record_coalesced(spec, due[:-1], due[-1])
            due = due[-1:]
        for ts in due:
            trigger = "schedule" if now - ts <= tolerance else "misfire"
            self._queue(spec, schedule.slot_key(ts), ts, trigger, now)
        marks = [x for x in (last, plan.missed_last, *plan.due) if x is not None]
        self._last_slot[spec.name] = max(marks) if marks else now - tolerance
        return schedule.next_fire(spec, self._last_slot[spec.name])

    def _paused(self, name: str) -> bool:
        job = self._store().job(name)
        return job is not None and job.paused_at is not None

    def _queue(self, spec: JobSpec, slot: str, not_before: float, trigger: str, now: float) -> int | None:
        run_id = self._store().queue_slot(spec, slot, not_before, trigger, actor=self.actor, now=now)
        if run_id is not None and self.on_queued is not None:
            self.on_queued(run_id)
        return run_id

    def _record_coalesced(self, spec: JobSpec, skipped: list[float], kept: float) -> None:
        self._store().record_event(
            actor=self.actor, kind=AuditEvent.SKIPPED_LATE, job=spec.name,
            reason=f"{len(skipped)} slot(s) fell due while the runner was stalled; the newest runs once",
            detail={"slots": [schedule.slot_key(t) for t in skipped[:100]], "kept": schedule.slot_key(kept)})

    def _record_misfire(self, spec: JobSpec, plan: schedule.SlotPlan) -> None:
        """Slots that fell while no runner ran are skipped, never silently."""
        self._store().record_event(
            actor=self.actor, kind=AuditEvent.MISFIRE_SKIPPED, job=spec.name,
            reason=f"{plan.missed} slot(s) missed while no runner ran (misfire={spec.misfire})",
            detail={"missed": plan.missed, "first": schedule.slot_key(plan.missed_first or 0),
                    "last": schedule.slot_key(plan.missed_last or plan.missed_first or 0),
                    "policy": spec.misfire})
