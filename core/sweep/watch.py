"""Who watches the runner: the runner gap, seen live by an outside watcher or after the fact.

A process cannot report its own death, and that includes the runner. Two paths make sure a
dead runner is always reported:

* ``watch_once`` — what ``watchkeeper sweep`` (from cron or a systemd timer) does beside its
  orphan pass: open the ``runner_gap`` escalation when no runner is alive while one is
  expected (``core.ledger.runners.check_gap``), reopen snoozes that ended, and deliver due
  notifications through the configured sinks itself, so the owner hears of a dead runner
  with nothing else alive.
* ``record_past_gap`` — what a starting runner does: when the runner before it vanished
  without a clean stop, open (or update) one ``runner_gap`` escalation saying how long the
  gap lasted, from when to when, and which scheduled slots fell in it and whether each was
  skipped or runs late (per the job's ``misfire`` policy). Its own heartbeat then resolves it
  (``supervisor.periodic``); the reason and the escalation's events keep the record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.ledger.connection import Ledger, StorageError
from core.ledger.sql_store import SqlStore
from core.spec import schedule
from core.spec.model import JobSpec
from core.supervisor import notify, supervisor

log = logging.getLogger(__name__)

#: Longest time one ``watch_once`` spends delivering notifications, seconds.
DELIVERY_BUDGET_S = 10.0
#: Slots listed per job in a gap record (the count stays exact).
MAX_SLOTS_LISTED = 20


@dataclass
class WatchReport:
    """What one ``watch_once`` did: ``gap`` is ``"opened"``, ``"resolved"`` or None;
    ``reopened``: escalation ids whose snooze ended; ``sent`` / ``retried`` / ``failed``:
    notifications (counts); ``errors``: one line per step that failed (retried next pass)."""

    gap: str | None = None
    reopened: list[int] = field(default_factory=list)
    sent: int = 0
    retried: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"gap": self.gap, "reopened": self.reopened, "sent": self.sent, "retried": self.retried,
                "failed": self.failed, "errors": self.errors}


def watch_once(ledger: Ledger, settings: Any, *, budget_s: float = DELIVERY_BUDGET_S) -> WatchReport:
    """The outside watcher's duties after a sweep pass: runner gap (owned by
    ``settings.runner_owner`` unless the gone runner recorded its own), snooze expiry,
    owed notifications (open escalations opened by a process without sinks), repeats of
    unacknowledged criticals, then
    delivery of due ``notifications`` to ``settings.notify`` for at most about ``budget_s``
    seconds. Never raises for ledger or sink errors: each step's error is listed and the
    next step still runs."""
    out = WatchReport()
    sinks = list(getattr(settings, "notify", None) or [])
    try:
        out.gap = supervisor.check_runner_gap(ledger, sinks=sinks, owner=settings.runner_owner)
    except StorageError as exc:
        out.errors.append(f"runner gap check: {exc}")
    try:
        SqlStore(ledger).check_hosts(sinks=sinks, owner=settings.runner_owner, actor="sweep")
    except StorageError as exc:
        out.errors.append(f"host check: {exc}")
    try:
        out.reopened = SqlStore(ledger).expire_snoozes(sinks=sinks)
    except StorageError as exc:
        out.errors.append(f"snooze expiry: {exc}")
    try:
        notify.enqueue_owed(ledger, sinks)
    except StorageError as exc:
        out.errors.append(f"owed notifications: {exc}")
    try:
        notify.repeat_unacknowledged(ledger, sinks)
    except StorageError as exc:
        out.errors.append(f"repeat of unacknowledged criticals: {exc}")
    try:
        stats = notify.deliver_due(ledger, sinks, budget_s=budget_s)
        out.sent, out.retried, out.failed = stats.sent, stats.retried, stats.failed
    except StorageError as exc:
        out.errors.append(f"notification delivery: {exc}")
    return out


#: Seconds a slot may be late at the scheduler's first tick and still run (its least
#: tolerance, ``core.runner.scheduler``): such a slot is run, not skipped.
FIRST_TICK_TOLERANCE_S = 2.0


def slots_in_gap(specs: Iterable[JobSpec], since: float, until: float,
                 last_slots: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """For each scheduled job (cron ``schedule`` or ``every``), the slots that fell in the gap
    and were not run, as the scheduler's ``misfire_skipped`` event counts them: after the
    job's newest queued slot (``last_slots``, ``core.ledger.queue.last_scheduled_slots``;
    slots already queued ran or were judged) or ``since`` when later, and more than
    ``FIRST_TICK_TOLERANCE_S`` before ``until`` (a later one is due at the new runner's first
    tick and runs). Unix seconds throughout. Each entry: ``{"job", "count", "slots": [ISO UTC,
    the newest MAX_SLOTS_LISTED, oldest first], "truncated": bool (count > len(slots)),
    "policy", "outcome"}``; with ``misfire = "run_once"`` the newest missed slot runs late and
    is not counted. Jobs with no such slot are left out; sorted by job name."""
    out = []
    last_slots = last_slots or {}
    for spec in sorted(specs, key=lambda s: s.name):
        if not (spec.schedule or spec.every):
            continue
        cursor = max(since, last_slots.get(spec.name, since))
        missed: list[float] = []
        count = 0
        nxt = schedule.next_fire(spec, cursor)
        while nxt is not None and until - nxt > FIRST_TICK_TOLERANCE_S and count < 100000:
            count += 1
            missed.append(nxt)
            if len(missed) > MAX_SLOTS_LISTED + 1:
                missed.pop(0)
            nxt = schedule.next_fire(spec, nxt)
        due_now = nxt is not None and nxt <= until
        late = spec.misfire == "run_once" and count > 0 and not due_now
        if late:
            missed.pop()  # the newest missed slot runs late once: not skipped
            count -= 1
            outcome = "skipped; the newest runs late once"
        else:
            outcome = "skipped"
        if not count:
            continue
        listed = missed[-MAX_SLOTS_LISTED:]
        out.append({"job": spec.name, "count": count, "slots": [schedule.slot_key(t) for t in listed],
                    "truncated": count > len(listed), "policy": spec.misfire, "outcome": outcome})
    return out


def record_past_gap(ledger: Ledger, settings: Any, *, runner_id: str, started_at: float,
                    specs: Iterable[JobSpec]) -> int | None:
    """At runner start (``runner_id`` started at ``started_at``, Unix seconds): if the runner
    before it vanished without a clean stop, record the gap as one ``runner_gap`` escalation
    (opened, or the open one updated) with the slots of ``specs`` that fell in it. Returns
    the escalation id, or None when there was no gap. Raises ``StorageError`` when the
    write failed (the caller logs it; the gap stays visible through ``runner_gap``)."""
    store = SqlStore(ledger)
    gap = store.past_runner_gap(runner_id=runner_id, started_at=started_at)
    if gap is None:
        return None
    slots = slots_in_gap(specs, gap.since, gap.until, last_slots=store.last_scheduled_slots())
    sinks = list(getattr(settings, "notify", None) or [])
    esc_id = store.record_runner_gap(gap, runner_id=runner_id, slots=slots, sinks=sinks, owner=settings.runner_owner)
    log.warning("no runner ran for %.0fs before this one (runner %s vanished); recorded as escalation %s",
                gap.seconds, gap.previous.id, esc_id)
    return int(esc_id)
