"""The mission tools over MCP (``watchkeeper mcp``): an external agent (Claude Code, say) is
the coordinator of one mission, and Watchkeeper stays the program that verifies.

Tools: ``spawn_worker``, ``ask_person``, ``report``, ``close_mission`` and ``status``.
Each call is carried out by ``MissionEngine.external_call`` exactly as a Claude turn's
call would be, with the same audit events. ``spawn_worker`` and ``ask_person`` wait (up to
``wait_s`` seconds, reading the ledger, never calling a model) until the runner has
settled and verified the worker or a person answered, so the coordinator is given results
rather than polling; on a timeout they return ``{"waiting": true, "call_id": …}`` and
``status`` shows the result later. A call that failed (an unknown worker, a mission that has
ended, a worker that did not deliver, an unknown mission for ``status``) sets MCP's
``isError`` on the answer, with the same payload, so a client need not look inside it. The runner (``watchkeeper run``/``up``) must be running
for workers to start.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent

from core.ledger.records import MissionCall
from core.ledger.sql_store import open_store
from core.mission import actions as mactions
from core.mission import protocol
from core.mission.engine import MissionEngine

#: Seconds between ledger reads while a call waits for a worker or a person.
WAIT_POLL_S = 0.25
DEFAULT_WAIT_S = 600.0


def answer(out: dict[str, Any], *, failed: bool | None = None) -> CallToolResult:
    """A tool's answer as MCP sends it: ``out`` as structured content and as one JSON text
    block, with ``isError`` from ``failed`` (default: ``out["is_error"]``)."""
    error = bool(out.get("is_error")) if failed is None else failed
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(out, default=str))],
                          structured_content=out, is_error=error)


def build_server(ledger_path: str | os.PathLike[str], mission_id: int, settings: Any) -> MCPServer:
    """An ``MCPServer`` whose tools act on mission ``mission_id`` in the ledger at ``ledger_path``.

    Each tool opens its own short-lived ledger connection (tools may run on any thread).
    """
    engine = MissionEngine(settings, actor="mcp")
    server = MCPServer(name="watchkeeper", instructions=(
        f"You coordinate Watchkeeper mission {mission_id}. Spawn workers with spawn_worker, ask the owner "
        "with ask_person, finish with report then close_mission; a person approves the report."))

    def call(name: str, inp: dict[str, Any]) -> dict[str, Any]:
        with open_store(ledger_path) as store:
            return engine.external_call(store, mission_id, name, inp)

    def result_of(call_id: str) -> MissionCall | None:
        with open_store(ledger_path) as store:
            return store.mission_call(mission_id, call_id)

    async def wait(out: dict[str, Any], wait_s: float) -> dict[str, Any]:
        deadline = anyio.current_time() + max(0.0, wait_s)
        while out["result"] is None and anyio.current_time() < deadline:
            await anyio.sleep(WAIT_POLL_S)
            got = await anyio.to_thread.run_sync(result_of, out["call_id"])
            if got is not None and got.result is not None:
                return {"call_id": got.call_id, "result": got.result, "is_error": got.is_error}
        if out["result"] is None:
            return {**out, "waiting": True}
        return out

    @server.tool(name=protocol.SPAWN_WORKER, description=protocol.TOOLS[0]["description"])
    async def spawn_worker(worker: str, task: str, context: Any = None,
                           wait_s: float = DEFAULT_WAIT_S) -> CallToolResult:
        out = await anyio.to_thread.run_sync(call, protocol.SPAWN_WORKER,
                                             {"worker": worker, "task": task, "context": context})
        return answer(await wait(out, wait_s))

    @server.tool(name=protocol.ASK_PERSON, description=protocol.TOOLS[1]["description"])
    async def ask_person(question: str, wait_s: float = DEFAULT_WAIT_S) -> CallToolResult:
        out = await anyio.to_thread.run_sync(call, protocol.ASK_PERSON, {"question": question})
        return answer(await wait(out, wait_s))

    @server.tool(name=protocol.REPORT, description=protocol.TOOLS[2]["description"])
    async def report(text: str, status: str | None = None) -> CallToolResult:
        inp = {"text": text} | ({"status": status} if status else {})
        return answer(await anyio.to_thread.run_sync(call, protocol.REPORT, inp))

    @server.tool(name=protocol.CLOSE_MISSION, description=protocol.TOOLS[3]["description"])
    async def close_mission() -> CallToolResult:
        return answer(await anyio.to_thread.run_sync(call, protocol.CLOSE_MISSION, {}))

    @server.tool(name=protocol.STATUS, description=protocol.MCP_STATUS_TOOL["description"])
    async def status() -> CallToolResult:
        def read() -> CallToolResult:
            with open_store(ledger_path) as store:
                m = mactions.status(store, mission_id)
            if m is None:
                return answer({"error": f"no mission {mission_id}"}, failed=True)
            for w in m.get("spawned", []):
                w.pop("lineage", None)
            return answer(m, failed=False)
        return await anyio.to_thread.run_sync(read)

    return server
