"""``watchkeeper doctor``: check the ledger's invariants, and settle what can be settled.

The checks that are queries live in ``core.ledger.invariants``; this module adds the ones
that need liveness (whose runs would the sweep orphan) and the repair.

Checks (each violation names the run it concerns):

* ``integrity``        – ``PRAGMA integrity_check`` is not ``ok``;
* ``state_vs_events``  – a run's state differs from the ``to_state`` of its last
  ``transition`` event (a run with no transition must be ``queued``);
* ``unowned_live_run`` – a spawned/running/verifying run with neither a live owner nor an
  unexpired lease (exactly what the sweep would orphan) — repairable;
* ``stalled_owner``    – such a run whose owner's process is alive but not heartbeating;
  not repaired (it may wake up), reported;
* ``terminal_twice``   – more than one transition into a terminal state for one run;
* ``attempt_gap``      – attempts of a lineage are not exactly 1..n;
* ``slot_duplicate``   – one (job, slot, task) has two runs for one attempt, or two lineages;
* ``lineage_overlap``  – more than one unfinished attempt in one lineage;
* ``schema``           – a table or column the code expects is missing (read with
  sqlite-utils against the schema every migration builds);
* ``outcome_copy``     – a ``job_outcomes`` row whose copy of its run's job, lineage or
  attempt (or, once the run ended, state) differs from ``runs``;
* ``subtask_of_ended_parent`` – a fan-out sub-task still queued although its parent run is
  terminal (it would run for a parent that no longer waits for it); repairable (abandoned,
  reason ``parent_ended``). A live one is not a violation: a parent that timed out leaves
  its running sub-tasks to their own exit, timeout or the sweep.

``--repair`` settles the repairable ones through the sweep (``core.ledger.lifecycle`` moves,
audited with actor ``doctor``), then checks again. The audit trail is append-only, so the
other findings are reported, never rewritten.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from core import liveness
from core.ledger import invariants
from core.ledger.connection import Ledger
from core.ledger.invariants import Violation
from core.ledger.sql_store import SqlStore
from core.sweep import sweep
from core.vocabulary import SweepAction


@dataclass
class DoctorReport:
    """Result of ``diagnose``: ``violations`` left after any repair; ``repaired`` one line per
    settled run; ``errors`` from the repair pass."""

    violations: list[Violation] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "violations": [v.to_dict() for v in self.violations],
                "repaired": self.repaired, "errors": self.errors}


def check(ledger: Ledger, settings: Any, *, now: float | None = None) -> list[Violation]:
    """Run every check against the ledger (read-only). ``now`` is Unix seconds; ``settings``
    supplies ``lease`` and ``start_timeout``. Returns violations, run-less ones first."""
    now = time.time() if now is None else now
    out: list[Violation] = []
    out.extend(invariants.ledger_schema(ledger))
    out.extend(SqlStore(ledger).invariant_violations())
    out.extend(_live_runs(ledger, settings, now))
    return out


def _live_runs(ledger: Ledger, settings: Any, now: float) -> list[Violation]:
    host = liveness.hostname()
    out = []
    for run, owner in SqlStore(ledger).live_runs_and_owners():
        assessment = sweep.assess(run, owner, now=now, settings=settings, this_host=host)
        lease_expired = run.lease_until is None or run.lease_until < now
        who = f"with runner {run.runner_id} gone" if run.runner_id else "with no runner"
        if assessment.action in (SweepAction.ORPHAN, SweepAction.KILL):
            alive = "process still alive" if assessment.action == SweepAction.KILL else "process not alive"
            out.append(Violation("unowned_live_run", f"{run.state} {who}, lease expired, {alive}"
                                 f" (would be orphaned: {assessment.reason})", run.id, repairable=True))
        elif assessment.action == SweepAction.STALLED and lease_expired:
            out.append(Violation("stalled_owner", f"{run.state}, lease expired, owner {run.runner_id} is"
                                 " stalled (process alive, heartbeat stale)", run.id))
    return out


def diagnose(ledger: Ledger, settings: Any, *, repair: bool = False, actor: str = "doctor") -> DoctorReport:
    """Check the ledger; with ``repair`` first settle every repairable violation through
    the sweep (orphaned via ``core.ledger.lifecycle``, audited as ``actor``; live processes of gone
    runners are killed first) and check again. Never raises for violations; ledger errors
    during repair are listed in ``DoctorReport.errors``."""
    report = DoctorReport()
    if repair and any(v.repairable for v in check(ledger, settings)):
        swept = sweep.Sweeper(settings, actor=actor).settle(ledger)
        report.repaired = [f"run {i}: orphaned" + (" (process group killed)" if i in swept.killed else "")
                           for i in swept.orphaned]
        report.repaired += [f"run {i}: abandoned (parent_ended)" for i in swept.settled_subtasks]
        report.errors = list(swept.errors)
    report.violations = check(ledger, settings)
    return report
