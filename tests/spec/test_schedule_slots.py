"""Interval anchoring, one-shots, misfire after downtime, default zone."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from core.spec.model import JobSpec
from core.spec.schedule import due_slots, local_zone, next_fire, once_slot, slot_key, zone_for


def test_every_30s_slots_are_anchored_to_the_epoch():
    spec = JobSpec(name="j", command="true", every="30s")
    assert next_fire(spec, 1_000_000_007.5) == 1_000_000_020.0
    assert next_fire(spec, 1_000_000_020.0) == 1_000_000_050.0  # strictly after
    # two runners computing from different instants agree on the slot
    assert next_fire(spec, 1_000_000_001.0) == next_fire(spec, 1_000_000_019.9)


def test_every_slot_due_now_is_returned_once():
    spec = JobSpec(name="j", command="true", every="30s")
    slots, nxt = due_slots(spec, None, 1_000_000_020.5)
    assert slots == [1_000_000_020.0] and nxt == 1_000_000_050.0
    again, _ = due_slots(spec, slots[-1], 1_000_000_021.0)
    assert again == []


@pytest.mark.parametrize("misfire,expected_count", [("skip", 0), ("run_once", 1)])
@pytest.mark.parametrize("schedule", [{"every": "1m"}, {"schedule": "*/5 * * * *", "timezone": "UTC"}])
def test_downtime_never_bursts(misfire: str, expected_count: int, schedule: dict):
    spec = JobSpec(name="j", command="true", misfire=misfire, **schedule)
    last = datetime(2025, 5, 1, 12, 0, tzinfo=UTC).timestamp()
    now = last + 3 * 3600 + 17  # runner was down for three hours: dozens of slots missed
    slots, nxt = due_slots(spec, last, now)
    assert len(slots) == expected_count
    if slots:
        assert slots[0] < now and slots[0] == max(s for s in slots)
        assert now - slots[0] < 300  # the newest missed slot, not an old one
    assert nxt > now
    # the next call after queuing owes nothing more
    if slots:
        assert due_slots(spec, slots[-1], now)[0] == []


def test_downtime_with_a_slot_due_right_now_queues_only_that_one():
    spec = JobSpec(name="j", command="true", every="1m", misfire="run_once")
    last = 1_700_000_040.0 - 600
    slots, _ = due_slots(spec, last, 1_700_000_040.5)
    assert slots == [1_700_000_040.0]


def test_once_without_at_is_due_now_and_keyed_once():
    spec = JobSpec(name="j", command="true", once=True)
    assert once_slot(spec, 123.0) == ("once", 123.0)
    assert due_slots(spec, None, 123.0) == ([], None)
    assert next_fire(spec, 123.0) is None


def test_once_with_at_uses_the_given_time_and_zone():
    spec = JobSpec(name="j", command="true", once=True, at="2025-06-01T10:00:00", timezone="Europe/Berlin")
    key, not_before = once_slot(spec, 0.0)
    assert not_before == datetime(2025, 6, 1, 8, 0, tzinfo=UTC).timestamp()
    assert key == "once:" + slot_key(not_before) == "once:2025-06-01T08:00:00.000Z"


def test_manual_job_has_no_slots():
    spec = JobSpec(name="j", command="true")
    assert once_slot(spec, 1.0) is None and due_slots(spec, None, 1.0) == ([], None)


def test_default_zone_is_the_machine_zone_from_tz(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    spec = JobSpec(name="j", command="true", schedule="0 9 * * *")
    ts = next_fire(spec, datetime(2024, 12, 31, 12, 0, tzinfo=UTC).timestamp())
    assert datetime.fromtimestamp(ts, UTC) == datetime(2025, 1, 1, 0, 0, tzinfo=UTC)  # 09:00 JST


def test_default_zone_follows_dst_like_an_explicit_zone(monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    assert zone_for(JobSpec(name="j", command="true", schedule="30 2 * * *")) == ZoneInfo("Europe/Berlin")
    implicit = JobSpec(name="j", command="true", schedule="30 2 * * *")
    explicit = JobSpec(name="j", command="true", schedule="30 2 * * *", timezone="Europe/Berlin")
    after = datetime(2025, 3, 1, tzinfo=UTC).timestamp()  # winter, slots run into summer time
    for _ in range(60):
        a, b = next_fire(implicit, after), next_fire(explicit, after)
        assert a == b
        after = a


def test_unknown_tz_falls_back_without_crashing(monkeypatch):
    monkeypatch.setenv("TZ", "Not/AZone")
    assert local_zone() is not None
