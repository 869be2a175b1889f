"""When a job is due: cron (through cronsim, in the job's timezone), intervals, one-shots.

A *slot* is the scheduled fire time of one run, Unix seconds (UTC). Its key
(``slot_key``) is part of the runs table's dedup constraint, so two runners computing the
same slot can never both insert it. Interval slots are anchored to the Unix epoch
(multiples of ``every``) for the same reason.

DST (checked against cronsim 2.8, see tests/test_schedule_dst.py): cronsim follows
cron's rules.

* Spring forward: a wall time that does not exist that day (``30 2 * * *`` in
  Europe/Berlin on 2025-03-30, when 02:00 jumps to 03:00) fires once, at the first valid
  instant after the gap: 03:00 local (CEST), 01:00 UTC. The next day is 02:30 again.
* Fall back: a wall time that occurs twice (02:30 on 2025-10-26 in Europe/Berlin) fires
  once, at the first occurrence (02:30 CEST = 00:30 UTC). Expressions with a wildcard hour
  (``*/15 * * * *``) keep firing through the repeated hour, because those are distinct
  instants.

cronsim can hand back a time *before* its start when the start lies in the second pass of
a repeated hour (it returns the first occurrence); ``next_fire`` skips such results so the
slots it yields are strictly increasing.

Default zone: a cron job without ``timezone`` uses the machine's zone — ``$TZ`` if set,
otherwise ``/etc/localtime`` (UTC when neither exists), read when the slot is computed.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim

from core.spec.model import JobSpec


def local_zone() -> tzinfo:
    """The machine's zone, the default for cron schedules: ``$TZ`` (an IANA name such as
    ``Europe/Berlin``) if set and known, else ``/etc/localtime``, else UTC.

    A real ``ZoneInfo`` is returned, not the current fixed offset, so a job without
    ``timezone`` still follows the machine's DST changes.
    """
    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    target = os.path.realpath("/etc/localtime")
    if "zoneinfo/" in target:
        try:
            return ZoneInfo(target.split("zoneinfo/", 1)[1])
        except (ZoneInfoNotFoundError, ValueError):
            pass
    try:
        with open("/etc/localtime", "rb") as fh:
            return ZoneInfo.from_file(fh, key="localtime")
    except (OSError, ValueError):
        pass
    return UTC


def zone_for(spec: JobSpec) -> tzinfo:
    """The zone a job's cron schedule (or naive one-shot ``at``) is read in."""
    return ZoneInfo(spec.timezone) if spec.timezone else local_zone()


def slot_key(ts: float) -> str:
    """Slot time → dedup key, ISO-8601 UTC with milliseconds."""
    dt = datetime.fromtimestamp(ts, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def slot_time(key: str) -> float | None:
    """Dedup key → slot time (Unix seconds): the inverse of ``slot_key``; None for a key that
    is not a slot time (``once``, ``manual:…``)."""
    try:
        return datetime.strptime(key, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    except (TypeError, ValueError):
        return None


def next_fire(spec: JobSpec, after: float) -> float | None:
    """The first slot strictly after ``after`` (Unix seconds); None when the job has no
    further scheduled slot (manual jobs; a one-shot is handled by ``once_slot``)."""
    if spec.schedule:
        start = datetime.fromtimestamp(after, tz=zone_for(spec))
        it = CronSim(spec.schedule, start)
        for _ in range(4):  # at most one repeated-hour result can precede `after`
            ts = next(it).timestamp()
            if ts > after:
                return ts
        return None
    if spec.every:
        step = float(spec.every)
        return (math.floor(after / step) + 1) * step
    return None


def once_slot(spec: JobSpec, now: float) -> tuple[str, float] | None:
    """(slot key, not_before) of a one-shot job: key ``once`` (or ``once:<at>``).

    ``now`` and ``not_before`` are Unix seconds. Without ``at`` the job is due at ``now``;
    a naive ``at`` is read in the job's ``timezone`` (default: the machine's zone). The key
    is fixed per spec, so the dedup constraint makes a one-shot run once per ``at``.
    None for jobs that are not one-shots.
    """
    if not spec.once:
        return None
    if spec.at is None:
        return "once", now
    at = spec.at if spec.at.tzinfo else spec.at.replace(tzinfo=zone_for(spec))
    return f"once:{slot_key(at.timestamp())}", at.timestamp()


@dataclass(frozen=True)
class SlotPlan:
    """What the scheduler should do for one job now (all times Unix seconds, UTC).

    ``due``: slots to queue, ascending; ``next``: the next slot after ``now`` (None: no
    schedule); ``missed``: how many slots fell in the downtime and were not queued;
    ``missed_first`` / ``missed_last``: their range (None when none were missed).
    """

    due: list[float]
    next: float | None
    missed: int = 0
    missed_first: float | None = None
    missed_last: float | None = None


def plan_slots(spec: JobSpec, last_slot: float | None, now: float, *, tolerance: float = 2.0) -> SlotPlan:
    """Slots to queue now, per ``misfire``; see ``due_slots``.

    ``tolerance``: seconds a slot may be late and still count as due now rather than
    missed. The runner passes the time since its previous scheduler tick (at least 2 s), so
    a runner that was alive but slow (a ledger lock held for seconds) never drops a slot;
    only slots that fell while no runner ran are misfires.
    """
    if not (spec.schedule or spec.every):
        return SlotPlan([], None)
    cursor = last_slot if last_slot is not None else now - tolerance
    nxt = next_fire(spec, cursor)
    missed: list[float] = []
    current: list[float] = []
    n_missed = 0
    first_missed: float | None = None
    guard = 0
    while nxt is not None and nxt <= now:
        if now - nxt <= tolerance:
            current.append(nxt)
        else:
            n_missed += 1
            first_missed = nxt if first_missed is None else first_missed
            missed.append(nxt)
            if len(missed) > 2:  # only the newest missed slot can matter
                missed.pop(0)
        nxt = next_fire(spec, nxt)
        guard += 1
        if guard > 100000:  # a year of 5-minute slots: stop walking, jump to now
            nxt = next_fire(spec, now - tolerance)
    out: list[float] = []
    last_missed = missed[-1] if missed else None
    if missed and spec.misfire == "run_once" and not current:
        out.append(missed[-1])  # the newest missed slot runs once; older ones stay missed
        n_missed -= 1
        last_missed = missed[-2] if len(missed) > 1 else None
    out.extend(current)
    if n_missed == 0:
        return SlotPlan(out, nxt)
    return SlotPlan(out, nxt, n_missed, first_missed, last_missed)


def due_slots(spec: JobSpec, last_slot: float | None, now: float) -> tuple[list[float], float | None]:
    """Slots to queue now, and the next future slot.

    ``last_slot``: the latest slot already recorded for the job (None: never scheduled, so
    nothing before ``now`` is owed). Slots missed while no runner ran (between
    ``last_slot`` and ``now``) are never replayed as a burst: ``misfire = "skip"`` drops
    them, ``"run_once"`` queues only the most recent one. The slot that falls due right
    now (at most one scheduler tick late) is always returned.

    Returns:
        (slots to insert, ascending; next slot after ``now`` or None)
    """
    plan = plan_slots(spec, last_slot, now)
    return plan.due, plan.next
