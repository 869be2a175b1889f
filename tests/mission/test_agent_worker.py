"""The agent worker (``python -m core.mission.agent``) against the fake Claude server: natural
completion, the step cap and the token budget (partial with a note of what is missing), tools
limited to the cwd and the allow-list, and which failures are transient.

The first case starts the real worker process; the others call the same ``main()`` in this
process, with the environment and working folder the process gets (a fresh interpreter per
case would import the anthropic SDK again each time, a few CPU-seconds)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from core.spec.model import AGENT_EXIT_PERMANENT, AGENT_EXIT_TRANSIENT, Agent
from tests.kit.fake_anthropic import FakeAnthropic, message, overloaded, text, tool_results, tool_use

ROOT = Path(__file__).resolve().parents[2]


def run_agent(tmp: Path, url: str, *, max_steps: int = 5, budget: dict | None = None, mission: dict | None = None,
              process: bool = False, **agent: object) -> tuple[int, dict]:
    """Run the agent worker in ``tmp`` against ``url``: its exit status and handoff. With
    ``process`` as ``python -m core.mission.agent``; otherwise its ``main()`` here, with the
    environment and working folder the runner would give the process."""
    cfg = {"agent": Agent(**agent).model_dump(mode="json"), "max_steps": max_steps, "budget": budget or {}, "job": "a"}
    handoff = tmp / "handoff.json"
    env = {"WATCHKEEPER_AGENT": json.dumps(cfg), "WATCHKEEPER_HANDOFF": str(handoff),
           "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": url}
    if mission is not None:
        (tmp / "input.json").write_text(json.dumps(mission))
        env["WATCHKEEPER_MISSION_INPUT"] = str(tmp / "input.json")
    if process:
        proc = subprocess.run([sys.executable, "-m", "core.mission.agent"], cwd=tmp, timeout=60, capture_output=True,
                              text=True, env={**os.environ, **env, "PYTHONPATH": str(ROOT)})
        rc = proc.returncode
    else:
        from core.mission import agent as worker

        with mock.patch.dict(os.environ, env), contextlib.chdir(tmp):
            rc = worker.main()
    return rc, json.loads(handoff.read_text())


@pytest.mark.slow  # starts the worker process
def test_natural_completion_writes_the_structured_result(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.handler = lambda body: message(tool_use("submit_result", {"status": "success", "result": {"n": 3},
                                                                       "confidence": 0.8}))
        rc, h = run_agent(tmp_path, fake.url, mission={"task": "count", "goal": "G", "context": {"x": 1}},
                          task="Goal {goal}: {task}", process=True)
        assert rc == 0
        assert h == {"status": "success", "result": {"n": 3}, "confidence": 0.8, "error": None, "notes": None,
                     "steps_used": 1, "tokens": 130, "cost": 0.00075, "files_changed": [], "commands": []}
        first = fake.requests[0]["messages"][0]["content"]
        assert first.startswith("Goal G: count") and '<context>\n{"x": 1}' in first


def test_the_step_cap_ends_partial_with_what_is_missing(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.handler = lambda body: message(text(f"still thinking ({len(body['messages'])})"))
        rc, h = run_agent(tmp_path, fake.url, max_steps=3)
        assert rc == 0 and len(fake.requests) == 3
        assert h["status"] == "partial" and h["steps_used"] == 3
        assert "max_steps=3" in h["notes"] and "missing" in h["notes"]
        assert h["result"].startswith("still thinking")


def test_the_token_budget_ends_partial(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.handler = lambda body: message(text("long answer"), usage=(500, 500))
        rc, h = run_agent(tmp_path, fake.url, max_steps=50, budget={"tokens": 2500})
        assert rc == 0 and h["status"] == "partial" and h["tokens"] == 3000 and h["steps_used"] == 3
        assert "token budget exhausted" in h["notes"]


def test_tools_stay_inside_the_cwd_and_the_allow_list(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("input data")

    def handler(body: dict) -> object:
        done = tool_results(body)
        if not done:
            return message(tool_use("read_file", {"path": "in.txt"}), tool_use("read_file", {"path": "../../etc/passwd"}),
                           tool_use("write_file", {"path": "out/result.txt", "content": "written"}),
                           tool_use("run_command", {"argv": ["rm", "-rf", "/"]}),
                           tool_use("run_command", {"argv": ["echo", "hi"]}))
        return message(tool_use("submit_result", {"status": "success", "confidence": 0.9,
                                                  "result": [r["content"] for r in done]}))
    with FakeAnthropic() as fake:
        fake.handler = handler
        rc, h = run_agent(tmp_path, fake.url, tools=["read_file", "write_file", "run_command"],
                          allow_commands=["echo"])
    assert rc == 0
    read, escape, wrote, refused, ran = h["result"]
    assert read == "input data" and "outside the working folder" in escape
    assert wrote == "wrote out/result.txt" and (tmp_path / "out/result.txt").read_text() == "written"
    assert "not in allow_commands" in refused and ran.startswith("exit 0\nhi")
    assert h["files_changed"] == ["out/result.txt"] and h["commands"] == [{"cmd": "echo hi", "exit_code": 0}]


def test_overload_is_transient_refusal_and_invalid_output_are_not(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.handler = lambda body: overloaded()
        rc, h = run_agent(tmp_path, fake.url)
        assert rc == AGENT_EXIT_TRANSIENT and h["status"] == "failed" and h["error"] == "overloaded"
        fake.handler = lambda body: message(stop_reason="refusal")
        rc, h = run_agent(tmp_path, fake.url)
        assert rc == AGENT_EXIT_PERMANENT and h["error"] == "refusal"
        fake.handler = lambda body: message(tool_use("submit_result", {"status": "done!", "confidence": 7}))
        rc, h = run_agent(tmp_path, fake.url)
        assert rc == AGENT_EXIT_PERMANENT and h["error"] == "invalid_output"
