"""Runs for tests, made only through the ledger's own functions.

A run is created ``queued`` with ``core.ledger.runs.create`` and moved along a legal path of
the transition table with ``core.ledger.lifecycle.apply`` (each move compare-and-set, with its
audit event), so a test can never hold a run that the product could not have written.
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

from core.ledger import lifecycle, outcomes, runs
from core.vocabulary import EndReason

#: The legal path from ``queued`` to each state (the last step is the state itself).
PATHS: dict[str, list[str]] = {
    "queued": [], "spawned": ["spawned"], "running": ["spawned", "running"],
    "verifying": ["spawned", "running", "verifying"], "abandoned": ["abandoned"],
    "timed_out": ["spawned", "running", "timed_out"], "orphaned": ["spawned", "running", "orphaned"],
    "succeeded": ["spawned", "running", "verifying", "succeeded"],
    "failed": ["spawned", "running", "verifying", "failed"],
    "blocked": ["spawned", "running", "verifying", "blocked"],
}


#: The usual end of each terminal state, when a test names none.
_END_CODES = {"succeeded": EndReason.COMPLETED, "failed": EndReason.EXIT_CODE, "blocked": EndReason.BLOCKED,
              "timed_out": EndReason.TIMEOUT, "orphaned": EndReason.LEASE_EXPIRED, "abandoned": EndReason.OPERATOR}


def add_run(conn: sqlite3.Connection, job: str, state: str = "queued", *, lineage: str | None = None,
            attempt: int = 1, slot: str | None = None, task: str = "", trigger: str = "manual",
            worker: str = "primary", parent_run_id: int | None = None, at: float = 0.0,
            started_at: float | None = None, ended_at: float | None = None, reason: str | None = None,
            reason_code: str | None = None, live: dict[str, Any] | None = None, end: dict[str, Any] | None = None,
            outcome: dict[str, Any] | None = None, artifacts_root: Path | None = None,
            actor: str = "test") -> int:
    """Create a run of ``job`` and move it to ``state`` inside the caller's write transaction.

    Times are Unix seconds (UTC): ``at`` is when it was queued, ``started_at`` (default ``at``)
    when it was spawned and started, ``ended_at`` when a terminal state was reached (default
    the lifecycle's: the time of the last move). ``live`` holds the columns set on the move to
    ``spawned`` (pid, pgid, lease_until, runner_id, artifacts_dir ...), ``end`` those set on the
    last move (exit_code, signal ...). ``outcome`` (``job_outcomes`` columns) records an outcome
    at ``ended_at``. A terminal ``state`` gets ``reason_code`` (``core.vocabulary.EndReason``),
    by default ``reason`` when that is a code, else the state's usual code (exit_code, signal,
    timeout, lease_expired, operator ...). ``artifacts_root`` gives the run the runner's default artifacts folder,
    ``<artifacts_root>/<run id>``. Returns the new ``runs.id``.
    """
    run_id = runs.create(conn, job=job, slot=slot or f"manual:{uuid.uuid4().hex}", trigger=trigger, actor=actor,
                         not_before=at, spec_hash=None, attempt=attempt, lineage=lineage, task=task,
                         worker=worker, parent_run_id=parent_run_id, now=at)
    assert run_id is not None
    start = at if started_at is None else started_at
    live = dict(live or {})
    if artifacts_root is not None:
        live["artifacts_dir"] = str(artifacts_root / str(run_id))
    path = PATHS[state]
    if state == "abandoned" and any(v is not None for v in live.values()):
        path = ["spawned", "running", "abandoned"]  # it had a process (pid, artifacts) when abandoned
    code = None
    if state in _END_CODES:
        code = EndReason(reason_code or (reason if reason in EndReason._value2member_map_ else None)
                         or (EndReason.SIGNAL if state == "failed" and (end or {}).get("signal") is not None
                             else _END_CODES[state]))
    cur = "queued"
    for nxt in path:
        last = nxt == path[-1]
        fields: dict[str, Any] = {}
        if nxt == "spawned":
            fields = {"spawned_at": start, **live}
        elif nxt == "running":
            fields = {"started_at": start}
        if last:
            fields.update(end or {})
            if ended_at is not None:
                fields["ended_at"] = ended_at
        when = ended_at if (last and ended_at is not None) else start
        assert lifecycle.apply(conn, run_id, attempt, cur, nxt, actor=actor, reason=reason if last else None,
                               reason_code=code if last else None, fields=fields, at=when)
        cur = nxt
    if outcome is not None:
        outcomes.record(conn, run_id, now=ended_at if ended_at is not None else start,
                        **{"state": state, "status": state, **outcome})
    return run_id
