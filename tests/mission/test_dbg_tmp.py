"""A mission end to end through the fake Claude server: the coordinator plans, three agent
workers run as real runs (one rate-limited once, one refusing for good), the coordinator
reports the degraded result, and it closes only after a person abandons the failed worker
and approves the report."""

from __future__ import annotations

import json
import pathlib
from pathlib import Path

import pytest

from core.ledger import missions as ml
from core.ledger.connection import Ledger
from core.mission import actions as mactions
from tests.kit.fake_anthropic import (
    FakeAnthropic,
    message,
    rate_limited,
    text,
    tool_names,
    tool_results,
    tool_use,
)
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs

pytestmark = pytest.mark.slow

AGENT = """
[[job]]
name = "{name}"
kind = "agent"
timeout = "30s"
[job.agent]
system = "ROLE {name}"
task = "{{task}}"
[job.backoff]
initial = "0.1s"
max = "0.2s"
jitter = false
"""


def specs(folder: Path) -> None:
    write_specs(folder, "".join(AGENT.format(name=n) for n in ("researcher", "writer", "checker")))


class Pipeline:
    """The fake model: a coordinator (requests offering spawn_worker) and three workers."""

    def __init__(self) -> None:
        self.checker_calls = 0

    def __call__(self, body: dict) -> object:
        if "spawn_worker" in tool_names(body):
            return self.coordinator(body)
        role = body.get("system", "")
        if role == "ROLE researcher":
            return message(tool_use("submit_result", {"status": "success", "result": "RAW RESEARCH: 3 sources",
                                                      "confidence": 0.9}))
        if role == "ROLE writer":
            return message(stop_reason="refusal")
        self.checker_calls += 1
        if self.checker_calls == 1:
            return rate_limited()
        return message(tool_use("submit_result", {"status": "partial", "result": "checked 3 claims without a draft",
                                                  "confidence": 0.7, "notes": "no draft to check"}))

    def coordinator(self, body: dict) -> object:
        results = tool_results(body)
        if not results:
            return message(text("Plan: research, then write and check."),
                           tool_use("spawn_worker", {"worker": "researcher", "task": "find sources on tides"}))
        if len(results) == 1:
            research = json.loads(results[0]["content"])["result"]
            return message(tool_use("spawn_worker", {"worker": "writer", "task": "write it up", "context": research}),
                           tool_use("spawn_worker", {"worker": "checker", "task": "check facts", "context": research}))
        if len(results) == 3:
            by = {json.loads(r["content"]).get("worker"): r for r in results[1:]}
            assert by["writer"]["is_error"] and not by["checker"].get("is_error")
            return message(tool_use("report", {"status": "partial", "text": f"{json.loads(results[0]['content'])['result']}"
                                               "\nMissing: the written article (writer refused)."}),
                           tool_use("close_mission"))
        return message(text("done"))


def test_plan_three_workers_degraded_report_then_approval(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.handler = Pipeline()
        specs(tmp_path / "jobs")
        settings = fast_settings(tmp_path, judge={"api_key": "test", "base_url": fake.url, "enabled": False})
        with RunnerThread(tmp_path / "jobs", settings):
            with Ledger(settings.ledger) as led:
                mid = mactions.start(led, "Explain tides", workers=["researcher", "writer", "checker"],
                                     coordinator="claude", owner="ana")
            db = settings.ledger
            try:
                wait_for(lambda: query(db, "SELECT state FROM missions WHERE id = ?", (mid,))[0]["state"]
                         == "awaiting_approval", timeout=40)
            finally:
                for q in ("SELECT id,state,report_status FROM missions", "SELECT * FROM mission_workers",
                          "SELECT id, job, attempt, state, reason, exit_code FROM runs",
                          "SELECT kind, reason, detail FROM events WHERE kind NOT IN ('transition') ORDER BY id"):
                    for r in query(db, q):
                        print("DBG", r)
                for f in sorted(pathlib.Path(tmp_path).rglob("std*.log")):
                    print("LOG", f, f.read_text()[-600:])
        with Ledger(db) as led:
            m = mactions.status(led, mid)
            workers = {w["worker"]: w for w in m["spawned"]}
            assert {k: w["state"] for k, w in workers.items()} == {
                "researcher": "delivered", "writer": "failed", "checker": "delivered"}
            assert workers["checker"]["attempts"] == 2 and workers["checker"]["status"] == "partial"
            assert workers["writer"]["attempts"] == 1 and workers["writer"]["error"] == "refusal"
            assert workers["researcher"]["steps_used"] == 1 and workers["researcher"]["tokens"] == 130
            assert m["report_status"] == "partial" and "RAW RESEARCH" in m["report"] and "Missing" in m["report"]
            # the writer's context was the researcher's result, passed along by the coordinator
            assert workers["writer"]["context"] == "RAW RESEARCH: 3 sources"
            runs = led.query("SELECT job, attempt, state FROM runs WHERE trigger IN ('mission', 'retry') ORDER BY id")
            assert [(r["job"], r["attempt"], r["state"]) for r in runs if r["job"] == "checker"] == [
                ("checker", 1, "failed"), ("checker", 2, "succeeded")]
            esc = led.query("SELECT kind, state FROM escalations WHERE job = ? ORDER BY id", (ml.mission_job(mid),))
            assert ("mission_worker_failed", "open") in [(e["kind"], e["state"]) for e in esc]
            refused = mactions.approve(led, mid, "ana")
            assert not refused.ok and "writer" in refused.message
            assert mactions.abandon_worker(led, mid, workers["writer"]["seq"], "ana").ok
            assert mactions.approve(led, mid, "ana").ok
            m = ml.get(led.conn, mid)
            assert m["state"] == "closed" and m["decided_by"] == "ana"
            assert not led.query("SELECT 1 FROM escalations WHERE job = ? AND state != 'resolved'",
                                 (ml.mission_job(mid),))
            kinds = [e["kind"] for e in ml.events_of(led.conn, mid)]
            for k in ("mission_started", "mission_turn", "mission_worker_spawned", "mission_worker_delivered",
                      "mission_worker_failed", "mission_report", "mission_worker_abandoned", "mission_transition"):
                assert k in kinds, k
