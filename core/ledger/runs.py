"""Run rows: the one function that creates a run (``create``), listing runs for the CLI
(``watchkeeper runs``) and queueing manual runs (``trigger``). Run detail lives in
``core.ledger.reads.run_detail``, shared with the console.

All values come from the ``runs``, ``job_outcomes`` and ``events`` tables; times are Unix
seconds (UTC).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from core.ledger.connection import Conn, Ledger, add_event, inserted_id
from core.ledger.lifecycle import FAILED_STATES, NON_TERMINAL, TERMINAL
from core.ledger.page_records import ListedRun
from core.ledger.records import Run
from core.vocabulary import AuditEvent, RunCommand, RunState, Trigger, sql_set


class UnknownJob(LookupError):
    """``trigger`` named a job that is not in the ``jobs`` table, or whose row says it was
    removed (``removed``: ``jobs.enabled = 0``). The words for people are
    ``core.actions.unknown_job_words``."""

    def __init__(self, job: str, *, removed: bool = False) -> None:
        super().__init__(f"{'removed' if removed else 'unknown'} job {job!r}")
        self.job = job
        self.removed = removed


def create(conn: Conn, *, job: str, slot: str, trigger: Trigger | str, actor: str,
           not_before: float, spec_hash: str | None, attempt: int = 1, lineage: str | None = None,
           task: str = "", worker: str = RunCommand.PRIMARY, parent_run_id: int | None = None,
           event: AuditEvent = AuditEvent.RUN_QUEUED, reason: str | None = None, detail: dict[str, Any] | None = None,
           now: float | None = None, if_absent: bool = False) -> int | None:
    """Insert one ``queued`` run and its audit event; the only ``INSERT INTO runs``.

    Call inside the caller's write transaction. ``lineage`` defaults to a fresh one (a new
    slot); a retry passes its predecessor's. ``not_before`` and ``now`` are Unix seconds
    (UTC; ``now`` defaults to the current time, for ``created_at``/``updated_at`` and the
    event). The event has kind ``event`` (``run_queued``, ``retry_scheduled``,
    ``manual_retry``), ``to_state = 'queued'`` and ``reason`` (default: the trigger).

    Returns the new ``runs.id``; with ``if_absent`` None when a run with the same
    (job, slot, task, attempt) exists already (someone else queued it: nothing written).

    Raises:
        StorageError (integrity): the row exists and ``if_absent`` is False.
        ValueError: ``trigger`` is not a ``Trigger``.
    """
    trig = Trigger(trigger)
    ts = time.time() if now is None else now
    sql = ("INSERT INTO runs (job, lineage, attempt, state, slot, task, trigger, worker, parent_run_id,"
           " spec_hash, not_before, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)")
    if if_absent:
        sql += " ON CONFLICT (job, slot, task, attempt) DO NOTHING"
    cur = conn.execute(sql, (job, lineage or uuid.uuid4().hex, attempt, RunState.QUEUED.value, slot, task,
                             trig.value, worker, parent_run_id, spec_hash, not_before, ts, ts))
    if cur.rowcount != 1:
        return None
    run_id = inserted_id(cur)
    add_event(conn, actor=actor, kind=event, run_id=run_id, job=job, attempt=attempt,
              to_state=RunState.QUEUED.value, reason=reason if reason is not None else trig.value,
              detail=detail, at=ts)
    return run_id


def get(conn: Conn, run_id: int, columns: str = "*") -> dict[str, Any] | None:
    """The ``runs`` row ``run_id`` as a dict (only ``columns``, a comma-separated list of
    column names, when given), or None when there is no such run."""
    row = conn.execute(f"SELECT {columns} FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else {k: row[k] for k in row.keys()}


def state_of(conn: Conn, run_id: int) -> str | None:
    """``runs.state`` of ``run_id``, or None when there is no such run."""
    row = conn.execute("SELECT state FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else str(row[0])


def latest_attempt(conn: Conn, lineage: str) -> dict[str, Any] | None:
    """``{id, attempt, state, trigger}`` of the highest attempt of ``lineage``, or None."""
    row = conn.execute("SELECT id, attempt, state, trigger FROM runs WHERE lineage = ? ORDER BY attempt DESC"
                       " LIMIT 1", (lineage,)).fetchone()
    return None if row is None else {k: row[k] for k in row.keys()}


def retry_queued(conn: Conn, lineage: str, attempt: int) -> bool:
    """Whether the retry policy queued a next attempt after ``attempt`` of ``lineage``
    (``runs.trigger = 'retry'``). An operator's retry (``manual_retry``), created later, does
    not count: the attempt was judged before it existed, and a replay must see what the judge saw."""
    return conn.execute("SELECT 1 FROM runs WHERE lineage = ? AND attempt = ? AND trigger = ?",
                        (lineage, attempt + 1, Trigger.RETRY)).fetchone() is not None


def failed_attempts_before(conn: Conn, lineage: str, attempt: int) -> int:
    """How many attempts of ``lineage`` before ``attempt`` ended failed, timed out or orphaned."""
    return int(conn.execute(f"SELECT COUNT(*) FROM runs WHERE lineage = ? AND attempt < ?"
                            f" AND state IN {sql_set(FAILED_STATES)}", (lineage, attempt)).fetchone()[0])


def in_states(conn: Conn, states: Any, columns: str = "*", *,
              limit: int = 100_000) -> list[dict[str, Any]]:
    """Runs whose state is one of ``states`` (a set of ``RunState``), oldest id first, each a
    dict of ``columns`` (comma-separated names)."""
    return [{k: r[k] for k in r.keys()} for r in conn.execute(
        f"SELECT {columns} FROM runs WHERE state IN {sql_set(states)} ORDER BY id LIMIT ?", (limit,))]


def in_ids(conn: Conn, run_ids: Sequence[int]) -> list[dict[str, Any]]:
    """The ``runs`` rows of ``run_ids`` (those that exist), by id, each a dict of its columns."""
    if not run_ids:
        return []
    return [{k: r[k] for k in r.keys()} for r in conn.execute(
        "SELECT * FROM runs WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
        (json.dumps([int(i) for i in run_ids]),))]


def children_in_states(conn: Conn, parent_id: int, states: Any) -> list[int]:
    """Ids of the sub-task runs of ``parent_id`` whose state is one of ``states``, oldest first."""
    return [int(r[0]) for r in conn.execute(
        f"SELECT id FROM runs WHERE parent_run_id = ? AND state IN {sql_set(states)} ORDER BY id LIMIT 10000",
        (parent_id,))]


def queued_of_removed_jobs(conn: Conn, *, removed_before: float, limit: int = 100) -> list[dict[str, Any]]:
    """The ``runs`` rows (dicts of every column) of ``queued`` runs (top-level, and fan-out sub-tasks: no runner
    dispatches those of a removed job either, so their parent would wait out its timeout)
    whose job is disabled in ``jobs`` (no spec defines it) since at least ``removed_before``
    (Unix seconds), oldest first, at most ``limit``."""
    return [{k: r[k] for k in r.keys()} for r in conn.execute(
        "SELECT r.* FROM runs r JOIN jobs j ON j.name = r.job WHERE r.state = ?"
        " AND j.enabled = 0 AND j.updated_at <= ? ORDER BY r.id LIMIT ?",
        (RunState.QUEUED.value, removed_before, limit))]


def list_runs(ledger: Ledger, *, job: str | None = None, state: str | None = None,
              limit: int = 50, host: str | None = None) -> list[ListedRun]:
    """The newest runs by ``Run.time`` (newest first; ties by id), each a ``ListedRun``: the
    ``runs`` record plus its outcome's ``duration_s`` (seconds), ``status``,
    ``verdict_reason`` and ``severity``. ``limit`` is clamped to 1..10,000. ``host``: only runs spawned on that
    host (``runs.host``).

    Ordered by time, not by id: a retry queued before another slot's run may end after it,
    and a long run ends after runs queued later. Two bounded reads keep it cheap on a large
    ledger: finished runs by ``ended_at`` (index ``runs_ended``) and runs still in flight
    (index ``runs_state``), merged here.
    """
    limit = max(1, min(int(limit), 10000))
    base = ("SELECT r.*, o.duration_s, o.status, o.verdict_reason, o.severity FROM runs r"
            " LEFT JOIN job_outcomes o ON o.run_id = r.id WHERE ")
    where, params = [], []
    if job:
        where.append("r.job = ?")
        params.append(job)
    if state:
        where.append("r.state = ?")
        params.append(state)
    if host:
        where.append("r.host = ?")
        params.append(host)
    rows: list[dict[str, Any]] = []
    if not state or state in TERMINAL:
        conds = " AND ".join(["r.ended_at IS NOT NULL", *where])
        rows += ledger.rows(f"{base}{conds} ORDER BY r.ended_at DESC, r.id DESC LIMIT ?", (*params, limit))
    if not state or state not in TERMINAL:
        # "+r.job" keeps SQLite on runs_state (few rows in flight) rather than walking every
        # run of the job through runs_job_ended.
        conds = " AND ".join([f"r.state IN {sql_set(NON_TERMINAL)}", *(w.replace("r.job", "+r.job") for w in where)])
        # A verifying run has ended_at already: the first read may have it too.
        seen = {r["id"] for r in rows}
        rows += [r for r in ledger.rows(
            f"{base}{conds} ORDER BY COALESCE(r.started_at, r.created_at) DESC, r.id DESC LIMIT ?",
            (*params, limit)) if r["id"] not in seen]
    listed = [ListedRun(run=Run.from_row(r), duration_s=r["duration_s"], status=r["status"],
                        verdict_reason=r["verdict_reason"], severity=r["severity"]) for r in rows]
    listed.sort(key=lambda x: (x.run.time, x.run.id), reverse=True)
    return listed[:limit]


def job_known(ledger: Ledger, job: str) -> bool:
    """True when ``job`` has a ``jobs`` row (enabled or not) or any run in ``runs``."""
    return ledger.one("SELECT 1 FROM jobs WHERE name = ? UNION ALL SELECT 1 FROM runs WHERE job = ? LIMIT 1",
                      (job, job)) is not None


def trigger(ledger: Ledger, job: str, *, actor: str) -> int:
    """Queue attempt 1 of a manual run of ``job`` now (slot ``manual:<uuid>``); returns its id.

    Raises:
        UnknownJob: the job is not in the ``jobs`` table, or was removed (``enabled = 0``;
            ``removed`` says which).
    """
    now = time.time()

    def tx(conn: Conn) -> int:
        row = conn.execute("SELECT spec_hash, enabled FROM jobs WHERE name = ?", (job,)).fetchone()
        if row is None:
            raise UnknownJob(job)
        if not row["enabled"]:
            raise UnknownJob(job, removed=True)
        run_id = create(conn, job=job, slot=f"manual:{uuid.uuid4().hex[:12]}", trigger=Trigger.MANUAL,
                        actor=actor, not_before=now, spec_hash=row["spec_hash"], now=now)
        assert run_id is not None  # a fresh manual slot never conflicts
        return run_id
    return ledger.write(tx)


def job_names(ledger: Ledger) -> list[str]:
    """Names of enabled jobs in the ``jobs`` table, sorted."""
    return [r[0] for r in ledger.query("SELECT name FROM jobs WHERE enabled = 1 ORDER BY name LIMIT 10000")]


# -- abandoning a run of another host -------------------------------------------------------
def request_kill(conn: Conn, run_id: int, *, actor: str, now: float | None = None) -> bool:
    """Inside a write transaction: ask the runner that owns ``run_id`` (on another host) to
    kill its processes: ``runs.abandon_requested_at`` / ``_by`` and a ``kill_requested``
    event. The owner confirms with ``confirm_kill``. Returns whether the run exists."""
    ts = time.time() if now is None else now
    row = conn.execute("SELECT job, attempt, runner_id, host FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        return False
    conn.execute("UPDATE runs SET abandon_requested_at = ?, abandon_requested_by = ? WHERE id = ?",
                 (ts, actor, run_id))
    add_event(conn, actor=actor, kind=AuditEvent.KILL_REQUESTED, run_id=run_id, job=row["job"], attempt=row["attempt"],
              reason=f"asked runner {row['runner_id']} on {row['host']} to kill the run's processes",
              detail={"runner_id": row["runner_id"], "host": row["host"]}, at=ts)
    return True


def kill_requests(conn: Conn, run_ids: list[int]) -> list[dict[str, Any]]:
    """Of ``run_ids`` (a runner's own runs), those an operator elsewhere asked it to kill and
    that it has not confirmed yet: ``runs`` rows as dicts, by id (primary-key lookups only)."""
    if not run_ids:
        return []
    rows = conn.execute("SELECT * FROM runs WHERE id IN (SELECT value FROM json_each(?))"
                        " AND abandon_requested_at IS NOT NULL ORDER BY id", (json.dumps(sorted(run_ids)),))
    return [{k: r[k] for k in r.keys()} for r in rows.fetchall()]


def confirm_kill(conn: Conn, run_id: int, *, actor: str, note: str, now: float | None = None) -> bool:
    """Inside a write transaction: the owning runner killed (or found gone) the processes of
    ``run_id`` that were asked for: clears ``runs.abandon_requested_at`` (conditional, so it
    is confirmed once) and appends an ``abandon_kill`` event with ``note``. Returns whether
    this call confirmed it."""
    ts = time.time() if now is None else now
    row = conn.execute("SELECT job, attempt, abandon_requested_by FROM runs WHERE id = ?"
                       " AND abandon_requested_at IS NOT NULL", (run_id,)).fetchone()
    if row is None:
        return False
    if conn.execute("UPDATE runs SET abandon_requested_at = NULL WHERE id = ? AND abandon_requested_at IS NOT NULL",
                    (run_id,)).rowcount != 1:
        return False
    add_event(conn, actor=actor, kind=AuditEvent.ABANDON_KILL, run_id=run_id, job=row["job"], attempt=row["attempt"],
              reason=note, detail={"requested_by": row["abandon_requested_by"]}, at=ts)
    return True
