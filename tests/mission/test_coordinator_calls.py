"""A Claude coordinator's calls, carried out by the mission engine (fake Claude server,
no runner): a worker whose breaker is open is routed around; ask_person escalates to the
owner and the answer wakes the coordinator; closing needs a report; a scripted coordinator
that crashes is retried with backoff and stopped after repeated failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.ledger import missions as ml
from core.ledger.connection import Ledger
from core.ledger.jobs import sync_jobs
from core.mission import actions as mactions
from core.mission import engine as engine_mod
from core.mission.engine import MissionEngine
from core.spec.loader import load_dir
from core.spec.mission import load_mission_file
from core.spec.settings import load_settings
from tests.kit.fake_anthropic import FakeAnthropic, message, text, tool_results, tool_use

ROOT = Path(__file__).resolve().parents[2]
JOBS = 'name = "{n}"\ncommand = ["true"]\n'


def setup(tmp: Path, url: str = "http://127.0.0.1:9"):
    folder = tmp / "jobs"
    folder.mkdir()
    for n in ("flaky", "steady"):
        (folder / f"{n}.toml").write_text(JOBS.format(n=n))
    settings = load_settings(None, ledger=str(tmp / "wk.db"), judge={"api_key": "test", "base_url": url,
                                                                    "enabled": False})
    led = Ledger(settings.ledger)
    sync_jobs(led, load_dir(folder), actor="test")
    return settings, led


def test_an_open_breaker_routes_the_coordinator_to_another_worker(tmp_path: Path) -> None:
    def coordinator(body: dict) -> object:
        done = tool_results(body)
        if not done:
            return message(tool_use("spawn_worker", {"worker": "flaky", "task": "try"}))
        return message(tool_use("spawn_worker", {"worker": "steady", "task": "try instead"}))
    with FakeAnthropic() as fake:
        fake.handler = coordinator
        settings, led = setup(tmp_path, fake.url)
        with led:
            led.write(lambda conn: conn.execute("UPDATE jobs SET breaker_state = 'open' WHERE name = 'flaky'"))
            mid = mactions.start(led, "g", workers=["flaky", "steady"], coordinator="claude")
            eng = MissionEngine(settings)
            eng.step(led)
            eng.step(led)
            (first,) = ml.calls_of(led.conn, mid, 1)
            assert first["is_error"] and "circuit breaker is open" in first["result"]
            assert [(w["worker"], w["state"]) for w in ml.workers_of(led.conn, mid)] == [("steady", "running")]
            assert ml.get(led.conn, mid)["state"] == "working"
            eng.step(led)
            assert len(fake.requests) == 2  # waiting on the worker costs nothing


def test_ask_person_escalates_and_the_answer_wakes_the_coordinator(tmp_path: Path) -> None:
    def coordinator(body: dict) -> object:
        done = tool_results(body)
        if not done:
            return message(tool_use("close_mission"))
        if len(done) == 1:
            assert "report(text, status) before close_mission" in done[0]["content"]
            return message(tool_use("ask_person", {"question": "Which tide tables?"}))
        answer = json.loads(done[1]["content"])["answer"]
        return message(tool_use("report", {"text": f"used {answer}", "status": "success"}), tool_use("close_mission"))
    with FakeAnthropic() as fake:
        fake.handler = coordinator
        settings, led = setup(tmp_path, fake.url)
        with led:
            mid = mactions.start(led, "g", workers=["steady"], coordinator="claude", owner="ana")
            eng = MissionEngine(settings)
            eng.step(led)
            eng.step(led)
            m = ml.get(led.conn, mid)
            assert m["state"] == "waiting_person" and m["question"] == "Which tide tables?"
            esc = led.one("SELECT kind, owner, reason FROM escalations WHERE job = ?", (ml.mission_job(mid),))
            assert (esc["kind"], esc["owner"]) == ("mission_question", "ana") and "Which tide tables?" in esc["reason"]
            eng.step(led)
            assert len(fake.requests) == 2  # no call while the person has not answered
            assert not mactions.answer(led, mid + 1, "x", "ana").ok
            assert mactions.answer(led, mid, "the 2024 ones", "ana").ok
            eng.step(led)
            m = ml.get(led.conn, mid)
            assert m["state"] == "awaiting_approval" and m["report"] == "used the 2024 ones"
            assert led.one("SELECT state FROM escalations WHERE kind = 'mission_question'")["state"] == "resolved"
            assert mactions.approve(led, mid, "ana").ok  # no workers: nothing to wait for


def test_a_crashing_scripted_coordinator_is_stopped_after_repeated_errors(tmp_path: Path, monkeypatch) -> None:
    settings, led = setup(tmp_path)
    (tmp_path / "m.toml").write_text('name = "m"\ncoordinator = "scripted"\ncommand = ["python3", "-c", '
                                     '"import sys; sys.exit(3)"]\nworkers = ["steady"]\n')
    definition = load_mission_file(tmp_path / "m.toml").missions["m"]
    clock = [1000.0]
    monkeypatch.setattr(engine_mod.time, "time", lambda: clock[0])
    with led:
        mid = mactions.start(led, "g", definition=definition)
        eng = MissionEngine(settings)
        for _ in range(engine_mod.MAX_COORDINATOR_ERRORS):
            eng.step(led, now=clock[0])
            eng.step(led, now=clock[0])  # backing off: no second try at the same moment
            clock[0] += 120
        m = ml.get(led.conn, mid)
        assert m["state"] == "awaiting_approval" and "coordinator failed 5 times" in m["reason"]
        errors = [e for e in ml.events_of(led.conn, mid) if e["kind"] == "mission_coordinator_error"]
        assert len(errors) == 5 and "exited 3" in errors[0]["reason"]
        kinds = [r["kind"] for r in led.query("SELECT kind FROM escalations WHERE job = ?", (ml.mission_job(mid),))]
        assert kinds == ["mission_coordinator_failed"]


@pytest.mark.slow
def test_tail_shows_a_mission_question(tmp_path: Path) -> None:
    def coordinator(body: dict) -> object:
        return message(text("I need a decision"), tool_use("ask_person", {"question": "Ship it \x1b[2J now?"}))
    with FakeAnthropic() as fake:
        fake.handler = coordinator
        settings, led = setup(tmp_path, fake.url)
        with led:
            mid = mactions.start(led, "g", workers=["steady"], coordinator="claude", owner="ana")
            MissionEngine(settings).step(led)
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "tail", "--since", "1h", "--ledger",
                             str(settings.ledger)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env={**os.environ, "NO_COLOR": "1"})
    try:
        line = proc.stdout.readline().decode("utf-8", "replace")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    assert f"mission:{mid}" in line and "mission_question" in line and "ana" in line
    assert "Ship it \\x1b[2J now?" in line and "\x1b" not in line
