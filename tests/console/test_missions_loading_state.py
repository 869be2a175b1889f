"""The Missions view says it is loading until its first read of the ledger returns: never
"no mission" while a mission is still being read (a new user saw "▶ no mission" for seconds
before the mission appeared). "no mission" is shown once a read has found none."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from textual.widgets import Tree

from console.app import WatchkeeperApp
from console.screens import missions
from console.screens.missions import LOADING, MissionsScreen
from core.ledger.connection import Ledger
from core.mission import actions as mactions
from tests.kit.pilot import loaded, make_app, until

pytestmark = pytest.mark.slow


def _tree_label(app: WatchkeeperApp) -> str:
    return str(app.screen.query_one("#tree", Tree).root.label)


@pytest.mark.parametrize("with_mission", [True, False])
async def test_loading_until_the_first_read_then_the_mission_or_none(tmp_path: Path, with_mission: bool,
                                                                     monkeypatch) -> None:
    path = tmp_path / "wk.db"
    with Ledger(path) as led:
        if with_mission:
            mactions.start(led, "Summarise the logs", workers=["researcher"], coordinator="external", owner="ana")
    app = make_app(path)
    release = threading.Event()
    read = missions._read

    def slow_read(*args):  # a slow ledger, a busy machine: the view's reads wait
        release.wait(30)
        return read(*args)

    monkeypatch.setattr(missions, "_read", slow_read)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        try:
            # pilot.pause waits for the screen to go idle, which it does not while its read
            # is held: plain sleeps until the reads are released.
            app.action_missions()  # what `m` does
            for _ in range(100):
                await asyncio.sleep(0.05)
                if isinstance(app.screen, MissionsScreen) and app.screen.is_mounted:
                    break
            assert isinstance(app.screen, MissionsScreen)
            for _ in range(10):
                await asyncio.sleep(0.05)
                assert _tree_label(app) == LOADING
        finally:
            release.set()
        if with_mission:
            await until(pilot, lambda: _tree_label(app).startswith("mission "))
        else:
            await until(pilot, lambda: _tree_label(app) == "no mission")
