"""``watchkeeper mcp``: an external coordinator drives a mission through the MCP tools, and
Watchkeeper runs, verifies and records the workers (real runner; MCP client in process and
over stdio)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from core.ledger import missions as ml
from core.ledger.connection import Ledger
from core.mission import actions as mactions
from tests.kit.harness import RunnerThread, fast_settings, write_specs

ROOT = Path(__file__).resolve().parents[2]
JOBS = """
name = "echo"
command = ["python3", "-c", "import json, os; t = json.load(open(os.environ['WATCHKEEPER_MISSION_INPUT']))['task']; json.dump({'status': 'success', 'result': t.upper(), 'confidence': 0.9}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))"]
timeout = "30s"
"""


# The MCP SDK (with core.mission.mcp_server) is imported inside each test: at module level every
# xdist worker would pay about a second of CPU for it while collecting, and one runs them.


def payload(res) -> dict:
    """A tool's answer: the structured content, or the JSON text block."""
    if getattr(res, "structured_content", None):
        data = res.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(res.content[0].text)


@pytest.mark.slow
async def test_an_external_coordinator_runs_a_mission_over_mcp(tmp_path: Path) -> None:
    from mcp.client import Client

    from core.mission.mcp_server import build_server

    write_specs(tmp_path / "jobs", JOBS)
    settings = fast_settings(tmp_path)
    with RunnerThread(tmp_path / "jobs", settings):
        with Ledger(settings.ledger) as led:
            mid = mactions.start(led, "shout", workers=["echo"], coordinator="external", owner="ana")
        async with Client(build_server(settings.ledger, mid, settings)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"spawn_worker", "ask_person", "report", "close_mission", "status"}
            got = payload(await client.call_tool("spawn_worker", {"worker": "echo", "task": "hello", "wait_s": 30}))
            assert got["result"]["state"] == "delivered" and got["result"]["result"] == "HELLO"
            bad = payload(await client.call_tool("spawn_worker", {"worker": "rm-rf", "task": "x", "wait_s": 1}))
            assert bad["is_error"] and "unknown worker" in bad["result"]
            asked = payload(await client.call_tool("ask_person", {"question": "Loud enough?", "wait_s": 0.3}))
            assert asked["waiting"]
            with Ledger(settings.ledger) as led:
                assert ml.get(led.conn, mid)["state"] == "waiting_person"
                assert mactions.answer(led, mid, "yes", "ana").ok
            st = payload(await client.call_tool("status", {}))
            assert st["state"] == "working" and st["spawned"][0]["state"] == "delivered"
            payload(await client.call_tool("report", {"text": "HELLO", "status": "success"}))
            closing = payload(await client.call_tool("close_mission", {}))
            assert not closing["is_error"]
    with Ledger(settings.ledger) as led:
        assert ml.get(led.conn, mid)["state"] == "awaiting_approval"
        answered = [c for c in ml.calls_of(led.conn, mid) if c["name"] == "ask_person"]
        assert answered[0]["result"]["answer"] == "yes"
        assert mactions.approve(led, mid, "ana").ok
        actors = {e["actor"] for e in ml.events_of(led.conn, mid)}
        assert "mcp" in actors and "operator:ana" in actors


async def test_watchkeeper_mcp_serves_the_tools_over_stdio(tmp_path: Path) -> None:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    db = tmp_path / "wk.db"
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), args=[
        "-m", "console.cli", "mcp", "--goal", "a goal", "--worker", "echo", "--ledger", str(db)])
    async with Client(params) as client:
        assert {t.name for t in (await client.list_tools()).tools} >= {"spawn_worker", "status"}
        st = payload(await client.call_tool("status", {}))
        assert st["goal"] == "a goal" and st["coordinator"] == "external" and st["state"] == "working"


@pytest.mark.slow
async def test_a_failed_tool_call_sets_mcp_is_error(tmp_path: Path) -> None:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    # Through the real `watchkeeper mcp` over stdio: a client that reads only isError (as
    # Claude Code does) must see the failure, not a success with the error inside the payload.
    db = tmp_path / "wk.db"
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), args=[
        "-m", "console.cli", "mcp", "--goal", "a goal", "--worker", "echo", "--ledger", str(db)])
    async with Client(params) as client:
        bad = await client.call_tool("spawn_worker", {"worker": "rm-rf", "task": "x", "wait_s": 1})
        assert bad.is_error
        assert payload(bad)["is_error"] and "unknown worker" in payload(bad)["result"]
        assert "unknown worker" in bad.content[0].text
        ok = await client.call_tool("status", {})
        assert not ok.is_error and payload(ok)["state"] == "working"
        # Closing before any report is refused, and says so the same way.
        early = await client.call_tool("close_mission", {})
        assert early.is_error and "call report(text, status) before close_mission()" in payload(early)["result"]
        reported = await client.call_tool("report", {"text": "done", "status": "success"})
        assert not reported.is_error
