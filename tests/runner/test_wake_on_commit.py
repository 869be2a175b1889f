"""An idle runner wakes when another process commits, on both backends: `watchkeeper
trigger` from another process starts the run without any polling (the dispatcher's own bound
is IDLE_WAKE_S = 30 s, so a missed wake-up would fail the wait)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger import wake
from core.ledger.connection import Ledger
from core.ledger.runs import trigger as trigger_run
from tests.kit.harness import RunnerThread, fast_settings, terminal_runs, wait_for, write_specs


@pytest.mark.slow
def test_a_trigger_from_another_process_wakes_the_idle_runner(ledger_target, tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, 'name = "hello"\ncommand = ["echo", "hi"]\n')
    settings = fast_settings(tmp_path, ledger=ledger_target, artifacts=str(tmp_path / "art"))
    with RunnerThread(specs, settings):
        for n in (1, 2):
            res = CliRunner().invoke(cli, ["trigger", "hello", "--ledger", ledger_target])
            assert res.exit_code == 0, res.output
            done = wait_for(lambda n=n: len(terminal_runs(ledger_target, "hello")) >= n, timeout=15)
            assert done
    assert [r["state"] for r in terminal_runs(ledger_target, "hello")] == ["succeeded", "succeeded"]


@contextlib.asynccontextmanager
async def feed_on(ledger_target):
    """A ledger with job ``j`` and a feed following it: yields the event the feed sets."""
    with Ledger(ledger_target) as led:
        led.write(lambda c: c.execute("INSERT INTO jobs (name, spec, spec_hash, updated_at) VALUES ('j', '{}', 'h', 0)"))
    seen = asyncio.Event()
    stop = asyncio.Event()
    feed = asyncio.create_task(wake.follow(ledger_target, seen.set, stop=stop))
    try:
        yield seen
    finally:
        stop.set()
        await asyncio.wait_for(feed, timeout=10)


async def test_the_feed_reports_another_connections_commit(ledger_target):
    async with feed_on(ledger_target) as seen:
        await asyncio.sleep(0.5)  # the feed is listening (a wake before this is harmless)
        seen.clear()

        def commit() -> None:
            with Ledger(ledger_target) as other:
                trigger_run(other, "j", actor="test")

        for _ in range(10):  # a commit that lands before the watch starts is simply repeated
            await asyncio.to_thread(commit)
            await asyncio.wait([asyncio.ensure_future(seen.wait())], timeout=2)
            if seen.is_set():
                break
        assert seen.is_set()


async def test_the_feed_wakes_once_its_watch_is_in_place(ledger_target):
    # A commit made after the loop's last read but before the feed watches (a runner's start)
    # would otherwise wait for the loop's idle timeout: the feed wakes once when it is ready.
    async with feed_on(ledger_target) as seen:
        await asyncio.wait([asyncio.ensure_future(seen.wait())], timeout=15)
        assert seen.is_set()
