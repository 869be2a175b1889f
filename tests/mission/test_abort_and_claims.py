"""Abort mid-mission keeps every artifact and leaves no process; a worker whose claimed
delivery fails verification is never counted as delivered. Real runner, fake Claude."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from core.ledger import missions as ml
from core.ledger.connection import Ledger
from core.mission import actions as mactions
from tests.kit.fake_anthropic import FakeAnthropic, message, tool_names, tool_results, tool_use
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs

pytestmark = pytest.mark.slow

JOBS = """
[[job]]
name = "slow"
command = ["python3", "-c", "import os, time; os.makedirs('out', exist_ok=True); open('out/partial.txt', 'w').write('half'); print('started', flush=True); time.sleep(120)"]
timeout = "5m"

[[job]]
name = "claimer"
command = ["python3", "-c", "import json, os; json.dump({'status': 'success', 'result': 'report written', 'artifacts': ['out/report.md'], 'confidence': 0.99}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))"]
timeout = "30s"
"""


def one_worker(worker: str):
    def handler(body: dict) -> object:
        assert "spawn_worker" in tool_names(body)
        results = tool_results(body)
        if not results:
            return message(tool_use("spawn_worker", {"worker": worker, "task": "do it"}))
        return message(tool_use("report", {"text": f"worker said: {results[0]['content']}", "status": "failed"}),
                       tool_use("close_mission"))
    return handler


def _mission_state(db: Path, mid: int) -> str:
    return query(db, "SELECT state FROM missions WHERE id = ?", (mid,))[0]["state"]


def test_abort_mid_mission_kills_workers_and_keeps_artifacts(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.handler = one_worker("slow")
        write_specs(tmp_path / "jobs", JOBS)
        settings = fast_settings(tmp_path, judge={"api_key": "test", "base_url": fake.url, "enabled": False})
        db = settings.ledger
        with RunnerThread(tmp_path / "jobs", settings):
            with Ledger(db) as led:
                mid = mactions.start(led, "slow work", workers=["slow"], coordinator="claude")
            run = wait_for(lambda: next(iter(query(db, "SELECT * FROM runs WHERE job = 'slow' AND state = 'running'"
                                                       " AND pid IS NOT NULL")), None), timeout=30)
            out = tmp_path / "jobs" / "out" / "partial.txt"
            wait_for(out.exists)
            with Ledger(db) as led:
                res = mactions.abort(led, mid, "ana")
                assert res.ok and "artifacts kept" in res.message
                again = mactions.abort(led, mid, "bob")
                assert not again.ok and "already aborted by ana" in again.message
            wait_for(lambda: not psutil.pid_exists(run["pid"]) or psutil.Process(run["pid"]).status() == "zombie")
            wait_for(lambda: query(db, "SELECT state FROM runs WHERE id = ?", (run["id"],))[0]["state"] == "abandoned")
        assert _mission_state(db, mid) == "aborted"
        assert out.read_text() == "half"
        art = Path(query(db, "SELECT artifacts_dir FROM runs WHERE id = ?", (run["id"],))[0]["artifacts_dir"])
        assert (art / "stdout.log").read_text().startswith("started")
        assert (art / "mission_input.json").exists()
        with Ledger(db) as led:
            (w,) = ml.workers_of(led.conn, mid)
            assert w["state"] == "abandoned" and w["abandoned_by"] == "ana"
            assert len(fake.requests) == 1  # the coordinator was never woken after the abort


def test_a_claim_that_fails_verification_is_never_delivered(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.handler = one_worker("claimer")
        write_specs(tmp_path / "jobs", JOBS)
        settings = fast_settings(tmp_path, judge={"api_key": "test", "base_url": fake.url, "enabled": False})
        db = settings.ledger
        with RunnerThread(tmp_path / "jobs", settings):
            with Ledger(db) as led:
                mid = mactions.start(led, "claim things", workers=["claimer"], coordinator="claude")
            wait_for(lambda: _mission_state(db, mid) == "awaiting_approval", timeout=30)
        with Ledger(db) as led:
            (w,) = ml.workers_of(led.conn, mid)
            assert w["state"] == "failed" and w["status"] == "success"  # it claimed success...
            assert "verification_failed" in w["note"]                    # ...which did not verify
            kinds = [e["kind"] for e in ml.events_of(led.conn, mid)]
            assert "mission_worker_delivered" not in kinds and "mission_worker_failed" in kinds
            told = tool_results(fake.requests[-1])[0]
            assert told["is_error"] and json.loads(told["content"])["state"] == "failed"
            assert not mactions.approve(led, mid, "ana").ok
