"""Shared helpers for the sweep, doctor, status and crash tests (no tests here).

Rows are inserted the way the runner would leave them: a ``runs`` row created ``queued``
and moved through ``core.ledger.lifecycle`` so the audit trail agrees with the state.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

from core.ledger import lifecycle, runs
from core.ledger.connection import Ledger
from core.liveness import hostname
from core.spec.model import JobSpec, spec_json
from core.spec.settings import Settings

FAST = {"heartbeat": 0.2, "lease": 1.0, "sweep_interval": 0.2, "start_timeout": 1.0}


def fast_settings(ledger_path: Path, **kw: Any) -> Settings:
    return Settings(ledger=ledger_path, **{**FAST, **kw})


def add_job(ledger: Ledger, name: str = "job", **spec: Any) -> JobSpec:
    js = JobSpec(name=name, command=spec.pop("command", ["true"]), **spec)
    now = time.time()
    ledger.write(lambda c: c.execute(
        "INSERT INTO jobs (name, kind, spec, spec_hash, updated_at) VALUES (?,?,?,?,?) ON CONFLICT (name)"
        " DO UPDATE SET kind = excluded.kind, spec = excluded.spec, spec_hash = excluded.spec_hash,"
        " updated_at = excluded.updated_at",
        (name, js.kind, spec_json(js), js.spec_hash(), now)))
    return js


def add_runner(ledger: Ledger, *, pid: int, heartbeat_age: float = 0.0, lease_s: float = 1.0,
               host: str | None = None, stopped: bool = False, runner_id: str | None = None,
               create_time: float | None = None, boot_id: str | None = None, up_for: float | None = None) -> str:
    """Insert a runner row. ``up_for``: seconds it had run at its last heartbeat (default: a
    lease and a second, so the fleet has heard from it: ``core.ledger.hosts``)."""
    rid = runner_id or f"r-{uuid.uuid4().hex[:8]}"
    now = time.time()
    if create_time is None:
        try:
            create_time = psutil.Process(pid).create_time()
        except psutil.Error:
            create_time = now - 100
    ledger.write(lambda c: c.execute(
        "INSERT INTO runners (id, hostname, pid, pid_create_time, started_at, heartbeat_at, heartbeat_s,"
        " lease_s, stopped_at, boot_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (rid, host or hostname(), pid, create_time, now - heartbeat_age - (lease_s + 1 if up_for is None else up_for),
         now - heartbeat_age,
         lease_s / 5, lease_s, now if stopped else None, boot_id)))
    return rid


def add_run(ledger: Ledger, job: str = "job", *, state: str = "running", attempt: int = 1,
            lineage: str | None = None, slot: str | None = None, pid: int | None = None,
            create_time: float | None = None, runner_id: str | None = None,
            lease_left: float | None = -1.0, spawned_ago: float = 0.5) -> int:
    """Insert a run and move it (audited) to ``state``. ``lease_left`` seconds until the
    lease expires (negative: already expired; None: no lease recorded)."""
    now = time.time()
    lineage = lineage or uuid.uuid4().hex
    slot = slot or f"manual:{lineage}"
    if pid is not None and create_time is None:
        try:
            create_time = psutil.Process(pid).create_time()
        except psutil.Error:
            create_time = None

    run_id = ledger.write(lambda c: runs.create(c, job=job, slot=slot, trigger="manual", actor="test", not_before=now,
                                                spec_hash=None, attempt=attempt, lineage=lineage, now=now))
    if state == "queued":
        return run_id
    fields = {"spawned_at": now - spawned_ago, "pid": pid, "pid_create_time": create_time, "pgid": pid,
              "runner_id": runner_id, "lease_until": None if lease_left is None else now + lease_left}
    assert lifecycle.transition(ledger, run_id, attempt, "queued", "spawned", actor="test", fields=fields)
    path = {"spawned": [], "running": ["running"], "verifying": ["running", "verifying"]}[state]
    cur = "spawned"
    for nxt in path:
        assert lifecycle.transition(ledger, run_id, attempt, cur, nxt, actor="test",
                                    fields={"started_at": now - spawned_ago} if nxt == "running" else None)
        cur = nxt
    return run_id


def run_row(ledger: Ledger, run_id: int) -> dict[str, Any]:
    row = ledger.one("SELECT * FROM runs WHERE id = ?", (run_id,))
    assert row is not None
    return {k: row[k] for k in row.keys()}


def events(ledger: Ledger, run_id: int | None = None, kind: str | None = None) -> list[dict[str, Any]]:
    sql, params = "SELECT * FROM events WHERE 1=1", []
    if run_id is not None:
        sql += " AND run_id = ?"
        params.append(run_id)
    if kind is not None:
        sql += " AND kind = ?"
        params.append(kind)
    return [{k: r[k] for k in r.keys()} for r in ledger.query(sql + " ORDER BY id", params)]


def spawn(*argv: str) -> subprocess.Popen:
    """A child in its own session/process group (so it can be killed as a group)."""
    return subprocess.Popen(list(argv), start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def spawn_with_grandchild() -> tuple[subprocess.Popen, int]:
    """A shell that starts a grandchild ``sleep`` and waits; returns (proc, grandchild pid)."""
    code = ("import subprocess,sys,time; p=subprocess.Popen(['sleep','60']); print(p.pid, flush=True);"
            " time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    return proc, int(line.strip())


def dead_pid() -> tuple[int, float]:
    """The pid and create time of a process that has exited and been reaped."""
    p = subprocess.Popen(["sleep", "0.05"], start_new_session=True)
    ctime = psutil.Process(p.pid).create_time()
    p.wait()
    return p.pid, ctime


def kill_tree(proc: subprocess.Popen) -> None:
    """End a process group this test started (by its pgid), then reap the leader."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_for(pred, timeout: float = 10.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def gone_runner(ledger: Ledger) -> str:
    """A runner row whose process is dead and whose heartbeat is stale."""
    pid, ctime = dead_pid()
    return add_runner(ledger, pid=pid, create_time=ctime, heartbeat_age=5.0)
