"""The runner's hooks for agent jobs and mission worker runs.

An agent job (``kind = "agent"``) runs as ``python -m core.mission.agent`` in its own
process group, like any command: timeout, lease, capture and handoff are the runner's. Its
configuration travels in ``WATCHKEEPER_AGENT`` (JSON). Without an API key, an agent with
an ``offline`` command runs that stand-in instead (the demo's scripted workers).

A mission worker run (slot ``mission:<id>:<seq>``) gets ``WATCHKEEPER_MISSION_ID``,
``WATCHKEEPER_MISSION_SEQ`` and ``WATCHKEEPER_MISSION_INPUT``: a JSON file
``{mission_id, seq, goal, task, context}`` written into the run's artifacts folder.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from core.ledger import missions as ml
from core.ledger.records import Run
from core.ledger.store import Store
from core.spec.model import JobSpec

AGENT_MODULE = "core.mission.agent"
INPUT_FILE = "mission_input.json"


def api_key(settings: Any) -> str | None:
    """The Anthropic API key agents and coordinators use (``judge.api_key`` or the environment)."""
    judge = getattr(settings, "judge", None)
    return judge.resolved_api_key() if judge is not None else os.environ.get("ANTHROPIC_API_KEY")


def command_for(spec: JobSpec, settings: Any) -> list[str] | None:
    """The argv of an agent job's run (None for any other kind)."""
    if spec.kind != "agent" or spec.agent is None:
        return None
    if not api_key(settings) and spec.agent.offline is not None:
        return spec.argv(spec.agent.offline)
    return [sys.executable, "-m", AGENT_MODULE]


def env_for(spec: JobSpec, run: Run, settings: Any, store: Store, run_dir: Path) -> dict[str, str]:
    """Extra environment for an agent run and/or a mission worker run (empty otherwise).

    Writes ``mission_input.json`` into ``run_dir`` (the run's artifacts folder) for a mission
    worker; an unwritable folder leaves the input in the environment instead.
    """
    env: dict[str, str] = {}
    if spec.kind == "agent" and spec.agent is not None:
        env["WATCHKEEPER_AGENT"] = json.dumps({
            "agent": spec.agent.model_dump(mode="json"), "max_steps": spec.max_steps,
            "budget": {"tokens": spec.budget.tokens, "cost": spec.budget.cost}, "job": spec.name})
        judge = getattr(settings, "judge", None)
        key = api_key(settings)
        if key:
            env["ANTHROPIC_API_KEY"] = key
        if judge is not None and judge.base_url:
            env["ANTHROPIC_BASE_URL"] = judge.base_url
    where = ml.parse_slot(run.slot)
    if where is not None:
        doc = store.worker_input(*where)
        if doc is not None:
            env["WATCHKEEPER_MISSION_ID"], env["WATCHKEEPER_MISSION_SEQ"] = str(where[0]), str(where[1])
            path = run_dir / INPUT_FILE
            try:
                path.write_text(json.dumps(doc, default=str))
                env["WATCHKEEPER_MISSION_INPUT"] = str(path)
            except OSError:
                env["WATCHKEEPER_MISSION_INPUT_JSON"] = json.dumps(doc, default=str)
    return env


def read_input() -> dict[str, Any]:
    """In a worker process: the mission input (``{}`` outside a mission)."""
    path = os.environ.get("WATCHKEEPER_MISSION_INPUT")
    if path:
        try:
            return json.loads(Path(path).read_text())
        except (OSError, ValueError):
            return {}
    raw = os.environ.get("WATCHKEEPER_MISSION_INPUT_JSON")
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return {}
