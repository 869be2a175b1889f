"""A runner loop's timed wait always ends on a cancellation, even one that comes while the
event it waits for is being set (Python 3.11's ``asyncio.wait_for`` swallowed that one, and a
runner's stop then waited for the loop's whole idle timeout: over 20 s in the suite)."""

from __future__ import annotations

import asyncio

import pytest

from core.runner.waits import wait_event


async def test_a_cancellation_that_meets_the_event_being_set_still_cancels():
    ev = asyncio.Event()
    task = asyncio.create_task(wait_event(ev, 60))
    await asyncio.sleep(0)  # the task waits on the event
    ev.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_it_says_whether_the_event_came_or_the_deadline():
    ev = asyncio.Event()
    assert await wait_event(ev, 0.01) is False
    ev.set()
    assert await wait_event(ev, 60) is True
