"""Waiting for an ``asyncio.Event`` with a deadline, in a way a cancellation always ends.

Python 3.11's ``asyncio.wait_for`` can swallow a cancellation that arrives while the awaited
event is being set (CPython gh-86296, fixed in 3.12 by rebuilding ``wait_for`` on
``asyncio.timeout``): the cancelled task gets the event's result instead of ``CancelledError``
and goes on waiting. A runner loop hit by it kept the runner's stop waiting for up to
``MISSION_IDLE_S`` (seen as a stop that took over 20 s in the suite). ``asyncio.timeout``
(3.11) counts cancellations itself and never loses one.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait until ``event`` is set or ``seconds`` (monotonic, ≥ 0) have passed. Returns True
    when the event was set, False at the deadline. A cancellation is raised as
    ``asyncio.CancelledError``, always."""
    try:
        async with asyncio.timeout(max(0.0, seconds)):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True
