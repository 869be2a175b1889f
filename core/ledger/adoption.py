"""Ledger side of ``watchkeeper exec`` (cron adoption): one job upserted on its own, a run
created and claimed in one transaction, its lease renewed by the wrapper, and the retries its
policy queued found again.

A run started by ``exec`` has no runner (``runs.runner_id`` is NULL): the wrapper renews
``lease_until`` itself, so when the wrapper dies the lease runs out and the sweep settles the
run (killing a job still running on this host), exactly as for a runner's run.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from core.ledger import lifecycle, runs
from core.ledger.connection import Conn, add_event
from core.spec.model import JobSpec, spec_json
from core.vocabulary import AuditEvent, RunState, Trigger

_LIVE = tuple(s.value for s in lifecycle.LIVE)


def upsert_job(conn: Conn, spec: JobSpec, *, source: str | None, line: int | None, actor: str,
               now: float | None = None) -> str:
    """Insert or update the ``jobs`` row of ``spec`` alone (no other job is touched, unlike a
    folder sync); enabled. Appends ``spec_loaded`` or ``spec_changed`` when it is new or
    differs. Returns ``"added"``, ``"changed"`` or ``"unchanged"``. Call inside a write."""
    at = time.time() if now is None else now
    row = conn.execute("SELECT spec_hash, source, enabled FROM jobs WHERE name = ?", (spec.name,)).fetchone()
    values = (spec.kind, spec_json(spec), spec.spec_hash(), source, line, spec.schedule_text(), spec.owner,
              spec.intent, at)
    if row is None:
        conn.execute("INSERT INTO jobs (kind, spec, spec_hash, source, source_line, schedule_text, owner, intent,"
                     " updated_at, name, enabled) VALUES (?,?,?,?,?,?,?,?,?,?,1)", (*values, spec.name))
        add_event(conn, actor=actor, kind=AuditEvent.SPEC_LOADED, job=spec.name, at=at, reason=source or "watchkeeper exec",
                  detail={"source": source, "spec_hash": spec.spec_hash()})
        return "added"
    if row["spec_hash"] == spec.spec_hash() and row["enabled"] == 1 and row["source"] == source:
        return "unchanged"
    conn.execute("UPDATE jobs SET kind=?, spec=?, spec_hash=?, source=?, source_line=?, schedule_text=?, owner=?,"
                 " intent=?, updated_at=?, enabled=1, last_error=NULL WHERE name=?", (*values, spec.name))
    add_event(conn, actor=actor, kind=AuditEvent.SPEC_CHANGED, job=spec.name, at=at, reason=source or "watchkeeper exec",
              detail={"source": source, "old_hash": row["spec_hash"], "spec_hash": spec.spec_hash()})
    return "changed"


def start_run(conn: Conn, spec: JobSpec, *, actor: str, lease_s: float, host: str | None = None,
              boot_id: str | None = None, now: float | None = None) -> dict[str, Any]:
    """Create attempt 1 of a new lineage (trigger ``exec``, slot ``exec:<uuid>``) and move it
    ``queued → spawned`` in the same transaction, so no runner sharing the ledger can claim it;
    ``lease_until`` = now + ``lease_s`` seconds; ``host``/``boot_id``: the host life it runs
    on (``runs.host``, ``runs.boot_id``). Returns the ``runs`` row as a dict."""
    at = time.time() if now is None else now
    run_id = runs.create(conn, job=spec.name, slot=f"exec:{uuid.uuid4().hex}", trigger=Trigger.EXEC, actor=actor,
                         not_before=at, spec_hash=spec.spec_hash(), now=at)
    assert run_id is not None
    return claim(conn, run_id, 1, actor=actor, lease_s=lease_s, host=host, boot_id=boot_id, now=at)


def claim(conn: Conn, run_id: int, attempt: int, *, actor: str, lease_s: float, host: str | None = None,
          boot_id: str | None = None, now: float | None = None) -> dict[str, Any]:
    """``queued → spawned`` for run ``run_id`` (compare-and-set on state and attempt), lease
    from now, on host life ``host``/``boot_id``. Returns the ``runs`` row; raises
    ``LookupError`` when someone else moved it."""
    at = time.time() if now is None else now
    if not lifecycle.apply(conn, run_id, attempt, RunState.QUEUED, RunState.SPAWNED, actor=actor,
                           fields={"spawned_at": at, "lease_until": at + lease_s, "host": host, "boot_id": boot_id},
                           at=at):
        raise LookupError(f"run {run_id} is no longer queued")
    row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    return {k: row[k] for k in row.keys()}


def renew_lease(conn: Conn, run_id: int, until: float) -> bool:
    """Set ``runs.lease_until`` (Unix seconds) of run ``run_id`` while it is spawned, running
    or verifying. Returns False once the run is no longer live."""
    cur = conn.execute(f"UPDATE runs SET lease_until = ? WHERE id = ? AND state IN ({','.join('?' * len(_LIVE))})",
                       (until, run_id, *_LIVE))
    return cur.rowcount == 1


def queued_retry(conn: Conn, lineage: str, after_attempt: int) -> dict[str, Any] | None:
    """The ``queued`` next attempt of ``lineage`` (attempt ``after_attempt + 1``) that the
    retry policy created, or None."""
    row = conn.execute("SELECT * FROM runs WHERE lineage = ? AND attempt = ? AND state = 'queued' AND task = ''",
                       (lineage, after_attempt + 1)).fetchone()
    return None if row is None else {k: row[k] for k in row.keys()}


def run_end(conn: Conn, run_id: int) -> dict[str, Any] | None:
    """``state``, ``exit_code``, ``signal``, ``reason``, ``reason_code`` and ``lineage`` of run ``run_id``, with
    the outcome's ``verdict_reason`` and ``stderr_tail``; None when there is no such run."""
    row = conn.execute("SELECT r.state, r.exit_code, r.signal, r.reason, r.reason_code, r.lineage, r.attempt, r.pid,"
                       " o.verdict_reason, COALESCE(NULLIF(o.stderr_tail, ''), o.stderr_head) AS stderr_tail FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id"
                       " WHERE r.id = ?", (run_id,)).fetchone()
    return None if row is None else {k: row[k] for k in row.keys()}
