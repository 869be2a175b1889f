"""The console's Missions view: the tree (coordinator, workers with state, confidence, steps),
question and report shown literally, and the keys to answer, approve, abandon a worker and
abort, each going through core.mission (attributed, audited)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static, Tree

from console.app import ConsoleConfig, WatchkeeperApp
from console.screens.dialogs import ConfirmScreen
from console.screens.missions import AnswerScreen, MissionsScreen
from core.ledger import missions as ml
from core.ledger.connection import Ledger
from core.mission import actions as mactions
from core.vocabulary import MissionState, WorkerState
from tests.kit.console_fixtures import ESCAPES, HOSTILE
from tests.kit.pilot import TEST_REFRESH_S, screen_text

GOAL = "Summarise [bold]it[/] \x1b[2J now"
QUESTION = "Which year? [/ \x1b]52;c;ZXZpbA==\x07"


def _ledger(path: Path) -> int:
    with Ledger(path) as led:
        mid = mactions.start(led, GOAL, workers=["researcher", "writer"], coordinator="external", owner="ana")

        def tx(conn):
            a = ml.queue_worker(conn, mid, worker="researcher", task=HOSTILE[3], context=None, call_id=None,
                                spec_hash=None, actor="test")
            b = ml.queue_worker(conn, mid, worker="writer", task="write", context=None, call_id=None, spec_hash=None,
                                actor="test")
            ml.settle_worker(conn, a["id"], WorkerState.DELIVERED, actor="test", reason="ok",
                             fields={"status": "success", "confidence": 0.9, "steps_used": 3, "note": "verified"})
            ml.settle_worker(conn, b["id"], WorkerState.FAILED, actor="test", reason="no",
                             fields={"status": "failed", "error": "refusal", "note": HOSTILE[5]})
            ml.update(conn, mid, report="Raw research " + HOSTILE[4], report_status="partial", question=QUESTION)
            ml.move(conn, mid, [MissionState.WORKING], MissionState.WAITING_PERSON, actor="test")
            ml.add_call(conn, mid, 0, "call_q", "ask_person", {"question": QUESTION})
        led.write(tx)
    return mid


def make_app(path: Path) -> WatchkeeperApp:
    return WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", refresh=TEST_REFRESH_S))


async def until(pilot, cond, timeout: float = 15.0) -> None:
    import time
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        await pilot.pause(0.02)


def state(path: Path, mid: int) -> str:
    with Ledger(path) as led:
        return ml.get(led.conn, mid)["state"]


async def test_missions_view_answer_abandon_approve(tmp_path: Path) -> None:
    path = tmp_path / "wk.db"
    mid = _ledger(path)
    app = make_app(path)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await until(pilot, lambda: app.screen.__class__.__name__ == "MainScreen")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MissionsScreen) and app.screen.mission is not None)
        screen = app.screen
        tree = screen.query_one("#tree", Tree)
        await until(pilot, lambda: len(tree.root.children) == 1)
        workers = tree.root.children[0].children  # a node per worker, its figures, task and note under it
        labels = [str(n.label) for n in workers]
        figures = [str(n.children[0].label) for n in workers]
        assert "delivered" in labels[0] and "conf 0.90" in figures[0] and "steps 3" in figures[0]
        assert "failed" in labels[1]
        notes = " ".join(str(c.label) for c in workers[1].children)
        assert "note" in notes and "refusal" not in notes  # the note is shown, escaped
        labels += figures + [notes]
        body = str(screen.query_one("#body", Static).render())
        for bad in ESCAPES:
            assert bad not in body and all(bad not in lab for lab in labels)
        assert "[bold]it[/]" in body and "Which year? [/" in body and "[bold red]styled?" in body

        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, AnswerScreen))
        await pilot.press(*"2024", "enter")
        await until(pilot, lambda: state(path, mid) == "working")
        with Ledger(path) as led:
            led.write(lambda conn: ml.move(conn, mid, [MissionState.WORKING], MissionState.AWAITING_APPROVAL,
                                           actor="test"))
        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: any("cannot close" in str(n.message) for n in app._notifications))
        assert state(path, mid) == "awaiting_approval"

        tree.focus()
        await until(pilot, lambda: tree.root.children and len(tree.root.children[0].children) == 2)
        tree.move_cursor(tree.root.children[0].children[0])  # the researcher, delivered
        await pilot.press("x")
        await until(pilot, lambda: any("only a failed or running worker can be abandoned" in str(n.message)
                                       for n in app._notifications))
        assert not isinstance(app.screen, ConfirmScreen)
        tree.move_cursor(tree.root.children[0].children[1])  # the writer
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: any("abandoned by ana" in str(n.message) for n in app._notifications))
        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: state(path, mid) == "closed")
        with Ledger(path) as led:
            m = ml.get(led.conn, mid)
            assert m["decided_by"] == "ana"
            asked = [c for c in ml.calls_of(led.conn, mid) if c["call_id"] == "call_q"]
            assert asked[0]["result"]["answer"] == "2024"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, MissionsScreen))


async def test_abort_from_the_missions_view(tmp_path: Path) -> None:
    path = tmp_path / "wk.db"
    mid = _ledger(path)
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MissionsScreen) and app.screen.mission is not None)
        await pilot.press("X")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: state(path, mid) == "aborted")


# 5. missions layout -------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_missions_screen_has_the_header_and_shows_each_workers_figures_whole(tmp_path, size):
    from console.screens.missions import MissionsScreen

    path = tmp_path / "wk.db"
    _ledger(path)
    app = make_app(path)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.screen.__class__.__name__ == "MainScreen")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MissionsScreen) and app.screen.mission is not None)
        await pilot.pause(0.3)
        text = screen_text(app)
        lines = text.splitlines()
        from console.widgets.header_bar import HeaderBar

        await until(pilot, lambda: "as ana" in app.screen.query_one(HeaderBar).render().plain)  # live header
        assert "conf 0.90 · steps 3 · attempts" in text  # the worker's figures, not cut
        assert "deliveredowner" not in text.replace(" ", "") or "delivered" not in text  # no run-in panes
        assert not any("conf 0." in ln and "cost $" in ln for ln in lines)
