"""A coordinator that loops forever is stopped by its budget (turns, tokens), through the fake
Claude server: the program writes a partial report, escalates, and waits for a person."""

from __future__ import annotations

from pathlib import Path

from core.ledger import missions as ml
from core.ledger.connection import Ledger
from core.mission import actions as mactions
from core.mission.engine import MissionEngine
from core.spec.settings import load_settings
from tests.kit.fake_anthropic import FakeAnthropic, message, text, tool_use


def _settings(tmp: Path, url: str):
    return load_settings(None, ledger=str(tmp / "wk.db"), judge={"api_key": "test", "base_url": url, "enabled": False})


def _drive(engine: MissionEngine, led: Ledger, mid: int, limit: int = 50) -> dict:
    for _ in range(limit):
        engine.step(led)
        m = ml.get(led.conn, mid)
        if m["state"] != "planning":
            return m
    raise AssertionError("mission still planning")


def test_a_coordinator_that_never_closes_stops_at_its_turn_budget(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.handler = lambda body: message(text("one more look"), tool_use("report", {"text": "draft so far"}))
        settings = _settings(tmp_path, fake.url)
        with Ledger(settings.ledger) as led:
            mid = mactions.start(led, "loop forever", workers=["nobody"], coordinator="claude",
                                 budget={"turns": 4}, owner="ana")
            m = _drive(MissionEngine(settings), led, mid)
            assert m["state"] == "awaiting_approval"
            assert m["turns"] == 4 and len(fake.requests) == 4
            assert "turn budget exhausted" in m["reason"]
            assert m["report"] == "draft so far"  # the coordinator's own draft is kept
            esc = led.query("SELECT kind, owner, state FROM escalations WHERE job = ?", (ml.mission_job(mid),))
            assert [(e["kind"], e["owner"], e["state"]) for e in esc] == [("mission_budget_exhausted", "ana", "open")]
            kinds = [e["kind"] for e in ml.events_of(led.conn, mid)]
            assert kinds.count("mission_turn") == 4 and kinds[0] == "mission_started"
            # nothing more is spent once stopped
            MissionEngine(settings).step(led)
            assert len(fake.requests) == 4
            assert mactions.approve(led, mid, "ana").ok
            assert ml.get(led.conn, mid)["state"] == "closed"


def test_a_token_budget_stops_a_chatty_coordinator(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.handler = lambda body: message(text("thinking"), usage=(400, 200))
        settings = _settings(tmp_path, fake.url)
        with Ledger(settings.ledger) as led:
            mid = mactions.start(led, "chat", workers=["nobody"], coordinator="claude",
                                 budget={"turns": 100, "tokens": 1500})
            m = _drive(MissionEngine(settings), led, mid)
            assert m["state"] == "awaiting_approval" and m["tokens"] == 1800 and m["turns"] == 3
            assert "token budget exhausted" in m["reason"]
            assert m["report_status"] == "failed" and "The coordinator stopped" in m["report"]
            # every turn after the first told it to use its tools (no silent loop)
            last = fake.requests[-1]["messages"][-1]["content"][0]["text"]
            assert "without a tool call" in last
