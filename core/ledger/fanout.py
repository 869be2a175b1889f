"""Fan-out / fan-in (``kind = "fanout"``): one parent run, one child run per sub-task.

Children are ordinary ``runs`` rows (``parent_run_id`` = the parent, ``task`` = the
sub-task name, ``trigger = 'fanout'``, their own lineage, attempts and outcome) that the
dispatcher runs in parallel up to the job's ``concurrency``, each in its own process group,
so one crashing or hanging never touches its siblings. Fan-in is *all-settled*: the parent
waits until every sub-task's latest attempt is terminal with no retry pending, never fails
fast. An optional ``synthesize`` command then receives every result as JSON on stdin.

Parent result: all sub-tasks succeeded → success; some failed but synthesis succeeded (and
``allow_partial``) → success with status ``partial``, naming what is missing; otherwise
failed.

A parent that ends (orphaned, timed out, failed, abandoned …) takes its sub-tasks with it:
those still ``queued`` are abandoned (reason ``parent_ended``) in the transaction of the
parent's terminal move (``settle_children``, called from ``retries.follow_up`` and the
sweep), and no sub-task of an ended parent is retried (``retries.follow_up``). A parent's
retry queues its own, new sub-tasks. Sub-tasks already live are settled by the ordinary
rules (their exit, their timeout, the sweep).
"""

from __future__ import annotations

import json
import time
from typing import Any

from core.ledger import lifecycle, outcomes, runs
from core.ledger.connection import Conn, Row
from core.ledger.lifecycle import TERMINAL, State
from core.ledger.records import Run
from core.spec.model import JobSpec
from core.vocabulary import EndReason, RunState, Trigger, sql_set

_TERMINAL = tuple(s.value for s in TERMINAL)


def create_children(conn: Conn, parent: Run, spec: JobSpec, *, actor: str,
                    now: float | None = None) -> list[int]:
    """Insert attempt 1 of every sub-task of ``spec`` under ``parent`` (the parent run);
    idempotent (a restart never duplicates children). Returns the new run ids."""
    ts = now if now is not None else time.time()
    ids = []
    for task in spec.tasks:
        rid = runs.create(conn, job=parent.job, slot=parent.slot + f"#{parent.attempt}", task=task.name,
                          trigger=Trigger.FANOUT, parent_run_id=parent.id, spec_hash=spec.spec_hash(),
                          not_before=ts, now=ts, actor=actor,
                          detail={"parent_run_id": parent.id, "task": task.name}, if_absent=True)
        if rid is not None:
            ids.append(rid)
    return ids


def settle_children(conn: Conn, parent_id: int, *, actor: str,
                    now: float | None = None) -> list[int]:
    """Inside the caller's write transaction: abandon every ``queued`` sub-task of
    ``parent_id`` when that parent run is terminal (compare-and-set through
    ``core.ledger.lifecycle``, reason ``parent_ended``, with its ``job_outcomes`` record).

    Does nothing while the parent is not terminal. Sub-tasks already spawned/running are left
    to the ordinary rules. Returns the abandoned run ids (a lost race is simply skipped).
    """
    parent = conn.execute("SELECT state FROM runs WHERE id = ?", (parent_id,)).fetchone()
    if parent is None or parent[0] not in _TERMINAL:
        return []
    ts = now if now is not None else time.time()
    done = []
    for kid in conn.execute("SELECT id, attempt, task FROM runs WHERE parent_run_id = ? AND state = ?"
                            " ORDER BY id", (parent_id, State.QUEUED.value)).fetchall():
        if lifecycle.apply(conn, kid[0], kid[1], State.QUEUED, State.ABANDONED, actor=actor,
                           reason_code=EndReason.PARENT_ENDED, reason=EndReason.PARENT_ENDED.value,
                           detail={"parent_run_id": parent_id, "parent_state": parent[0], "task": kid[2]}, at=ts):
            outcomes.record(conn, kid[0], state=State.ABANDONED.value, status="abandoned",
                            reason=EndReason.PARENT_ENDED.value)
            done.append(int(kid[0]))
    return done


def stranded_parents(conn: Conn, limit: int = 1000) -> list[int]:
    """Ids of ended (terminal) parent runs that still have ``queued`` sub-tasks: left by a path
    that did not settle them (an older ledger); the sweep settles them."""
    return [int(r[0]) for r in conn.execute(
        "SELECT DISTINCT c.parent_run_id FROM runs c JOIN runs p ON p.id = c.parent_run_id"
        f" WHERE c.state = 'queued' AND p.state IN {sql_set(TERMINAL)} ORDER BY 1 LIMIT ?", (limit,))]


def task_results(conn: Conn, parent_id: int, spec: JobSpec) -> tuple[bool, list[dict[str, Any]]]:
    """(all settled?, one result per sub-task) for a parent run.

    A sub-task is settled when its latest attempt is terminal and nothing of it is still
    queued or live. Each result: ``task``, ``settled``, ``state``, ``status``, ``attempt``,
    ``attempts``, ``run_id``, ``exit_code``, ``signal``, ``reason``, ``result`` (the
    handoff's ``result``), ``error``, ``stdout_tail``. From ``runs`` + ``job_outcomes``.
    """
    rows = conn.execute(
        "SELECT r.*, o.status, o.handoff, o.stdout_tail, o.stdout_head, o.verdict_reason FROM runs r"
        " LEFT JOIN job_outcomes o ON o.run_id = r.id WHERE r.parent_run_id = ? ORDER BY r.task, r.attempt",
        (parent_id,)).fetchall()
    by_task: dict[str, list[Row]] = {}
    for r in rows:
        by_task.setdefault(r["task"], []).append(r)
    results = []
    all_settled = True
    for task in spec.tasks:
        attempts = by_task.get(task.name, [])
        if not attempts:
            all_settled = False
            results.append({"task": task.name, "settled": False, "state": "missing"})
            continue
        last = attempts[-1]
        settled = all(a["state"] in _TERMINAL for a in attempts)
        all_settled = all_settled and settled
        handoff = None
        if last["handoff"]:
            try:
                handoff = json.loads(last["handoff"])
            except ValueError:
                handoff = None
        results.append({
            "task": task.name, "settled": settled, "state": last["state"],
            "status": last["status"] or last["state"], "ok": last["state"] == RunState.SUCCEEDED,
            "attempt": last["attempt"], "attempts": len(attempts), "run_id": last["id"],
            "exit_code": last["exit_code"], "signal": last["signal"],
            "reason": last["reason"] or last["verdict_reason"],
            "result": (handoff or {}).get("result"), "error": (handoff or {}).get("error"),
            "stdout_tail": (last["stdout_tail"] or last["stdout_head"] or "")[-2000:],
        })
    return all_settled, results


def synthesis_input(job: str, parent_id: int, results: list[dict[str, Any]]) -> bytes:
    """The JSON document given to ``synthesize`` on stdin: ``{job, parent_run_id, succeeded:
    [names], failed: [names], tasks: [result…]}``."""
    doc = {
        "job": job, "parent_run_id": parent_id,
        "succeeded": [r["task"] for r in results if r.get("ok")],
        "failed": [r["task"] for r in results if not r.get("ok")],
        "tasks": [{k: v for k, v in r.items() if k != "settled"} for r in results],
    }
    return json.dumps(doc, default=str).encode()


def parent_outcome(spec: JobSpec, results: list[dict[str, Any]], synth_ok: bool | None) -> tuple[int, dict[str, Any]]:
    """(exit code, handoff-like dict) for the parent, per the module docstring.

    ``synth_ok``: None when there is no ``synthesize`` command.
    """
    failed = [r for r in results if not r.get("ok")]
    ok_names = [r["task"] for r in results if r.get("ok")]
    missing = [f"{r['task']} ({r.get('state')}{': ' + str(r['reason']) if r.get('reason') else ''})" for r in failed]
    if not failed and synth_ok is not False:
        return 0, {"status": "success", "result": {"succeeded": ok_names}, "notes": "all sub-tasks succeeded"}
    if failed and synth_ok and spec.allow_partial and ok_names:
        return 0, {"status": "partial", "result": {"succeeded": ok_names, "missing": [r["task"] for r in failed]},
                   "notes": "partial result; missing: " + "; ".join(missing)}
    if synth_ok is False:
        why = "synthesis failed"
    elif synth_ok is None:
        why = "no synthesis to salvage a partial result"
    elif not spec.allow_partial:
        why = "a sub-task failed and the job does not allow a partial result (allow_partial = false)"
    else:
        why = "nothing succeeded"
    return 1, {"status": "failed", "error": why,
               "result": {"succeeded": ok_names, "missing": [r["task"] for r in failed]},
               "notes": (("missing: " + "; ".join(missing) + "; ") if missing else "") + why}
