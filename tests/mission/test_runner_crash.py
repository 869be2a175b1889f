"""A runner killed with SIGKILL mid-mission: the writer worker it was running goes on under its
monitor, the next runner re-attaches it and hands its result to the mission, which resumes
from the ledger without re-running a delivered worker (real runner subprocesses). Both ways
the worker can be found: still running when the runner comes back, or ended while no runner
was up. The quick version is coordinated from outside (as over MCP); the soak version by
Claude (the fake server), whose transcript the new runner rebuilds from the ledger."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from core import monitor
from core.ledger import missions as ml
from core.mission import actions as mactions
from core.mission.engine import MissionEngine
from core.sweep.doctor import check
from tests.kit.fake_anthropic import FakeAnthropic, message, tool_results, tool_use
from tests.kit.runners import FAST_TOML, QUICK_RETRY
from tests.kit.sweep import wait_for

# The writer waits for the test's gate (a file), so it is surely running when the runner dies.
JOBS = """
[[job]]
name = "researcher"
command = ["python3", "-c", "import json, os; json.dump({{'status': 'success', 'result': 'RESEARCH', 'confidence': 0.9}}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))"]
timeout = "30s"

[[job]]
name = "writer"
command = ["python3", "-c", "import json, os, time\\nwhile not os.path.exists({gate!r}): time.sleep(0.02)\\njson.dump({{'status': 'success', 'result': 'ARTICLE from ' + json.load(open(os.environ['WATCHKEEPER_MISSION_INPUT']))['context'], 'confidence': 0.8}}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))"]
timeout = "60s"
max_attempts = 2
{retry}
"""


def coordinator(body: dict) -> object:
    results = tool_results(body)
    if not results:
        return message(tool_use("spawn_worker", {"worker": "researcher", "task": "research"}))
    if len(results) == 1:
        return message(tool_use("spawn_worker", {"worker": "writer", "task": "write",
                                                 "context": json.loads(results[0]["content"])["result"]}))
    return message(tool_use("report", {"text": json.loads(results[1]["content"])["result"]}), tool_use("close_mission"))


def _crash_mid_writer(rig, gate: Path, found: str) -> dict:
    """With the writer running: SIGKILL the runner; with ``found == "ended"`` let the writer end
    while no runner is up; start a new runner and wait until it re-attached the writer; then
    open the gate. Returns the writer's run as it was before the crash."""
    assert wait_for(lambda: [r for r in rig.runs("writer") if r["state"] == "running" and r["pid"]], timeout=30)
    (writer,) = rig.runs("writer")
    first = rig.procs[-1]
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    if found == "ended":  # the worker delivers while no runner is up
        gate.touch()
        assert wait_for(lambda: monitor.exit_status(Path(writer["artifacts_dir"])) == 0, timeout=20)
    rig.start()
    assert wait_for(lambda: rig.query("SELECT 1 FROM events WHERE kind = 'reattached' AND run_id = ?",
                                      (writer["id"],)), timeout=30)
    gate.touch()
    return writer


def _reattached_once(rig, writer: dict, found: str) -> None:
    # The writer's one attempt, re-attached and followed to its true end: never orphaned, never re-run.
    assert [(r["attempt"], r["state"]) for r in rig.runs("writer")] == [(1, "succeeded")]
    reason = rig.query("SELECT reason FROM events WHERE kind = 'reattached' AND run_id = ?", (writer["id"],))
    assert reason[0]["reason"] == {"running": "still running under its monitor: followed by the new runner",
                                   "ended": "ended while no runner was there: its monitor kept the exit"
                                            " status and output"}[found]


@pytest.mark.slow
@pytest.mark.parametrize("found", ["running", "ended"])
def test_a_reattached_worker_hands_its_result_to_the_mission(rig, tmp_path, found):
    gate = tmp_path / "gate"
    rig.write(JOBS.format(gate=str(gate), retry=QUICK_RETRY))
    rig.start()
    engine = MissionEngine(rig.settings())
    mid = mactions.start(rig.led, "write an article", workers=["researcher", "writer"], coordinator="external")
    spawned = engine.external_call(rig.led, mid, "spawn_worker", {"worker": "researcher", "task": "research"})
    assert not spawned["is_error"], spawned
    assert wait_for(lambda: [w["state"] for w in ml.workers_of(rig.led.conn, mid)] == ["delivered"], timeout=30)
    engine.external_call(rig.led, mid, "spawn_worker", {"worker": "writer", "task": "write", "context": "RESEARCH"})
    writer = _crash_mid_writer(rig, gate, found)
    assert wait_for(lambda: [w["state"] for w in ml.workers_of(rig.led.conn, mid)] == ["delivered", "delivered"],
                    timeout=30), (ml.workers_of(rig.led.conn, mid), rig.runs("writer"))
    assert [w["result"] for w in ml.workers_of(rig.led.conn, mid)] == ["RESEARCH", "ARTICLE from RESEARCH"]
    answers = [c["result"] for c in ml.calls_of(rig.led.conn, mid) if c["name"] == "spawn_worker"]
    assert [a["result"] for a in answers] == ["RESEARCH", "ARTICLE from RESEARCH"]  # handed to the coordinator
    assert [r["state"] for r in rig.runs("researcher")] == ["succeeded"]  # never re-run
    _reattached_once(rig, writer, found)
    assert check(rig.led, rig.settings()) == []  # doctor: the ledger's invariants hold


# Soak: the first Claude call of each runner process imports the anthropic client (seconds on a
# loaded 2-core machine), twice here; the quick version above covers the re-attach itself.
@pytest.mark.soak
@pytest.mark.parametrize("found", ["running", "ended"])
def test_a_claude_mission_resumes_after_a_runner_crash_with_the_reattached_workers_result(rig, tmp_path, found):
    gate = tmp_path / "gate"
    with FakeAnthropic() as fake:
        fake.handler = coordinator
        rig.write(JOBS.format(gate=str(gate), retry=QUICK_RETRY))
        (rig.specs / "watchkeeper.toml").write_text(
            FAST_TOML + f'[judge]\napi_key = "test"\nbase_url = "{fake.url}"\nenabled = false\n')
        rig.start()
        mid = mactions.start(rig.led, "write an article", workers=["researcher", "writer"], coordinator="claude")
        writer = _crash_mid_writer(rig, gate, found)
        assert wait_for(lambda: ml.get(rig.led.conn, mid)["state"] == "awaiting_approval", timeout=60), \
            (ml.get(rig.led.conn, mid), rig.runs("writer"))
        m = ml.get(rig.led.conn, mid)
        assert m["report"] == "ARTICLE from RESEARCH" and m["turns"] == 3
        assert [r["state"] for r in rig.runs("researcher")] == ["succeeded"]  # never re-run
        _reattached_once(rig, writer, found)
        spawns = [c["input"]["worker"] for c in ml.calls_of(rig.led.conn, mid) if c["name"] == "spawn_worker"]
        assert spawns == ["researcher", "writer"]
        assert [w["state"] for w in ml.workers_of(rig.led.conn, mid)] == ["delivered", "delivered"]
        assert len(fake.requests) == 3
        assert mactions.approve(rig.led, mid, "ana").ok
        assert check(rig.led, rig.settings()) == []  # doctor: the ledger's invariants hold
