"""The ledger's invariants as queries: what ``watchkeeper doctor`` reports (see
``core.sweep.doctor`` for the checks that also need process liveness, and the repair).

Each check returns ``Violation``s naming the run concerned; every query is bounded
(``LIMIT 1000``). Read-only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from core.ledger.connection import MIGRATIONS, Conn, Ledger, split_sql
from core.ledger.lifecycle import NON_TERMINAL, TERMINAL
from core.vocabulary import AuditEvent, RunState, sql_set

if TYPE_CHECKING:  # imported by expected_schema: every command that imports this module would pay for it
    import sqlite_utils


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


def check(conn: Conn) -> list[Violation]:
    """Every query-only invariant check (see ``core.sweep.doctor`` for the list), run-less
    violations (``integrity``) first."""
    out: list[Violation] = []
    res = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    if res != ["ok"]:
        out.extend(Violation("integrity", line) for line in res[:20])

    for r in conn.execute(
            "SELECT id, state, last_to FROM (SELECT r.id, r.state, (SELECT e.to_state FROM events e"
            f" WHERE e.run_id = r.id AND e.kind IN {sql_set([AuditEvent.TRANSITION])} ORDER BY e.id DESC LIMIT 1) AS last_to"
            " FROM runs r)"
            " WHERE (last_to IS NULL AND state != 'queued') OR (last_to IS NOT NULL AND last_to != state)"
            " ORDER BY id LIMIT 1000"):
        last = r["last_to"] or "none (never moved)"
        out.append(Violation("state_vs_events", f"state is {r['state']} but the last transition event says {last}",
                             r["id"]))

    for r in conn.execute(
            f"SELECT run_id, count(*) AS n FROM events WHERE kind IN {sql_set([AuditEvent.TRANSITION])}"
            f" AND to_state IN {sql_set(TERMINAL)}"
            " AND run_id IS NOT NULL GROUP BY run_id HAVING count(*) > 1 ORDER BY run_id LIMIT 1000"):
        out.append(Violation("terminal_twice", f"{r['n']} transitions into a terminal state", r["run_id"]))

    for r in conn.execute(
            "SELECT lineage, min(id) AS run_id, min(attempt) AS lo, max(attempt) AS hi, count(*) AS n,"
            " count(DISTINCT attempt) AS d FROM runs GROUP BY lineage"
            " HAVING min(attempt) != 1 OR max(attempt) != count(*) OR count(DISTINCT attempt) != count(*)"
            " ORDER BY run_id LIMIT 1000"):
        attempts = [a[0] for a in conn.execute("SELECT attempt FROM runs WHERE lineage = ? ORDER BY attempt LIMIT 200",
                                               (r["lineage"],))]
        out.append(Violation("attempt_gap", f"lineage {r['lineage']} has attempts {attempts}, expected 1..{r['n']}",
                             r["run_id"]))

    for r in conn.execute(
            "SELECT job, slot, task, attempt, min(id) AS run_id, count(*) AS n FROM runs"
            " GROUP BY job, slot, task, attempt HAVING count(*) > 1 ORDER BY run_id LIMIT 1000"):
        out.append(Violation("slot_duplicate", f"job {r['job']} slot {r['slot']} task {r['task']!r} attempt"
                             f" {r['attempt']} has {r['n']} runs", r["run_id"]))
    for r in conn.execute(
            "SELECT job, slot, task, min(id) AS run_id, count(DISTINCT lineage) AS n FROM runs"
            " GROUP BY job, slot, task HAVING count(DISTINCT lineage) > 1 ORDER BY run_id LIMIT 1000"):
        out.append(Violation("slot_duplicate", f"job {r['job']} slot {r['slot']} task {r['task']!r} ran as"
                             f" {r['n']} lineages", r["run_id"]))

    for r in conn.execute(
            f"SELECT lineage, min(id) AS run_id, count(*) AS n FROM runs WHERE state IN {sql_set(NON_TERMINAL)}"
            " GROUP BY lineage HAVING count(*) > 1 ORDER BY run_id LIMIT 1000"):
        out.append(Violation("lineage_overlap", f"lineage {r['lineage']} has {r['n']} unfinished attempts",
                             r["run_id"]))

    for r in conn.execute(
            "SELECT c.id, c.state, c.task, c.attempt, p.id AS parent_id, p.state AS parent_state FROM runs c"
            " JOIN runs p ON p.id = c.parent_run_id WHERE c.state = 'queued'"
            f" AND p.state IN {sql_set(TERMINAL)} ORDER BY c.id LIMIT 1000"):
        queued = r["state"] == RunState.QUEUED
        out.append(Violation(
            "subtask_of_ended_parent",
            f"sub-task {r['task']} attempt {r['attempt']} is {r['state']} but its parent run {r['parent_id']} is"
            f" {r['parent_state']}" + (" (would be abandoned: parent_ended)" if queued
                                       else " (left to its exit, its timeout or the sweep)"),
            r["id"], repairable=queued))

    out.extend(_outcome_copies(conn))
    return out


def _outcome_copies(conn: Conn) -> list[Violation]:
    """``job_outcomes`` keeps copies of ``runs.job``, ``lineage`` and ``attempt`` (so judging
    history reads one table) and the run's terminal ``state``: they must agree with ``runs``."""
    out = []
    for r in conn.execute(
            "SELECT o.run_id, o.job AS o_job, o.lineage AS o_lineage, o.attempt AS o_attempt, o.state AS o_state,"
            " r.job, r.lineage, r.attempt, r.state FROM job_outcomes o JOIN runs r ON r.id = o.run_id"
            " WHERE o.job != r.job OR o.lineage != r.lineage OR o.attempt != r.attempt"
            f" OR (r.state IN {sql_set(TERMINAL)} AND o.state != r.state) ORDER BY o.run_id LIMIT 1000"):
        diffs = [f"{col} {r['o_' + col]!r} (runs: {r[col]!r})" for col in ("job", "lineage", "attempt", "state")
                 if r["o_" + col] != r[col]]
        out.append(Violation("outcome_copy", "job_outcomes disagrees with runs: " + ", ".join(diffs), r["run_id"]))
    return out


@cache
def expected_schema() -> dict[str, frozenset[str]]:
    """Table → column names the code expects: every migration applied to an empty in-memory
    database, read back through sqlite-utils."""
    import sqlite_utils

    db = sqlite_utils.Database(memory=True)
    for script in MIGRATIONS:
        for stmt in split_sql(script):
            db.execute(stmt)
    return {t: frozenset(db[t].columns_dict) for t in db.table_names()}


def ledger_schema(ledger: Ledger) -> list[Violation]:
    """``schema`` for either backend: sqlite-utils' view of a SQLite file, PostgreSQL's
    ``information_schema`` (the ledger's schema, ``current_schema()``) for a URL."""
    if ledger.backend == "sqlite":
        return schema(ledger.db)
    have: dict[str, set[str]] = {}
    for r in ledger.query("SELECT table_name, column_name FROM information_schema.columns"
                          " WHERE table_schema = current_schema()"):
        have.setdefault(r[0], set()).add(r[1])
    return _missing(have)


def schema(db: sqlite_utils.Database) -> list[Violation]:
    """Tables or columns the code expects (``expected_schema``) that the ledger lacks: a
    hand-edited or half-restored file, found before a write fails on it."""
    return _missing({t: set(db[t].columns_dict) for t in db.table_names()})


def _missing(have: dict[str, set[str]]) -> list[Violation]:
    out = []
    for table, columns in sorted(expected_schema().items()):
        if table not in have:
            out.append(Violation("schema", f"table {table} is missing"))
            continue
        missing = sorted(columns - have[table])
        if missing:
            out.append(Violation("schema", f"table {table} lacks column(s) {', '.join(missing)}"))
    return out
