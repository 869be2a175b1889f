"""Reading runs for the CLI (``watchkeeper runs`` / ``show``) and queueing manual runs.

All values come from the ``runs``, ``job_outcomes`` and ``events`` tables; times are Unix
seconds (UTC).
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from core.ledger import Ledger, add_event, row_dict
from core.outcomes import get as get_outcome

OUTPUT_PREVIEW = 4096  # bytes of head and of tail read from each output file


class UnknownJob(LookupError):
    """``trigger`` named a job that is not in the ``jobs`` table (or is disabled)."""


class UnknownRun(LookupError):
    """No run with that id."""


def list_runs(ledger: Ledger, *, job: str | None = None, state: str | None = None,
              limit: int = 50, before_id: int | None = None) -> list[dict[str, Any]]:
    """Newest runs first (keyset on ``runs.id``), each a dict of ``runs`` columns plus the
    outcome's ``duration_s``, ``status`` and ``verdict_reason``. ``limit`` ≤ 10,000."""
    where, params = [], []
    if job:
        where.append("r.job = ?")
        params.append(job)
    if state:
        where.append("r.state = ?")
        params.append(state)
    if before_id is not None:
        where.append("r.id < ?")
        params.append(before_id)
    sql = ("SELECT r.*, o.duration_s, o.status, o.verdict_reason, o.severity FROM runs r"
           " LEFT JOIN job_outcomes o ON o.run_id = r.id")
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY r.id DESC LIMIT ?"
    params.append(max(1, min(int(limit), 10000)))
    return [dict(r) for r in ledger.query(sql, params)]


def _read_slices(path: Path, n: int = OUTPUT_PREVIEW) -> dict[str, Any]:
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(n)
            tail = b""
            if size > n:
                fh.seek(max(n, size - n))
                tail = fh.read(n)
    except OSError:
        return {"size": None, "head": None, "tail": None}
    return {"size": size, "head": head.decode("utf-8", errors="replace"),
            "tail": tail.decode("utf-8", errors="replace") if tail else None}


def run_detail(ledger: Ledger, run_id: int, *, events_limit: int = 500) -> dict[str, Any]:
    """Everything about one run: ``run`` (runs row), ``lineage`` (all attempts, oldest
    first), ``children`` (fan-out sub-task runs), ``outcome`` (job_outcomes, JSON decoded),
    ``events`` (audit trail of the run, oldest first) and ``output`` ({stdout, stderr} →
    {size, head, tail} read from the artifacts folder).

    Raises:
        UnknownRun: no such run.
    """
    run = row_dict(ledger.one("SELECT * FROM runs WHERE id = ?", (run_id,)))
    if run is None:
        raise UnknownRun(f"no run {run_id}")
    lineage = [dict(r) for r in ledger.query(
        "SELECT r.*, o.status, o.duration_s FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id"
        " WHERE r.lineage = ? ORDER BY r.attempt LIMIT 200", (run["lineage"],))]
    children = [dict(r) for r in ledger.query(
        "SELECT r.*, o.status, o.duration_s FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id"
        " WHERE r.parent_run_id = ? ORDER BY r.task, r.attempt LIMIT 500", (run_id,))]
    events = []
    for r in ledger.query("SELECT * FROM events WHERE run_id = ? ORDER BY id LIMIT ?", (run_id, events_limit)):
        ev = dict(r)
        if ev.get("detail"):
            try:
                ev["detail"] = json.loads(ev["detail"])
            except ValueError:
                pass
        events.append(ev)
    output: dict[str, Any] = {}
    if run.get("artifacts_dir"):
        for name in ("stdout", "stderr"):
            output[name] = _read_slices(Path(run["artifacts_dir"]) / f"{name}.log")
    return {"run": run, "lineage": lineage, "children": children, "outcome": get_outcome(ledger.conn, run_id),
            "events": events, "output": output}


def trigger(ledger: Ledger, job: str, *, actor: str) -> int:
    """Queue attempt 1 of a manual run of ``job`` now (slot ``manual:<uuid>``); returns its id.

    Raises:
        UnknownJob: the job is not in the ``jobs`` table or is disabled.
    """
    now = time.time()

    def tx(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT spec_hash, enabled FROM jobs WHERE name = ?", (job,)).fetchone()
        if row is None or not row["enabled"]:
            raise UnknownJob(f"no job {job!r} in the ledger (a runner records jobs when it loads their specs)")
        cur = conn.execute(
            "INSERT INTO runs (job, lineage, attempt, state, slot, task, trigger, spec_hash, not_before, created_at,"
            " updated_at) VALUES (?,?,1,'queued',?,'','manual',?,?,?,?)",
            (job, uuid.uuid4().hex, f"manual:{uuid.uuid4().hex[:12]}", row["spec_hash"], now, now, now))
        run_id = int(cur.lastrowid)
        add_event(conn, actor=actor, kind="run_queued", run_id=run_id, job=job, attempt=1, to_state="queued",
                  reason="manual")
        return run_id
    return ledger.write(tx)


def job_names(ledger: Ledger) -> list[str]:
    """Names of enabled jobs in the ``jobs`` table, sorted."""
    return [r[0] for r in ledger.query("SELECT name FROM jobs WHERE enabled = 1 ORDER BY name LIMIT 10000")]
