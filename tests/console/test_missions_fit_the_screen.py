"""The Missions view fits the terminal from its first paint: at 120 columns a worker's task
is one line (not wrapped for a narrower guess until a refresh), at 80 every word of it is
there, wrapped between words, and no line reaches under the tree's scrollbar."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Tree

from console.app import ConsoleConfig, WatchkeeperApp
from console.screens import missions as mscreen
from core.ledger import missions as ml
from core.ledger.connection import Ledger
from core.mission import actions as mactions
from core.vocabulary import WorkerState
from tests.kit.pilot import TEST_REFRESH_S, until

TASK = "collect every incident report from Q3 and list the root causes with their dates and owners"
NOTE = "verified: 14 reports, every date checked against the ticket system"


def _ledger(path: Path) -> None:
    with Ledger(path) as led:
        mid = mactions.start(led, "Summarise the quarterly incident reports into one page for the ops review",
                             workers=["researcher"], coordinator="external", owner="ana")

        def tx(conn):
            w = ml.queue_worker(conn, mid, worker="researcher", task=TASK, context=None, call_id=None,
                                spec_hash=None, actor="test")
            ml.settle_worker(conn, w["id"], WorkerState.DELIVERED, actor="test", reason="ok",
                             fields={"status": "success", "confidence": 0.9, "steps_used": 3, "note": NOTE})
        led.write(tx)


def _leaves(tree: Tree) -> list[str]:
    out = []

    def walk(node):
        for child in node.children:
            if not child.children:
                out.append(child.label.plain)
            walk(child)
    walk(tree.root)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 120])
async def test_worker_lines_fit_from_the_first_paint(tmp_path, width):
    path = tmp_path / "wk.db"
    _ledger(path)
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", refresh=TEST_REFRESH_S))
    async with app.run_test(size=(width, 30)) as pilot:
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, mscreen.MissionsScreen)
                    and any("task" in ln for ln in _leaves(app.screen.query_one("#tree", Tree))))
        tree = app.screen.query_one("#tree", Tree)
        leaves = _leaves(tree)
        room = tree.size.width - mscreen.TREE_INDENT - mscreen.SCROLLBAR
        assert all(len(ln) <= room for ln in leaves), leaves
        text = " ".join(" ".join(ln.split()) for ln in leaves)
        assert TASK in text
        assert NOTE in text
        task_lines = [ln for ln in leaves if ln.startswith("task")]
        if width == 120:
            assert task_lines == [f"task  {TASK}"]  # one line, at once
        table = app.screen.query_one("#missions", DataTable)
        goal = table.get_row_at(0)[4].plain
        assert goal.startswith("Summarise the quarterly") and len(goal) <= width - mscreen.TABLE_FIXED
