"""On PostgreSQL an escalation's acknowledge, snooze or resolve, and an outbox row's change,
made on another console (another connection), reach this console's ledger watcher at once by
LISTEN/NOTIFY, not on its next pulse (an hour here); a runner's feed, which follows only the
tables its loops read, is not woken by them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from console.messages import LedgerRead
from console.reader import LedgerThread
from console.watcher import LedgerWatcher
from core import actions
from core.ledger import dialect, wake
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf

pytestmark = pytest.mark.pg


@pytest.fixture
def url(pg_server) -> Iterator[str]:
    target = pg_server.fresh_database()
    try:
        yield target
    finally:
        dialect.close_pools()
        pg_server.drop_database(target)


class Screen:
    """Stands in for a screen of the stack: keeps what the watcher posts."""

    def __init__(self) -> None:
        self.got: list[LedgerRead] = []

    def post_message(self, message: LedgerRead) -> bool:
        self.got.append(message)
        return True


async def until(cond: Callable[[], Any], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def listeners(url: str) -> int:
    """Connections waiting in ``LISTEN`` on this server (a feed is ready once it is one)."""
    with Ledger(url) as led:
        return int(led.scalar("SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'watchkeeper-listen'"
                              " AND query = ?", (f"LISTEN {dialect.CHANNEL}",)))


async def commit(url: str, fn: Callable[[Ledger], Any]) -> Any:
    """``fn`` on another connection (the other console), committed, off the loop."""
    def run() -> Any:
        with Ledger(url) as other:
            return fn(other)
    return await asyncio.to_thread(run)


async def test_an_acknowledge_snooze_resolve_or_outbox_change_elsewhere_wakes_the_watcher_at_once(url):
    ids = cf.build(url)
    screen = Screen()
    before = await asyncio.to_thread(listeners, url)
    watcher = LedgerWatcher(url, LedgerThread(url), clock=time.time, pulse_s=3600, screens=lambda: [screen])
    task = asyncio.create_task(watcher.run())
    try:
        await until(lambda: watcher.reads >= 1)
        await until(lambda: listeners(url) > before)

        def open_of(severity: str) -> int:
            summary = watcher.facts.summary
            return -1 if summary is None else summary.open_by_severity.get(severity, 0)

        assert open_of("critical") == 1 and open_of("warning") == 1

        def woke(do: Callable[[Ledger], Any]) -> Callable[[], Any]:
            async def step() -> None:
                reads = watcher.reads
                result = await commit(url, do)
                assert getattr(result, "ok", True), result
                await until(lambda: watcher.reads > reads and screen.got[-1].committed)
            return step

        await woke(lambda led: actions.acknowledge(led, ids["esc_crit"], "bo"))()
        assert open_of("critical") == 0
        await woke(lambda led: actions.snooze(led, ids["esc_warn"], "bo", time.time() + 3600))()
        assert open_of("warning") == 0
        await woke(lambda led: actions.resolve(led, ids["esc_info"], "bo"))()
        await woke(lambda led: led.write(lambda c: c.execute(
            "INSERT INTO notifications (escalation_id, event, sink, payload, state, next_attempt_at, created_at)"
            " VALUES (?, 'opened', 'mail', '{}', 'pending', 0, 0)", (ids["esc_crit"],))))()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_runners_feed_ignores_escalation_changes_and_wakes_for_runs(url):
    ids = cf.build(url)
    woken = {"runner": 0, "console": 0}
    stop = asyncio.Event()
    before = await asyncio.to_thread(listeners, url)

    def count(who: str) -> Callable[[], None]:
        def hit() -> None:
            woken[who] += 1
        return hit

    feeds = [asyncio.create_task(wake.follow(url, count("runner"), stop=stop, tables=dialect.WAKE_TABLES)),
             asyncio.create_task(wake.follow(url, count("console"), stop=stop))]
    try:
        await until(lambda: listeners(url) >= before + 2)
        # Each feed wakes once when its LISTEN is in place (a commit before it is not missed).
        await until(lambda: woken["runner"] >= 1 and woken["console"] >= 1)
        assert woken == {"runner": 1, "console": 1}
        for n, esc in ((2, ids["esc_crit"]), (3, ids["esc_warn"])):  # both feeds hear each acknowledge
            await commit(url, lambda led, esc=esc: actions.acknowledge(led, esc, "bo"))
            await until(lambda n=n: woken["console"] >= n)
        await commit(url, lambda led: led.write(lambda c: c.execute(
            "UPDATE runs SET updated_at = updated_at WHERE id = ?", (ids["ok_run"],))))
        await until(lambda: woken["runner"] >= 2)
        assert woken["runner"] == 2  # the runs change only, never the two acknowledges before it
    finally:
        stop.set()
        await asyncio.gather(*feeds, return_exceptions=True)
