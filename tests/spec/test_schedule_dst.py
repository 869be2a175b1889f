"""`30 2 * * *` in Europe/Berlin across both 2025 DST changes: one slot per day, iterating
due_slots the way the runner does (wake at the next slot, queue what is due)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from core.spec.model import JobSpec
from core.spec.schedule import due_slots, next_fire

BERLIN = ZoneInfo("Europe/Berlin")


def _daily(**kw) -> JobSpec:
    return JobSpec(name="nightly", command="true", schedule="30 2 * * *", timezone="Europe/Berlin", **kw)


def _run_like_runner(spec: JobSpec, start: datetime, end: datetime, lateness: float = 0.7) -> list[float]:
    """Slots queued by a runner that sleeps until each next slot and wakes slightly late."""
    now = start.timestamp()
    last: float | None = None
    queued: list[float] = []
    while now < end.timestamp():
        slots, nxt = due_slots(spec, last, now)
        queued.extend(slots)
        if slots:
            last = slots[-1]
        assert nxt is not None and nxt > now
        now = nxt + lateness
    return queued


@pytest.mark.parametrize("first,last", [(date(2025, 3, 25), date(2025, 4, 2)),
                                        (date(2025, 10, 22), date(2025, 10, 30))])
def test_exactly_one_slot_per_day_across_dst(first: date, last: date):
    start = datetime.combine(first, datetime.min.time(), BERLIN)
    end = datetime.combine(last + timedelta(days=1), datetime.min.time(), BERLIN)
    slots = _run_like_runner(_daily(), start, end)
    days = [datetime.fromtimestamp(s, BERLIN).date() for s in slots]
    expected = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    assert days == expected
    assert slots == sorted(set(slots))


def test_spring_forward_runs_at_three_cest():
    # 2025-03-30 02:00 CET jumps to 03:00 CEST: 02:30 does not exist; the run is at 03:00.
    after = datetime(2025, 3, 30, 0, 0, tzinfo=BERLIN).timestamp()
    ts = next_fire(_daily(), after)
    local = datetime.fromtimestamp(ts, BERLIN)
    assert (local.hour, local.minute, local.utcoffset()) == (3, 0, timedelta(hours=2))
    assert datetime.fromtimestamp(next_fire(_daily(), ts), BERLIN) == datetime(2025, 3, 31, 2, 30, tzinfo=BERLIN)


def test_fall_back_runs_once_at_first_occurrence():
    spec = _daily()
    start = datetime(2025, 10, 26, 0, 0, tzinfo=BERLIN)
    slots = _run_like_runner(spec, start, datetime(2025, 10, 27, 0, 0, tzinfo=BERLIN))
    assert len(slots) == 1
    local = datetime.fromtimestamp(slots[0], BERLIN)
    assert (local.hour, local.minute, local.utcoffset()) == (2, 30, timedelta(hours=2))


@pytest.mark.parametrize("minutes_into_repeat", [0, 10, 29, 30, 45])
def test_next_fire_never_goes_back_inside_the_repeated_hour(minutes_into_repeat: int):
    # 02:xx CET (second pass of the repeated hour): cronsim alone would answer 02:30 CEST,
    # an hour in the past; next_fire must move on to the next day.
    after = datetime(2025, 10, 26, 0, 0, tzinfo=ZoneInfo("UTC")).timestamp() + 3600 + minutes_into_repeat * 60
    assert datetime.fromtimestamp(after, BERLIN).fold == 1
    ts = next_fire(_daily(), after)
    assert ts > after
    assert datetime.fromtimestamp(ts, BERLIN).date() == date(2025, 10, 27)


def test_fresh_runner_started_in_repeated_hour_queues_nothing_old():
    now = datetime(2025, 10, 26, 1, 45, tzinfo=ZoneInfo("UTC")).timestamp()  # 02:45 CET, second pass
    assert datetime.fromtimestamp(now, BERLIN).fold == 1
    for misfire in ("skip", "run_once"):
        slots, nxt = due_slots(_daily(misfire=misfire), None, now)
        assert slots == []
        assert nxt > now
