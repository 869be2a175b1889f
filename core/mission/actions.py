"""What a person (CLI, console) or an external coordinator (MCP) does to a mission.

Each action is one compare-and-set in the ledger with its audit event and returns an
``ActionResult`` (``missing`` when the mission or worker does not exist). Nothing here
deletes anything: abort abandons live worker runs (their processes killed through
``core.actions.abandon``) and keeps every output, handoff and artifact.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from core import actions as run_actions
from core.ledger.connection import Ledger
from core.ledger.mission_tx import MissionTx
from core.ledger.records import columns
from core.ledger.sql_store import as_store
from core.ledger.store import Store
from core.spec.mission import LoadedMission, MissionSpec, load_mission_file, load_missions
from core.vocabulary import (
    MISSION_ENDED,
    ActionResult,
    AuditEvent,
    CoordinatorKind,
    EscalationKind,
    MissionState,
    WorkerState,
)

#: Escalation kinds a mission raises (``escalations.kind``), all under ``job = 'mission:<id>'``.
ESCALATION_KINDS = tuple(k.value for k in EscalationKind if k.value.startswith("mission_"))


class MissionDefinitionError(ValueError):
    """A mission file or name that cannot be used (the message names file, line and field)."""


def _actor(who: str) -> str:
    return who if ":" in who else f"operator:{who}"


def find_definition(spec_dir: str | os.PathLike[str] | None, *, name: str | None = None,
                    path: str | os.PathLike[str] | None = None) -> LoadedMission:
    """The mission definition from ``path`` (a TOML file) or by ``name`` in ``<spec_dir>/missions``.

    Raises:
        MissionDefinitionError: the file has errors, or no such mission (names the ones there are).
    """
    res = load_mission_file(path) if path is not None else load_missions(spec_dir or ".")
    if res.errors:
        raise MissionDefinitionError("\n".join(str(e) for e in res.errors))
    if name is None:
        if len(res.missions) != 1:
            raise MissionDefinitionError(f"{path or spec_dir}: {len(res.missions)} missions; name one of: "
                                         + ", ".join(sorted(res.missions)))
        return next(iter(res.missions.values()))
    if name not in res.missions:
        raise MissionDefinitionError(f"no mission {name!r} (defined: {', '.join(sorted(res.missions)) or 'none'})")
    return res.missions[name]


def coordinator_kind(spec: MissionSpec, api_key: str | None) -> str:
    """``auto`` → ``claude`` when an API key is configured, else ``scripted``."""
    if spec.coordinator == "auto":
        return CoordinatorKind.CLAUDE if api_key else CoordinatorKind.SCRIPTED
    return spec.coordinator


def start(ledger: Ledger, goal: str | None, *, definition: LoadedMission | None = None,
          workers: list[str] | None = None, owner: str | None = None, api_key: str | None = None,
          coordinator: str | None = None, budget: dict[str, Any] | None = None, model: str | None = None,
          who: str = "cli") -> int:
    """Create a mission; the runner's mission engine takes it from there. Returns its id.

    With ``definition`` its coordinator, workers, budget, model and owner apply; the other
    arguments override them (``goal`` its default goal). ``coordinator``: ``claude``,
    ``scripted`` (needs a definition's ``command``) or ``external`` (the caller coordinates,
    over MCP: no turns are taken); default from the definition (``auto``: Claude when
    ``api_key`` is set), else ``external``. ``budget``: ``{turns, workers, tokens, cost}``.

    Raises:
        MissionDefinitionError: no goal, no workers, or a scripted coordinator without a command.
    """
    spec = definition.spec if definition is not None else None
    text = goal or (spec.goal if spec else None)
    if not text or not text.strip():
        raise MissionDefinitionError("a mission needs a goal")
    names = list(workers or (spec.workers if spec else []))
    if not names:
        raise MissionDefinitionError("a mission needs at least one worker job (--worker, or a mission definition)")
    kind = coordinator or (coordinator_kind(spec, api_key) if spec else CoordinatorKind.EXTERNAL)
    if kind not in CoordinatorKind._value2member_map_:
        raise MissionDefinitionError(f"unknown coordinator {kind!r} (claude, scripted or external)")
    command = cwd = None
    if kind == CoordinatorKind.SCRIPTED:
        if spec is None or spec.command is None:
            raise MissionDefinitionError("a scripted coordinator needs a mission definition with 'command'")
        command = spec.command if isinstance(spec.command, list) else ["/bin/sh", "-c", spec.command]
        cwd = str(Path(definition.source).resolve().parent) if definition is not None else None
    plan = {**(spec.budget.model_dump() if spec else {"turns": 20, "workers": 10, "tokens": None, "cost": None}),
            **(budget or {})}
    return as_store(ledger).mission_write(lambda t: t.create(
        name=spec.name if spec else "adhoc", goal=text.strip(), coordinator=kind, workers=names, budget=plan,
        actor=_actor(who), owner=owner or (spec.owner if spec else None), command=command, cwd=cwd,
        model=model or (spec.model if spec else None), system=spec.system if spec else None))


def status(ledger: Ledger | Store, mission_id: int) -> dict[str, Any] | None:
    """The mission as a JSON document (what ``mission show --json`` and MCP's ``status``
    print): its fields, with its spawned workers (each with ``run_state``) under ``spawned``;
    None when there is no such mission."""
    store = as_store(ledger)
    m = store.mission(mission_id)
    if m is None:
        return None
    return {**columns(m), "spawned": [columns(w) for w in store.mission_workers(mission_id)]}


def approve(ledger: Ledger | Store, mission_id: int, who: str) -> ActionResult:
    """A person approves the report: ``awaiting_approval → closed``, only when every worker
    delivered or was abandoned by a person."""
    store = as_store(ledger)
    m = store.mission(mission_id)
    if m is None:
        return ActionResult(False, f"no mission {mission_id}", mission_id, missing=True)
    if m.state != MissionState.AWAITING_APPROVAL:
        return ActionResult(False, f"mission {mission_id} is {m.state}, not awaiting_approval", mission_id)
    open_ = [w for w in store.mission_workers(mission_id)
             if w.state not in (WorkerState.DELIVERED, WorkerState.ABANDONED)]
    if open_:
        names = ", ".join(f"{w.seq} ({w.worker}, {w.state})" for w in open_)
        return ActionResult(False, f"mission {mission_id} cannot close: worker(s) {names} neither delivered nor "
                                   "abandoned; abandon them first (watchkeeper mission abandon-worker)", mission_id)
    actor = _actor(who)

    def tx(t: MissionTx) -> bool:
        if not t.move(mission_id, [MissionState.AWAITING_APPROVAL], MissionState.CLOSED, actor=actor,
                      reason=f"report approved by {who}", fields={"decided_by": who, "ended_at": time.time()}):
            return False
        t.resolve_escalations(mission_id, ESCALATION_KINDS, actor=actor, reason=f"mission {mission_id} closed by {who}")
        return True
    if store.mission_write(tx):
        return ActionResult(True, f"mission {mission_id} closed: report approved by {who}", mission_id)
    return ActionResult(False, f"mission {mission_id} changed meanwhile; look again", mission_id)


def answer(ledger: Ledger | Store, mission_id: int, text: str, who: str) -> ActionResult:
    """A person answers the open ``ask_person`` question; the coordinator is woken with it."""
    store = as_store(ledger)
    m = store.mission(mission_id)
    if m is None:
        return ActionResult(False, f"no mission {mission_id}", mission_id, missing=True)
    if m.state != MissionState.WAITING_PERSON:
        return ActionResult(False, f"mission {mission_id} has no open question (it is {m.state})", mission_id)
    if not text.strip():
        return ActionResult(False, "an answer must not be empty", mission_id)
    actor = _actor(who)
    asks = [c for c in store.mission_calls(mission_id, m.turns) if c.name == "ask_person" and c.result is None]

    def tx(t: MissionTx) -> bool:
        if not t.move(mission_id, [MissionState.WAITING_PERSON], MissionState.WORKING, actor=actor,
                      reason=f"answered by {who}", fields={"question": None}):
            return False
        for c in asks:
            t.answer_call(mission_id, c.call_id, {"answer": text, "answered_by": who})
        t.event(mission_id, AuditEvent.MISSION_ANSWER, actor=actor, reason=text[:500], detail={"by": who})
        t.resolve_escalations(mission_id, (EscalationKind.MISSION_QUESTION.value,), actor=actor,
                              reason=f"answered by {who}")
        return True
    if store.mission_write(tx):
        return ActionResult(True, f"mission {mission_id}: answer recorded; the coordinator is woken with it", mission_id)
    return ActionResult(False, f"mission {mission_id} changed meanwhile; look again", mission_id)


def abandon_worker(ledger: Ledger, mission_id: int, seq: int, who: str) -> ActionResult:
    """A person gives up worker ``seq``: a failed one is marked abandoned; a running one is
    abandoned and its live run killed (artifacts kept)."""
    store = as_store(ledger)
    w = next((x for x in store.mission_workers(mission_id) if x.seq == seq), None)
    if w is None:
        return ActionResult(False, f"mission {mission_id} has no worker {seq}", mission_id, missing=True)
    actor = _actor(who)
    if w.state == WorkerState.FAILED:
        ok = store.mission_write(lambda t: t.abandon_failed_worker(w.id, actor=actor, by=who))
    elif w.state == WorkerState.RUNNING:
        def tx(t: MissionTx) -> bool:
            if not t.settle_worker(w.id, WorkerState.ABANDONED, actor=actor,
                                   reason=f"worker {seq} ({w.worker}) abandoned by {who}",
                                   fields={"abandoned_by": who, "note": f"abandoned by {who}"}):
                return False
            if w.call_id:
                t.answer_call(mission_id, w.call_id, {"seq": seq, "worker": w.worker, "state": "abandoned",
                                                      "note": f"abandoned by {who}"}, is_error=True)
            return True
        ok = store.mission_write(tx)
        for run in store.live_worker_runs(mission_id):
            if run.lineage == w.lineage:
                run_actions.abandon(ledger, run.id, who)
    else:
        return ActionResult(False, f"worker {seq} is {w.state}; only a failed or running worker can be abandoned",
                            mission_id)
    if ok:
        return ActionResult(True, f"mission {mission_id}: worker {seq} ({w.worker}) abandoned by {who}", mission_id)
    return ActionResult(False, f"worker {seq} changed meanwhile; look again", mission_id)


def abort(ledger: Ledger, mission_id: int, who: str) -> ActionResult:
    """Abort at any time: the mission ends ``aborted``, running workers are abandoned and
    their live runs killed; every output, handoff and artifact is kept."""
    store = as_store(ledger)
    m = store.mission(mission_id)
    if m is None:
        return ActionResult(False, f"no mission {mission_id}", mission_id, missing=True)
    if m.state in MISSION_ENDED:
        return ActionResult(False, f"mission {mission_id} is already {m.state}"
                                   + (f" by {m.decided_by}" if m.decided_by else ""), mission_id)
    actor = _actor(who)

    def tx(t: MissionTx) -> bool:
        if not t.move(mission_id, [s.value for s in MissionState if s not in MISSION_ENDED],
                      MissionState.ABORTED, actor=actor, reason=f"aborted by {who}",
                      fields={"decided_by": who, "reason": f"aborted by {who}", "ended_at": time.time()}):
            return False
        for w in t.workers(mission_id):
            if w.state == WorkerState.RUNNING:
                t.settle_worker(w.id, WorkerState.ABANDONED, actor=actor,
                                reason=f"mission aborted by {who}", fields={"abandoned_by": who})
        t.resolve_escalations(mission_id, ESCALATION_KINDS, actor=actor, reason=f"mission {mission_id} aborted by {who}")
        return True
    if not store.mission_write(tx):
        return ActionResult(False, f"mission {mission_id} changed meanwhile; look again", mission_id)
    killed = [r.id for r in store.live_worker_runs(mission_id) if run_actions.abandon(ledger, r.id, who).ok]
    note = f"; worker run(s) {', '.join(map(str, killed))} abandoned" if killed else ""
    return ActionResult(True, f"mission {mission_id} aborted by {who}{note}; artifacts kept", mission_id)
