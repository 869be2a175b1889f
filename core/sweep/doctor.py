"""``watchkeeper doctor``: check the ledger's invariants, and settle what can be settled.

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
from dataclasses import asdict, dataclass, field
from typing import Any

from core import liveness
from core.ledger.connection import Ledger, row_dict
from core.ledger.lifecycle import LIVE, NON_TERMINAL, TERMINAL
from core.sweep import sweep

_LIVE_SQL = ", ".join(f"'{s.value}'" for s in sorted(LIVE))
_NON_TERMINAL_SQL = ", ".join(f"'{s.value}'" for s in sorted(NON_TERMINAL))
_TERMINAL_SQL = ", ".join(f"'{s.value}'" for s in sorted(TERMINAL))


@dataclass(frozen=True)
class Violation:
    """One broken invariant. ``check`` is the check's code (see module docstring)."""

    check: str
    message: str
    run_id: int | None = None
    repairable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = f"run {self.run_id}: " if self.run_id is not None else ""
        return f"[{self.check}] {where}{self.message}"


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
    res = [r[0] for r in ledger.query("PRAGMA integrity_check")]
    if res != ["ok"]:
        out.extend(Violation("integrity", line) for line in res[:20])

    for r in ledger.query(
            "SELECT id, state, last_to FROM (SELECT r.id, r.state, (SELECT e.to_state FROM events e"
            " WHERE e.run_id = r.id AND e.kind = 'transition' ORDER BY e.id DESC LIMIT 1) AS last_to FROM runs r)"
            " WHERE (last_to IS NULL AND state != 'queued') OR (last_to IS NOT NULL AND last_to != state)"
            " ORDER BY id LIMIT 1000"):
        last = r["last_to"] or "none (never moved)"
        out.append(Violation("state_vs_events", f"state is {r['state']} but the last transition event says {last}",
                             r["id"]))

    for r in ledger.query(
            f"SELECT run_id, count(*) AS n FROM events WHERE kind = 'transition' AND to_state IN ({_TERMINAL_SQL})"
            " AND run_id IS NOT NULL GROUP BY run_id HAVING n > 1 ORDER BY run_id LIMIT 1000"):
        out.append(Violation("terminal_twice", f"{r['n']} transitions into a terminal state", r["run_id"]))

    for r in ledger.query(
            "SELECT lineage, min(id) AS run_id, min(attempt) AS lo, max(attempt) AS hi, count(*) AS n,"
            " count(DISTINCT attempt) AS d FROM runs GROUP BY lineage"
            " HAVING lo != 1 OR hi != n OR d != n ORDER BY run_id LIMIT 1000"):
        attempts = [a[0] for a in ledger.query("SELECT attempt FROM runs WHERE lineage = ? ORDER BY attempt LIMIT 200",
                                               (r["lineage"],))]
        out.append(Violation("attempt_gap", f"lineage {r['lineage']} has attempts {attempts}, expected 1..{r['n']}",
                             r["run_id"]))

    for r in ledger.query(
            "SELECT job, slot, task, attempt, min(id) AS run_id, count(*) AS n FROM runs"
            " GROUP BY job, slot, task, attempt HAVING n > 1 ORDER BY run_id LIMIT 1000"):
        out.append(Violation("slot_duplicate", f"job {r['job']} slot {r['slot']} task {r['task']!r} attempt"
                             f" {r['attempt']} has {r['n']} runs", r["run_id"]))
    for r in ledger.query(
            "SELECT job, slot, task, min(id) AS run_id, count(DISTINCT lineage) AS n FROM runs"
            " GROUP BY job, slot, task HAVING n > 1 ORDER BY run_id LIMIT 1000"):
        out.append(Violation("slot_duplicate", f"job {r['job']} slot {r['slot']} task {r['task']!r} ran as"
                             f" {r['n']} lineages", r["run_id"]))

    for r in ledger.query(
            f"SELECT lineage, min(id) AS run_id, count(*) AS n FROM runs WHERE state IN ({_NON_TERMINAL_SQL})"
            " GROUP BY lineage HAVING n > 1 ORDER BY run_id LIMIT 1000"):
        out.append(Violation("lineage_overlap", f"lineage {r['lineage']} has {r['n']} unfinished attempts",
                             r["run_id"]))

    for r in ledger.query(
            "SELECT c.id, c.state, c.task, c.attempt, p.id AS parent_id, p.state AS parent_state FROM runs c"
            " JOIN runs p ON p.id = c.parent_run_id WHERE c.state = 'queued'"
            f" AND p.state IN ({_TERMINAL_SQL}) ORDER BY c.id LIMIT 1000"):
        queued = r["state"] == "queued"
        out.append(Violation(
            "subtask_of_ended_parent",
            f"sub-task {r['task']} attempt {r['attempt']} is {r['state']} but its parent run {r['parent_id']} is"
            f" {r['parent_state']}" + (" (would be abandoned: parent_ended)" if queued
                                       else " (left to its exit, its timeout or the sweep)"),
            r["id"], repairable=queued))

    out.extend(_live_runs(ledger, settings, now))
    return out


def _live_runs(ledger: Ledger, settings: Any, now: float) -> list[Violation]:
    runs = [row_dict(r) for r in ledger.query(
        "SELECT id, job, attempt, state, pid, pid_create_time, pgid, runner_id, lease_until, spawned_at, updated_at"
        f" FROM runs WHERE state IN ({_LIVE_SQL}) ORDER BY id")]
    owners = {r["id"]: row_dict(r) for r in ledger.query(
        f"SELECT * FROM runners WHERE id IN (SELECT DISTINCT runner_id FROM runs WHERE state IN ({_LIVE_SQL}))")}
    host = liveness.hostname()
    out = []
    for run in runs:
        owner = owners.get(run["runner_id"]) if run["runner_id"] else None
        verdict = sweep.assess(run, owner, now=now, settings=settings, this_host=host)
        lease_expired = run["lease_until"] is None or run["lease_until"] < now
        who = f"runner {run['runner_id']}" if run["runner_id"] else "no runner"
        if verdict.action in ("orphan", "kill"):
            alive = "process still alive" if verdict.action == "kill" else "process not alive"
            out.append(Violation("unowned_live_run", f"{run['state']} with {who} gone, lease expired, {alive}"
                                 f" (would be orphaned: {verdict.reason})", run["id"], repairable=True))
        elif verdict.action == "stalled" and lease_expired:
            out.append(Violation("stalled_owner", f"{run['state']}, lease expired, owner {run['runner_id']} is"
                                 " stalled (process alive, heartbeat stale)", run["id"]))
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
