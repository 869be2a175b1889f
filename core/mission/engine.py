"""The mission engine: Watchkeeper's own code between coordinator and workers.

One ``MissionEngine.step`` advances every mission that is not ended:

1. **Settle workers.** A worker whose latest attempt is terminal (no retry queued: retries
   with backoff are the ordinary run policy) is checked with code (``verify_delivery``):
   delivered only when its run *succeeded* (the supervisor verified exit code, handoff,
   claimed files, verify commands) and its handoff carries a status of success or partial
   and a result. Anything else is ``failed`` and escalated to the mission's owner. The
   worker's ``spawn_worker`` call gets its result either way.
2. **Wake.** A mission waiting on workers or a person whose open calls are all answered
   goes back to ``planning``: the coordinator sees the results in its next turn. Nothing
   is sent to the coordinator while it waits, so waiting costs no tokens.
3. **Turn.** A ``planning`` mission gets one coordinator turn (Claude, or the scripted
   program), unless a budget (turns, tokens, cost) is exhausted: then it stops planning with
   a partial report and waits for a person. Tool calls are carried out in the transaction
   that records the turn (compare-and-set on state and turn number).

Every decision is an audit event under ``job = 'mission:<id>'``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from dataclasses import dataclass, replace
from typing import Any, cast

from pydantic import ValidationError

from core.ledger import missions as ml
from core.ledger.connection import Ledger
from core.ledger.lifecycle import TERMINAL, State
from core.ledger.mission_tx import MissionTx
from core.ledger.records import Mission, MissionCall, Worker, WorkerAttempt
from core.ledger.sql_store import as_store
from core.ledger.store import Store
from core.mission import protocol
from core.processes import run_child
from core.spec.source_map import validation_line
from core.vocabulary import (
    MISSION_ENDED,
    AuditEvent,
    BreakerState,
    CoordinatorKind,
    EscalationKind,
    MissionState,
    OutcomeStatus,
    WorkerState,
)

log = logging.getLogger(__name__)

ACTOR = "mission"
#: Prices ($ per million tokens) for the coordinator's cost figure.
PRICE_IN, PRICE_OUT = 3.0, 15.0
COORDINATOR_MAX_TOKENS = 2048
#: Consecutive coordinator errors after which the mission stops planning.
MAX_COORDINATOR_ERRORS = 5
NUDGE = ("You answered without a tool call. Use spawn_worker, ask_person, or finish with report(text, status) "
         "and close_mission().")
WAITING = MissionState.WORKING, MissionState.WAITING_PERSON


class CoordinatorError(Exception):
    """One coordinator turn failed (API error, bad output, the program crashed)."""


@dataclass
class Turn:
    """A coordinator's answer: content blocks, and its usage (tokens, dollars)."""

    reply: list[dict[str, Any]]
    tokens: int = 0
    cost: float = 0.0


def verify_delivery(attempt: WorkerAttempt | None) -> tuple[bool, str]:
    """(delivered?, one-line note) for a worker's final attempt (``Store.worker_attempt``).

    Delivered only when the run ``succeeded`` — the supervisor already checked exit code,
    handoff validity, claimed files/artifacts and verify commands — and the handoff's status
    is success or partial with a non-empty result. A claim that failed verification ends
    the run ``failed`` and is never counted as delivered.
    """
    if attempt is None:
        return False, "no run"
    state, run_id = attempt.run.state, attempt.run.id
    if state != State.SUCCEEDED:
        why = attempt.run.reason or state
        return False, f"run {run_id} {state}" + (f" ({why})" if why and why != state else "")
    ver = attempt.verification
    if isinstance(ver, dict) and ver.get("ok") is False:
        return False, f"run {run_id}: verification failed"
    handoff = attempt.handoff
    if not isinstance(handoff, dict):
        return False, f"run {run_id} succeeded without a valid handoff (the structured result is the delivery)"
    if handoff.get("status") not in (OutcomeStatus.SUCCESS, OutcomeStatus.PARTIAL):
        return False, f"run {run_id}: handoff status {handoff.get('status')!r}"
    if handoff.get("result") in (None, "", [], {}):
        return False, f"run {run_id}: handoff claims {handoff.get('status')} but carries no result"
    return True, f"verified: run {run_id} succeeded, status {handoff['status']}"


def auto_report(workers: list[Worker], why: str) -> tuple[str, str]:
    """(report text, status) written by the program when the coordinator cannot finish."""
    done = [w for w in workers if w.state == WorkerState.DELIVERED]
    missing = [w for w in workers if w.state != WorkerState.DELIVERED]
    lines = [f"The coordinator stopped: {why}."]
    for w in done:
        lines.append(f"Delivered by worker {w.seq} ({w.worker}): {json.dumps(w.result, default=str)[:2000]}")
    if missing:
        lines.append("Missing: " + "; ".join(f"worker {w.seq} ({w.worker}) {w.state}"
                                             + (f": {w.note or w.error}" if (w.note or w.error) else "")
                                             for w in missing))
    return "\n".join(lines), ("partial" if done else "failed")


def _sinks(settings: Any) -> list[Any]:
    return list(getattr(settings, "notify", None) or [])


class MissionEngine:
    """Advances missions; one per runner. ``coordinator`` overrides how a turn is taken
    (tests); by default Claude missions use ``settings.judge``'s API key and base URL."""

    def __init__(self, settings: Any, *, actor: str = ACTOR) -> None:
        self.settings = settings
        self.actor = actor
        self._errors: dict[int, int] = {}
        self._not_before: dict[int, float] = {}

    # -- the loop body ------------------------------------------------------------------------
    def step(self, ledger: Ledger | Store, now: float | None = None) -> list[int]:
        """Advance every mission that is not ended; returns ids of missions that changed.

        ``ledger``: the store, or a ledger handle (a ``SqlStore`` is made over it)."""
        store = as_store(ledger)
        changed = []
        for mid in store.missions_due():
            try:
                if self._advance(store, mid, now if now is not None else time.time()):
                    changed.append(mid)
            except Exception:
                log.exception("mission %s: step failed; retrying next pass", mid)
        return changed

    def _advance(self, store: Store, mid: int, now: float) -> bool:
        changed = self._settle_workers(store, mid)
        m = store.mission(mid)
        if m is None or m.state in MISSION_ENDED or m.coordinator == CoordinatorKind.EXTERNAL:
            return changed  # an external coordinator (MCP) takes its own turns
        if m.state in WAITING and not self._open_calls(store, m):
            changed |= store.mission_write(lambda tx: tx.move(
                mid, WAITING, MissionState.PLANNING, actor=self.actor,
                reason="every waiting call answered: wake the coordinator"))
            m = store.mission(mid)
        if m is not None and m.state == MissionState.PLANNING and now >= self._not_before.get(mid, 0):
            changed |= self._turn(store, m)
        return changed

    @staticmethod
    def _open_calls(store: Store, m: Mission) -> list[MissionCall]:
        return [c for c in store.mission_calls(m.id, m.turns) if c.result is None]

    # -- 1. settle workers ----------------------------------------------------------------------
    def _settle_workers(self, store: Store, mid: int) -> bool:
        changed = False
        for w in store.mission_workers(mid):
            if w.state != WorkerState.RUNNING:
                continue
            attempt = store.worker_attempt(w.lineage)
            if attempt is None or attempt.run.state not in {s.value for s in TERMINAL}:
                if attempt is not None and attempt.run.id != w.run_id:
                    store.note_worker_attempt(w.id, attempt.run)
                continue
            changed |= self._settle_one(store, mid, w, attempt)
        return changed

    def _settle_one(self, store: Store, mid: int, w: Worker, attempt: WorkerAttempt) -> bool:
        delivered, note = verify_delivery(attempt)
        raw = attempt.handoff
        handoff: dict[str, Any] = raw if isinstance(raw, dict) else {}
        to = WorkerState.DELIVERED if delivered else WorkerState.FAILED
        fields = {"run_id": attempt.run.id, "attempts": attempt.run.attempt, "status": handoff.get("status"),
                  "confidence": handoff.get("confidence"), "steps_used": handoff.get("steps_used"),
                  "tokens": handoff.get("tokens"), "cost": handoff.get("cost"), "result": handoff.get("result"),
                  "error": handoff.get("error") or (None if delivered else attempt.run.reason), "note": note}
        m = store.mission(mid)

        def tx(t: MissionTx) -> bool:
            if not t.settle_worker(w.id, to, actor=self.actor, reason=f"worker {w.seq} ({w.worker}): {note}",
                                   fields=fields):
                return False
            summary = replace(w, **fields, state=to.value).summary()  # type: ignore[arg-type]
            if handoff.get("notes"):
                summary["notes"] = handoff["notes"]
            if w.call_id:
                t.answer_call(mid, w.call_id, summary, is_error=not delivered)
            if not delivered and (m is None or m.state not in MISSION_ENDED):
                t.raise_escalation(
                    mid, kind=EscalationKind.MISSION_WORKER_FAILED, severity="warning",
                    reason=(f"mission {mid}: worker {w.seq} ({w.worker}) failed after {attempt.run.attempt} "
                            f"attempt(s): {note}; abandon it or abort the mission"),
                    run_id=attempt.run.id, owner=m.owner if m else None, sinks=_sinks(self.settings),
                    actor=self.actor)
            return True
        return bool(store.mission_write(tx))

    # -- 3. coordinator turn ------------------------------------------------------------------
    def _exhausted(self, store: Store, m: Mission) -> str | None:
        """Why the mission may not take another turn (None: it may). Tokens and cost count the
        coordinator's and every worker's (from their handoffs)."""
        b = m.budget or {}
        workers = store.mission_workers(m.id)
        tokens = m.tokens + sum(int(w.tokens or 0) for w in workers)
        cost = m.cost + sum(float(w.cost or 0) for w in workers)
        if b.get("turns") is not None and m.turns >= b["turns"]:
            return f"turn budget exhausted ({m.turns}/{b['turns']} turns)"
        if b.get("tokens") is not None and tokens >= b["tokens"]:
            return f"token budget exhausted ({tokens}/{b['tokens']} tokens, coordinator and workers)"
        if b.get("cost") is not None and cost >= b["cost"]:
            return f"cost budget exhausted (${cost:.4f}/${b['cost']:g}, coordinator and workers)"
        return None

    def _stop(self, store: Store, m: Mission, why: str, kind: str) -> bool:
        """Stop planning: a partial report by the program (unless the coordinator wrote one),
        ``awaiting_approval``, and an escalation to the owner."""
        mid = m.id
        text, status = (m.report, m.report_status or "partial") if m.report else \
            auto_report(store.mission_workers(mid), why)

        def tx(t: MissionTx) -> bool:
            if not t.move(mid, [MissionState.PLANNING], MissionState.AWAITING_APPROVAL, actor=self.actor,
                          reason=why, fields={"report": text, "report_status": status, "reason": why}):
                return False
            t.raise_escalation(
                mid, kind=kind, severity="warning",
                reason=f"mission {mid} stopped planning: {why}; a partial report waits for approval or abort",
                run_id=None, owner=m.owner, sinks=_sinks(self.settings), actor=self.actor)
            return True
        return bool(store.mission_write(tx))

    def _turn(self, store: Store, m: Mission) -> bool:
        mid = m.id
        why = self._exhausted(store, m)
        if why:
            return self._stop(store, m, why, EscalationKind.MISSION_BUDGET_EXHAUSTED)
        try:
            turn = self.take_turn(store, m)
        except CoordinatorError as exc:
            n = self._errors.get(mid, 0) + 1
            self._errors[mid] = n
            self._not_before[mid] = time.time() + min(60.0, 0.5 * 2 ** n)
            msg = str(exc)[:500]
            store.mission_write(lambda t: t.event(mid, AuditEvent.MISSION_COORDINATOR_ERROR, actor=self.actor, reason=msg,
                                                  detail={"consecutive": n}))
            if n >= MAX_COORDINATOR_ERRORS:
                return self._stop(store, m, f"coordinator failed {n} times in a row: {msg}",
                                  EscalationKind.MISSION_COORDINATOR_FAILED)
            return True
        self._errors.pop(mid, None)
        self._not_before.pop(mid, None)
        return bool(store.mission_write(lambda t: self._apply_turn(t, m, turn)))

    def _apply_turn(self, t: MissionTx, m: Mission, turn: Turn) -> bool:
        """Record a turn and carry out its tool calls (inside one write transaction)."""
        cur = t.mission(m.id)
        if cur is None or cur.state != MissionState.PLANNING or cur.turns != m.turns:
            return False  # aborted, or another runner took this turn meanwhile
        n = m.turns + 1
        t.record_turn(m.id, n, turn.reply, tokens=turn.tokens, cost=turn.cost, actor=self.actor)
        self._carry_out(t, cur, n, protocol.tool_calls(turn.reply), MissionState.PLANNING)
        return True

    def external_call(self, ledger: Ledger | Store, mission_id: int, name: str,
                      inp: dict[str, Any]) -> dict[str, Any]:
        """One tool call from an external coordinator (MCP): carried out like a turn's call.

        Returns ``{call_id, result, is_error}``; ``result`` None means it waits (a worker, a
        person): the engine fills it in ``mission_calls`` later.
        """
        cid = ml.new_call_id()

        def tx(t: MissionTx) -> dict[str, Any]:
            cur = t.mission(mission_id)
            if cur is None:
                return {"call_id": cid, "result": f"no mission {mission_id}", "is_error": True}
            if cur.state in MISSION_ENDED:
                return {"call_id": cid, "result": f"mission {mission_id} is {cur.state}", "is_error": True}
            block = {"type": "tool_use", "id": cid, "name": name, "input": inp}
            self._carry_out(t, cur, cur.turns, [block], cur.state)
            call = next(c for c in t.calls(mission_id, cur.turns) if c.call_id == cid)
            return {"call_id": cid, "result": call.result, "is_error": call.is_error}
        return as_store(ledger).mission_write(tx)

    def _carry_out(self, t: MissionTx, cur: Mission, n: int, calls: list[dict[str, Any]], from_state: str) -> None:
        """Carry out tool calls of turn ``n`` and move the mission on (out of ``from_state``)."""
        mid = cur.id
        pending = asked = closing = False
        spawned = len(t.workers(mid))
        budget = cur.budget or {}
        for call in calls:
            cid, name, inp = str(call.get("id") or ml.new_call_id()), call.get("name"), call.get("input") or {}
            if not isinstance(inp, dict):
                inp = {"input": inp}
            result: Any = None
            error = False
            if name == protocol.SPAWN_WORKER:
                result, error, spawned = self.spawn(t, cur, cid, inp, spawned, budget)
                pending |= result is None
            elif name == protocol.ASK_PERSON and isinstance(inp.get("question"), str) and inp["question"].strip():
                if asked or cur.question:
                    result, error = "one question at a time: wait for the answer", True
                else:
                    asked = True
                    q = inp["question"].strip()[:4000]
                    t.update(mid, question=q)
                    t.event(mid, AuditEvent.MISSION_QUESTION, actor=self.actor, reason=q[:500], detail={"call_id": cid})
                    t.raise_escalation(
                        mid, kind=EscalationKind.MISSION_QUESTION, severity="warning",
                        reason=f"mission {mid} asks: {q[:300]}", run_id=None, owner=cur.owner,
                        sinks=_sinks(self.settings), actor=self.actor)
            elif name == protocol.REPORT and isinstance(inp.get("text"), str) and inp["text"].strip():
                status = inp.get("status") if inp.get("status") in (OutcomeStatus.SUCCESS, OutcomeStatus.PARTIAL,
                                                                        OutcomeStatus.FAILED) else None
                if status is None:
                    states = [w.state for w in t.workers(mid)]
                    status = "success" if states and all(s == WorkerState.DELIVERED for s in states) else "partial"
                t.update(mid, report=inp["text"][:100_000], report_status=status)
                cur = replace(cur, report=inp["text"], report_status=status)
                t.event(mid, AuditEvent.MISSION_REPORT, actor=self.actor, reason=f"report recorded ({status})",
                        detail={"status": status, "chars": len(inp["text"])})
                result = {"recorded": True, "status": status}
            elif name == protocol.CLOSE_MISSION:
                result, error = self._close_request(t, cur)
                closing = not error
            else:
                result, error = f"unknown tool or bad input: {name!r} (tools: spawn_worker, ask_person, report, " \
                                "close_mission)", True
            t.add_call(mid, n, cid, str(name), inp, result=result, is_error=error)
        if closing:
            t.move(mid, [from_state], MissionState.AWAITING_APPROVAL, actor=self.actor,
                   reason="the coordinator asked to close: the report waits for a person's approval",
                   fields={"close_requested": 1})
            t.raise_escalation(
                mid, kind=EscalationKind.MISSION_REPORT, severity="info",
                reason=f"mission {mid} report ({cur.report_status or 'partial'}) waits for approval",
                run_id=None, owner=cur.owner, sinks=_sinks(self.settings), actor=self.actor)
        elif asked:
            t.move(mid, [from_state], MissionState.WAITING_PERSON, actor=self.actor,
                   reason="ask_person: waiting for the owner's answer")
        elif pending and from_state == MissionState.PLANNING:
            t.move(mid, [from_state], MissionState.WORKING, actor=self.actor,
                   reason="waiting for workers (no coordinator calls meanwhile)")

    def spawn(self, t: MissionTx, m: Mission, cid: str, inp: dict[str, Any], spawned: int,
              budget: dict[str, Any]) -> tuple[Any, bool, int]:
        worker, task = inp.get("worker"), inp.get("task")
        if not isinstance(worker, str) or worker not in (m.workers or []):
            return f"unknown worker {worker!r}; allowed: {', '.join(m.workers or [])}", True, spawned
        if not isinstance(task, str) or not task.strip():
            return "spawn_worker needs a non-empty task", True, spawned
        job = t.worker_job(worker)
        if job is None or not job.enabled:
            return f"worker job {worker!r} is not defined in the spec folder", True, spawned
        if job.breaker_state == BreakerState.OPEN:
            # Route around a worker that keeps failing: the coordinator picks another or reports.
            return (f"worker {worker!r} keeps failing: its circuit breaker is open; use another worker or "
                    "report what you have"), True, spawned
        if budget.get("workers") is not None and spawned >= budget["workers"]:
            return f"worker budget exhausted ({spawned}/{budget['workers']}): report with what you have", True, spawned
        t.queue_worker(m.id, worker=worker, task=task[:20_000], context=inp.get("context"), call_id=cid,
                       spec_hash=job.spec_hash, actor=self.actor)
        return None, False, spawned + 1

    def _close_request(self, t: MissionTx, m: Mission) -> tuple[Any, bool]:
        if not m.report:
            return "call report(text, status) before close_mission()", True
        workers = t.workers(m.id)
        running = [f"{w.seq} ({w.worker})" for w in workers if w.state == WorkerState.RUNNING]
        if running:
            return f"workers still running: {', '.join(running)}; wait for their results", True
        failed = [f"{w.seq} ({w.worker})" for w in workers if w.state == WorkerState.FAILED]
        note = "the report waits for a person's approval"
        if failed:
            note += f"; a person must abandon failed worker(s) {', '.join(failed)} first"
        return {"closing": True, "note": note}, False

    # -- coordinators -------------------------------------------------------------------------
    def take_turn(self, store: Store, m: Mission) -> Turn:
        """One coordinator turn for mission ``m`` (Claude or the scripted program).

        Raises:
            CoordinatorError: the call failed or its answer was unusable.
        """
        if m.coordinator == CoordinatorKind.CLAUDE:
            return self._claude_turn(store, m)
        if m.coordinator == CoordinatorKind.SCRIPTED:
            return self._scripted_turn(store, m)
        raise CoordinatorError(f"coordinator {m.coordinator!r} takes no turns here (external: over MCP)")

    def transcript(self, store: Store, m: Mission) -> list[dict[str, Any]]:
        """The Messages API conversation so far: goal, then per turn the coordinator's reply and
        the results of its calls (or a nudge when it made none)."""
        msgs: list[dict[str, Any]] = [{"role": "user", "content": protocol.opening(m)}]
        calls = store.mission_calls(m.id)
        for t in store.mission_turns(m.id):
            reply = [b for b in t.reply if b.get("type") in ("text", "tool_use")] or \
                [{"type": "text", "text": "(no answer)"}]
            msgs.append({"role": "assistant", "content": reply})
            results = [{"type": "tool_result", "tool_use_id": c.call_id, "is_error": c.is_error,
                        "content": protocol.result_text(c.result) if c.result is not None else "still waiting"}
                       for c in calls if c.turn == t.turn]
            msgs.append({"role": "user", "content": results or [{"type": "text", "text": NUDGE}]})
        return msgs

    def _claude_turn(self, store: Store, m: Mission) -> Turn:
        import anthropic  # only Claude missions need the client

        judge = getattr(self.settings, "judge", None)
        key = judge.resolved_api_key() if judge is not None else os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise CoordinatorError("no Anthropic API key configured (judge.api_key or ANTHROPIC_API_KEY)")
        client = anthropic.Anthropic(api_key=key, base_url=getattr(judge, "base_url", None),
                                     timeout=getattr(judge, "timeout", 60.0), max_retries=1)
        try:
            msg = client.messages.create(model=m.model or "claude-sonnet-4-6",
                                         max_tokens=COORDINATOR_MAX_TOKENS, system=protocol.system_prompt(m),
                                         # our dicts have the API's shapes; the SDK's TypedDicts are not worth mirroring
                                         tools=cast(Any, protocol.TOOLS), messages=cast(Any, self.transcript(store, m)))
        except anthropic.APIError as exc:
            raise CoordinatorError(f"{type(exc).__name__}: {exc}") from None
        reply: list[dict[str, Any]] = []
        for b in msg.content:
            if b.type == "text":
                reply.append({"type": "text", "text": b.text})
            elif b.type == "tool_use":
                reply.append({"type": "tool_use", "id": b.id, "name": b.name, "input": dict(b.input or {})})
        tin, tout = msg.usage.input_tokens or 0, msg.usage.output_tokens or 0
        return Turn(reply, tin + tout, (tin * PRICE_IN + tout * PRICE_OUT) / 1e6)

    def turn_input(self, store: Store, m: Mission) -> dict[str, Any]:
        """The JSON document a scripted coordinator reads on stdin (see ``protocol``)."""
        return {
            "mission": {"id": m.id, "name": m.name, "goal": m.goal, "owner": m.owner, "workers": m.workers,
                        "budget": m.budget, "state": m.state, "report": m.report,
                        "report_status": m.report_status, "turn": m.turns + 1},
            "workers": [w.summary() for w in store.mission_workers(m.id)],
            "calls": [{"turn": c.turn, "name": c.name, "input": c.input, "result": c.result,
                       "is_error": int(c.is_error)} for c in store.mission_calls(m.id)],
        }

    def _scripted_turn(self, store: Store, m: Mission) -> Turn:
        argv = m.command
        if not argv:
            raise CoordinatorError("scripted coordinator without a command")
        doc = json.dumps(self.turn_input(store, m), default=str)
        env = {**os.environ, "WATCHKEEPER_MISSION_ID": str(m.id), "WATCHKEEPER_MISSION_TURN": str(m.turns + 1)}
        try:
            proc = run_child(argv, input=doc, cwd=m.cwd or None, env=env,
                             timeout=float(os.environ.get("WATCHKEEPER_COORDINATOR_TIMEOUT", "600")))
        except (OSError, subprocess.SubprocessError) as exc:
            raise CoordinatorError(f"scripted coordinator could not run: {exc}") from None
        if proc.returncode != 0:
            raise CoordinatorError(f"scripted coordinator exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
        try:
            return Turn(protocol.reply_from_script(json.loads(proc.stdout)))
        except ValueError as exc:  # a ValidationError too: one line naming the field, not pydantic's dump
            why = validation_line(exc) if isinstance(exc, ValidationError) else str(exc)
            raise CoordinatorError(f"scripted coordinator output: {why}") from None
