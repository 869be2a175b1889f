"""A runner killed with SIGKILL mid-mission: the next runner resumes the mission from the
ledger without re-running a delivered worker (real runner subprocesses, fake Claude)."""

from __future__ import annotations

import json
import os
import signal

import pytest

from core.ledger import missions as ml
from core.mission import actions as mactions
from core.sweep.doctor import check
from tests.kit.fake_anthropic import FakeAnthropic, message, tool_results, tool_use
from tests.kit.runners import FAST_TOML, QUICK_RETRY
from tests.kit.sweep import wait_for

pytestmark = pytest.mark.slow

JOBS = f"""
[[job]]
name = "researcher"
command = ["python3", "-c", "import json, os; json.dump({{'status': 'success', 'result': 'RESEARCH', 'confidence': 0.9}}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))"]
timeout = "30s"

[[job]]
name = "writer"
command = ["python3", "-c", "import json, os, time; a = int(os.environ['WATCHKEEPER_ATTEMPT']); time.sleep(120 if a == 1 else 0); json.dump({{'status': 'success', 'result': 'ARTICLE from ' + json.load(open(os.environ['WATCHKEEPER_MISSION_INPUT']))['context'], 'confidence': 0.8}}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))"]
timeout = "5m"
max_attempts = 2
{QUICK_RETRY}
"""


def coordinator(body: dict) -> object:
    results = tool_results(body)
    if not results:
        return message(tool_use("spawn_worker", {"worker": "researcher", "task": "research"}))
    if len(results) == 1:
        return message(tool_use("spawn_worker", {"worker": "writer", "task": "write",
                                                 "context": json.loads(results[0]["content"])["result"]}))
    return message(tool_use("report", {"text": json.loads(results[1]["content"])["result"]}), tool_use("close_mission"))


# Soak: 67 s on an idle 2-core machine (over a third of the 120-s timeout). It also fails on
# main since runs outlive their runner (the re-attached writer's result is not handed to the
# mission): an open defect named in the closing note.
@pytest.mark.soak
def test_a_mission_resumes_after_a_runner_crash_without_rerunning_delivered_workers(rig, tmp_path):
    with FakeAnthropic() as fake:
        fake.handler = coordinator
        rig.write(JOBS)
        (rig.specs / "watchkeeper.toml").write_text(
            FAST_TOML + f'[judge]\napi_key = "test"\nbase_url = "{fake.url}"\nenabled = false\n')
        first = rig.start()
        mid = mactions.start(rig.led, "write an article", workers=["researcher", "writer"], coordinator="claude")
        wait_for(lambda: [r for r in rig.runs("writer") if r["state"] == "running" and r["pid"]], timeout=30)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        rig.start()
        wait_for(lambda: ml.get(rig.led.conn, mid)["state"] == "awaiting_approval", timeout=60)
        m = ml.get(rig.led.conn, mid)
        assert m["report"] == "ARTICLE from RESEARCH" and m["turns"] == 3
        assert [r["state"] for r in rig.runs("researcher")] == ["succeeded"]  # never re-run
        assert [(r["attempt"], r["state"]) for r in rig.runs("writer")] == [(1, "orphaned"), (2, "succeeded")]
        spawns = [c["input"]["worker"] for c in ml.calls_of(rig.led.conn, mid) if c["name"] == "spawn_worker"]
        assert spawns == ["researcher", "writer"]
        assert [w["state"] for w in ml.workers_of(rig.led.conn, mid)] == ["delivered", "delivered"]
        assert len(fake.requests) == 3
        assert mactions.approve(rig.led, mid, "ana").ok
        assert check(rig.led, rig.settings()) == []  # doctor: the ledger's invariants hold
