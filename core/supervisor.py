"""Supervisor (minimal placeholder owned by the supervisor work; keeps the runner honest).

Interface the runner and sweep rely on:

* ``settle(ledger, run_id, settings=..., actor=...) -> str`` — for a run in ``verifying``:
  verify, move it to succeeded | failed | blocked (compare-and-set, outcome completed and the
  retry queued in the same transaction), then judge. Returns the final state (or the state
  someone else already moved it to).
* ``judge_run(ledger, run_id, settings=...) -> None`` — after any terminal move (timed_out,
  orphaned, abandoned, spawn failure): judge the outcome and open/update escalations.
"""

from __future__ import annotations

from typing import Any

from core import lifecycle, outcomes, retries
from core.ledger import Ledger
from core.lifecycle import State


def settle(ledger: Ledger, run_id: int, *, settings: Any = None, actor: str = "supervisor") -> str:
    row = ledger.one("SELECT * FROM runs WHERE id = ?", (run_id,))
    if row is None or row["state"] != State.VERIFYING:
        return row["state"] if row else "missing"
    ok = row["exit_code"] == 0
    to = State.SUCCEEDED if ok else State.FAILED
    reason = None if ok else ("exit_code" if row["exit_code"] is not None else "signal")

    def then(conn):
        outcomes.record(conn, run_id, state=to.value, status="success" if ok else "failed", reason=reason)
        if not ok:
            retries.follow_up(conn, run_id, to.value, actor=actor)

    lifecycle.transition(ledger, run_id, row["attempt"], State.VERIFYING, to, actor=actor, reason=reason, then=then)
    judge_run(ledger, run_id, settings=settings)
    return ledger.one("SELECT state FROM runs WHERE id = ?", (run_id,))["state"]


def judge_run(ledger: Ledger, run_id: int, *, settings: Any = None) -> None:
    return None
