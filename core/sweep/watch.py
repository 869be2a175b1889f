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

from core.ledger import escalations, runners
from core.ledger.connection import Ledger, StorageError
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
        out.reopened = escalations.expire_snoozes(ledger, sinks=sinks)
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


def slots_in_gap(specs: Iterable[JobSpec], since: float, until: float) -> list[dict[str, Any]]:
    """For each scheduled job (cron ``schedule`` or ``every``), the slots strictly after
    ``since`` and at most ``until`` (Unix seconds), with what the misfire policy does to
    them: ``{"job", "count", "slots": [ISO UTC, at most MAX_SLOTS_LISTED, newest last],
    "policy", "outcome"}``. Jobs with no slot in the gap are left out; sorted by job name."""
    out = []
    for spec in sorted(specs, key=lambda s: s.name):
        if not (spec.schedule or spec.every):
            continue
        slots: list[float] = []
        count = 0
        nxt = schedule.next_fire(spec, since)
        while nxt is not None and nxt <= until and count < 100000:
            count += 1
            slots.append(nxt)
            if len(slots) > MAX_SLOTS_LISTED:
                slots.pop(0)
            nxt = schedule.next_fire(spec, nxt)
        if not count:
            continue
        if spec.misfire == "run_once":
            outcome = "run late once (the newest)" + (f", {count - 1} skipped" if count > 1 else "")
        else:
            outcome = "skipped"
        out.append({"job": spec.name, "count": count, "slots": [schedule.slot_key(t) for t in slots],
                    "policy": spec.misfire, "outcome": outcome})
    return out


def record_past_gap(ledger: Ledger, settings: Any, *, runner_id: str, started_at: float,
                    specs: Iterable[JobSpec]) -> int | None:
    """At runner start (``runner_id`` started at ``started_at``, Unix seconds): if the runner
    before it vanished without a clean stop, record the gap as one ``runner_gap`` escalation
    (opened, or the open one updated) with the slots of ``specs`` that fell in it. Returns
    the escalation id, or None when there was no gap. Raises ``StorageError`` when the
    write failed (the caller logs it; the gap stays visible through ``runner_gap``)."""
    gap = runners.past_gap(ledger, runner_id=runner_id, started_at=started_at)
    if gap is None:
        return None
    slots = slots_in_gap(specs, gap.since, gap.until)
    sinks = list(getattr(settings, "notify", None) or [])
    esc_id = ledger.write(lambda conn: runners.record_gap_after(
        conn, gap, runner_id=runner_id, slots=slots, sinks=sinks, owner=settings.runner_owner))
    log.warning("no runner ran for %.0fs before this one (runner %s vanished); recorded as escalation %s",
                gap.seconds, gap.previous["id"], esc_id)
    return int(esc_id)
