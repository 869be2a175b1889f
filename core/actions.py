"""Operator actions on runs (retry, abandon) and on jobs (pause, resume, trigger).

All are attributed ``operator:<name>``, audited in ``events`` and conditional on what the
ledger holds at the moment of the write, so two consoles acting at once get one winner and
one clear "already …" message. Escalation actions (acknowledge, snooze, resolve) live in
``core.ledger.escalations``.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import psutil

from core.ledger import events, jobs, runs, terminal
from core.ledger.connection import Conn, Ledger, add_event
from core.ledger.lifecycle import LIVE, NON_TERMINAL, TERMINAL, State
from core.liveness import process_alive
from core.processes import signal_name, stop_group, stop_processes
from core.text import iso
from core.vocabulary import ActionResult, Trigger

#: Seconds between SIGTERM and SIGKILL when abandoning a live run.
ABANDON_GRACE_S = 2.0
#: pid create times are stored as floats from psutil; allow for rounding on the way.


def _actor(operator: str) -> str:
    return f"operator:{operator}"


def _last_move(conn: Conn, run_id: int) -> dict[str, Any] | None:
    return events.latest(conn, run_id, "transition")


def _who(move: dict[str, Any] | None) -> str:
    if not move:
        return ""
    actor = str(move["actor"]).removeprefix("operator:")
    return f" by {actor} at {iso(move['at'])}"


def retry(ledger: Ledger, run_id: int, operator: str, *, now: float | None = None) -> ActionResult:
    """Queue a new attempt of ``run_id``'s lineage (``runs`` insert, ``events`` row).

    The new run has ``attempt = max(attempt in lineage) + 1``, the same job, lineage, slot
    and task, ``trigger='manual_retry'``, ``state='queued'`` and ``not_before = now``
    (Unix seconds). Refused (``ok=False``) when the run does not exist or the lineage's
    latest attempt is not terminal yet (someone else's retry already queued counts).
    ``target_id`` is the new run's id on success. Never raises for a lost race.
    """
    actor = _actor(operator)

    def tx(conn: Conn) -> ActionResult:
        run = runs.get(conn, run_id)
        if run is None:
            return ActionResult(False, f"no run {run_id}", run_id, missing=True)
        latest = runs.latest_attempt(conn, run["lineage"])
        assert latest is not None  # the lineage holds at least ``run``
        if latest["state"] not in TERMINAL:
            who = _who(events.first(conn, latest["id"]))
            return ActionResult(False, f"{run['job']}: attempt {latest['attempt']} is already {latest['state']}"
                                f" (run {latest['id']}{', queued' + who if who else ''})", latest["id"])
        ts = now if now is not None else time.time()
        job = jobs.job_row(conn, run["job"])
        attempt = latest["attempt"] + 1
        new_id = runs.create(conn, job=run["job"], lineage=run["lineage"], attempt=attempt, slot=run["slot"],
                             task=run["task"], trigger=Trigger.MANUAL_RETRY, parent_run_id=run["parent_run_id"],
                             spec_hash=job["spec_hash"] if job else run["spec_hash"], not_before=ts, now=ts,
                             actor=actor, event="manual_retry", reason=f"retry of run {run_id} requested by {operator}",
                             detail={"retry_of": run_id, "previous_attempt": latest["attempt"]})
        assert new_id is not None  # the lineage's next attempt: a conflict raises IntegrityError instead
        return ActionResult(True, f"{run['job']}: queued attempt {attempt} (run {new_id})", new_id)

    return ledger.write(tx)


def _process_alive(pid: int, create_time: float | None) -> psutil.Process | None:
    """The process ``pid`` if it still exists *and* is the one we started (same create time,
    per ``core.liveness.process_alive``: a reused pid is someone else's process)."""
    if create_time is None or not process_alive(pid, create_time):
        return None
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def _kill_group(proc: psutil.Process, pgid: int | None, grace_s: float) -> str:
    """Stop the run's process group with the one "stop with grace" routine
    (``core.processes.stop_group``: SIGTERM, SIGKILL after ``grace_s``), or just its process
    (``stop_processes``) when it shares our own group: a run started without its own group
    would otherwise take the console down with it. Neither waits on a process (psutil's
    wait() would reap a child the runner in this same process must reap itself). Returns
    a note for the operator."""
    try:
        group = pgid or os.getpgid(proc.pid)
    except ProcessLookupError:
        return "process already gone"
    try:
        if group != os.getpgid(0):
            sig = stop_group(group, grace=grace_s)
        else:
            sig = stop_processes([proc], grace=grace_s)
    except PermissionError as exc:
        return f"cannot signal its process group: {exc.strerror or exc}"
    if sig is None:
        return "process already gone"
    try:
        still = proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        still = False
    if still:
        return f"{signal_name(sig)} sent, process still present"
    return "terminated (SIGTERM)" if sig == signal.SIGTERM else "killed (SIGKILL after grace)"


def abandon(ledger: Ledger, run_id: int, operator: str, *, grace_s: float = ABANDON_GRACE_S) -> ActionResult:
    """Move ``run_id`` to ``abandoned`` (compare-and-set via ``core.ledger.lifecycle``), then kill
    its live process group if the recorded pid still runs with the recorded create time.

    The state change comes first so the runner, seeing its process die, loses the race and
    records a late result instead of a failure. Output, handoff and artifacts are kept;
    a ``job_outcomes`` row with status ``abandoned`` is written in the same transaction.
    Returns ``ok=False`` with "already <state> by X at T" when the run was terminal; may block
    up to ``2 * grace_s`` seconds while the process dies (call it off the UI thread).
    """
    actor = _actor(operator)
    for _ in range(5):  # the run may move under us (queued → spawned …); re-read and retry
        row = runs.get(ledger.conn, run_id)
        if row is None:
            return ActionResult(False, f"no run {run_id}", run_id, missing=True)
        if row["state"] not in NON_TERMINAL:
            move = _last_move(ledger.conn, run_id)
            return ActionResult(False, f"{row['job']} run {run_id} is already {row['state']}{_who(move)}", run_id)
        state, attempt = row["state"], row["attempt"]

        # A fan-out parent's queued sub-tasks go with it (the terminal recipe settles them).
        if terminal.finish_run(ledger, run_id, attempt, state, State.ABANDONED, actor=actor,
                               reason=f"abandoned by {operator}"):
            break
    else:
        return ActionResult(False, f"run {run_id} kept changing state; try again", run_id)

    note = "no live process"
    if state == State.VERIFYING:  # the job exited; its runner kills a verify command still running
        note += "; a verify command still running is stopped by the runner"
    proc = _process_alive(row["pid"], row["pid_create_time"]) if state != State.QUEUED else None
    if proc is not None:
        note = _kill_group(proc, row["pgid"], grace_s)
        ledger.write(lambda conn: add_event(conn, actor=actor, kind="abandon_kill", run_id=run_id, job=row["job"],
                                            attempt=attempt, reason=note,
                                            detail={"pid": row["pid"], "pgid": row["pgid"]}))
    # A fan-out parent's queued sub-tasks went with it in the transaction above; its running
    # ones are abandoned (and killed) too, or they would work on for nobody.
    subtasks = runs.children_in_states(ledger.conn, run_id, LIVE)
    done = [sub for sub in subtasks if abandon(ledger, sub, operator, grace_s=grace_s).ok]
    if done:
        note += f"; {len(done)} running sub-task(s) abandoned: runs {', '.join(map(str, done))}"
    return ActionResult(True, f"{row['job']} run {run_id} abandoned ({note}); artifacts kept", run_id)


# -- job controls --------------------------------------------------------------------------

def pause_job(ledger: Ledger, job: str, operator: str, *, reason: str | None = None,
              now: float | None = None) -> ActionResult:
    """Pause ``job``: its scheduled slots are skipped (each recorded as a
    ``slot_skipped_paused`` event) until ``resume_job``. Held in the ``jobs`` table, so it
    survives runner restarts. Runs already queued or running go on; a manual trigger still
    runs. ``ok=False`` with "already paused by X at T" when someone else paused it first;
    ``missing=True`` when there is no such enabled job (the CLI exits 2)."""
    return jobs.set_paused(ledger, job, paused=True, actor=_actor(operator), reason=reason, now=now)


def resume_job(ledger: Ledger, job: str, operator: str, *, now: float | None = None) -> ActionResult:
    """Resume a paused ``job``: the next scheduled slot runs as usual (the slots skipped
    while paused are not replayed). ``ok=False`` when the job is not paused; ``missing=True``
    when there is no such enabled job."""
    return jobs.set_paused(ledger, job, paused=False, actor=_actor(operator), now=now)


def trigger_job(ledger: Ledger, job: str, operator: str) -> ActionResult:
    """Queue a manual run of ``job`` now (attempt 1, ``trigger='manual'``, a ``run_queued``
    event by ``operator:<name>``); a running runner picks it up. Runs even when the job is
    paused (the message says so). ``target_id`` is the new run's id; ``missing=True`` when
    there is no such enabled job."""
    try:
        run_id = runs.trigger(ledger, job, actor=_actor(operator))
    except runs.UnknownJob as exc:
        return ActionResult(False, str(exc), missing=True)
    note = " (the job is paused: this manual run goes ahead anyway)" if jobs.pause_of(ledger.conn, job) else ""
    return ActionResult(True, f"queued run {run_id} of {job}{note}", run_id)
