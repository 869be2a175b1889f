"""Operator actions on runs (retry, abandon) and on jobs (pause, resume, trigger).

All are attributed ``operator:<name>``, audited in ``events`` and conditional on what the
ledger holds at the moment of the write, so two consoles acting at once get one winner and
one clear "already …" message. Escalation actions (acknowledge, snooze, resolve) are
here too; the store moves the escalation, these say what happened.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from core import monitor
from core.ledger.connection import Ledger
from core.ledger.lifecycle import NON_TERMINAL, State
from core.ledger.records import Escalation, Event
from core.ledger.runs import UnknownJob
from core.ledger.sql_store import SqlStore
from core.liveness import process_alive, same_life
from core.processes import signal_name, stop_group, stop_processes
from core.text import iso, quoted, utc_hms, utc_when
from core.vocabulary import ActionResult, AuditEvent, EndReason, EscalationKind, EscalationState

#: Seconds between SIGTERM and SIGKILL when abandoning a live run.
ABANDON_GRACE_S = 2.0
#: pid create times are stored as floats from psutil; allow for rounding on the way.


def _actor(operator: str) -> str:
    return f"operator:{operator}"


def removed_words(job: str) -> str:
    """Why a removed job (``jobs.enabled = 0``: its spec file or entry is gone) cannot be acted on."""
    return (f"job {quoted(job)} was removed (its spec is gone from the spec folder; its history is kept):"
            " restore its spec to run it again")


def unknown_words(job: str) -> str:
    """Why a job the ledger does not know cannot be acted on."""
    return f"no job {quoted(job)} in the ledger (a runner records jobs when it loads their specs)"


def unknown_job_words(exc: UnknownJob) -> str:
    """The sentence for a ``core.ledger.runs.UnknownJob``: removed, or never known."""
    return removed_words(exc.job) if exc.removed else unknown_words(exc.job)


def _who(move: Event | None) -> str:
    if move is None:
        return ""
    return f" by {move.actor.removeprefix('operator:')} at {iso(move.at)}"


def retry(ledger: Ledger, run_id: int, operator: str, *, now: float | None = None) -> ActionResult:
    """Queue a new attempt of ``run_id``'s lineage (``runs`` insert, ``events`` row).

    The new run has ``attempt = max(attempt in lineage) + 1``, the same job, lineage, slot
    and task, ``trigger='manual_retry'``, ``state='queued'`` and ``not_before = now``
    (Unix seconds). Refused (``ok=False``) when the run does not exist or the lineage's
    latest attempt is not terminal yet (someone else's retry already queued counts).
    ``target_id`` is the new run's id on success. Never raises for a lost race.
    """
    got = SqlStore(ledger).retry_lineage(run_id, actor=_actor(operator), now=now,
                                         reason=f"retry of run {run_id} requested by {operator}")
    run, latest = got.run, got.latest
    if run is None or latest is None:
        return ActionResult(False, f"no run {run_id}", run_id, missing=True)
    if got.new_run_id is None:
        who = _who(got.queued_by)
        return ActionResult(False, f"{run.job}: attempt {latest.attempt} is already {latest.state}"
                            f" (run {latest.id}{', queued' + who if who else ''})", latest.id)
    return ActionResult(True, f"{run.job}: queued attempt {latest.attempt + 1} (run {got.new_run_id})",
                        got.new_run_id)


def _process_alive(pid: int, create_time: float | None) -> psutil.Process | None:
    """The process ``pid`` if it still exists *and* is the one we started (same create time,
    per ``core.liveness.process_alive``: a reused pid is someone else's process)."""
    if create_time is None or not process_alive(pid, create_time):
        return None
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def _end_monitor(art: Path, grace_s: float) -> str | None:
    """End the run's monitor (``core.monitor``) once its job is gone: it normally records the
    job's exit and leaves on its own within ``grace_s`` seconds; one still there after that
    (a process that left the job's group holds its output pipe) is killed with its drains
    (its own process group). Returns a note when the monitor had to be killed, else None."""
    deadline = time.monotonic() + max(0.0, grace_s)
    while monitor.monitor_alive(art):
        if time.monotonic() > deadline:
            pid = monitor.monitor_pid(art)
            if pid is None:
                return None
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                return None
            except PermissionError as exc:
                return f"cannot signal its monitor: {exc.strerror or exc}"
            return f"its monitor (pid {pid}) and its output drains killed (SIGKILL)"
        time.sleep(0.05)
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
    store = SqlStore(ledger)
    for _ in range(5):  # the run may move under us (queued → spawned …); re-read and retry
        run = store.run(run_id)
        if run is None:
            return ActionResult(False, f"no run {run_id}", run_id, missing=True)
        if run.state not in NON_TERMINAL:
            move = store.latest_event(run_id, AuditEvent.TRANSITION)
            return ActionResult(False, f"{run.job} run {run_id} is already {run.state}{_who(move)}", run_id)
        state, attempt = run.state, run.attempt

        # A fan-out parent's queued sub-tasks go with it (the terminal recipe settles them).
        if store.finish_run(run_id, attempt, state, State.ABANDONED, actor=actor,
                            reason_code=EndReason.OPERATOR, reason=f"abandoned by {operator}"):
            break
    else:
        return ActionResult(False, f"run {run_id} kept changing state; try again", run_id)

    note = "no live process"
    elsewhere = state != State.QUEUED and bool(run.runner_id) and not same_life(run.host, run.boot_id)
    if elsewhere:
        # Its processes are on another host, where a pid here means some other process: the
        # runner there kills them on its next heartbeat and confirms (``abandon_kill`` event).
        store.request_kill(run_id, actor=actor)
        note = (f"its processes are on {run.host}: asked runner {run.runner_id} there to kill them,"
                f" not confirmed yet (see watchkeeper show {run_id})")
    elif state == State.VERIFYING:  # the job exited; its runner kills a verify command still running
        note += "; a verify command still running is stopped by the runner"
    proc = _process_alive(run.pid, run.pid_create_time) if not elsewhere and state != State.QUEUED and run.pid else None
    if proc is not None:
        note = _kill_group(proc, run.pgid, grace_s)
    art = Path(run.artifacts_dir) if run.artifacts_dir and not elsewhere else None
    ended_monitor = _end_monitor(art, grace_s) if art is not None else None
    if ended_monitor:
        note = (note if proc is not None else "job's process already gone") + f"; {ended_monitor}"
    if proc is not None or ended_monitor:
        store.record_event(actor=actor, kind=AuditEvent.ABANDON_KILL, run_id=run_id, job=run.job, attempt=attempt, reason=note,
                           detail={"pid": run.pid, "pgid": run.pgid})
    # A fan-out parent's queued sub-tasks went with it in the transaction above; its running
    # ones are abandoned (and killed) too, or they would work on for nobody.
    done = [sub for sub in store.live_subtasks(run_id) if abandon(ledger, sub, operator, grace_s=grace_s).ok]
    if done:
        note += f"; {len(done)} running sub-task(s) abandoned: runs {', '.join(map(str, done))}"
    return ActionResult(True, f"{run.job} run {run_id} abandoned ({note}); artifacts kept", run_id)


# -- job controls --------------------------------------------------------------------------

def _utc(ts: float | None) -> str:
    return iso(ts) or "?"


def _set_paused(ledger: Ledger, job: str, *, paused: bool, operator: str, reason: str | None = None,
                now: float | None = None) -> ActionResult:
    """Pause or resume ``job`` through ``Store.set_job_paused`` and say what happened: of two
    operators acting at once one wins and the other is told "already paused by X at T"; the
    same operator asking again is ``ok=True`` with "nothing to do"."""
    actor = _actor(operator)
    got = SqlStore(ledger).set_job_paused(job, paused=paused, actor=actor, reason=reason, now=now)
    if got.job is None:
        return ActionResult(False, unknown_words(job), missing=True)
    if got.changed:
        if paused:
            return ActionResult(True, f"{job} paused by {operator}: scheduled runs are skipped until"
                                      f" `watchkeeper resume {job}`")
        return ActionResult(True, f"{job} resumed by {operator}: scheduled runs go ahead again")
    if paused:
        if got.job.paused_by == actor:
            return ActionResult(True, f"{job} already paused by you at {_utc(got.job.paused_at)}; nothing to do")
        by = str(got.job.paused_by or "?").removeprefix("operator:")
        return ActionResult(False, f"{job} already paused by {by} at {_utc(got.job.paused_at)}")
    last = got.last_resume
    if last is not None and last.actor == actor:
        return ActionResult(True, f"{job} already resumed by you at {_utc(last.at)}; nothing to do")
    by = f" (resumed by {last.actor.removeprefix('operator:')} at {_utc(last.at)})" if last else ""
    return ActionResult(False, f"{job} is not paused{by}")


def pause_job(ledger: Ledger, job: str, operator: str, *, reason: str | None = None,
              now: float | None = None) -> ActionResult:
    """Pause ``job``: its scheduled slots are skipped (each recorded as a
    ``slot_skipped_paused`` event) until ``resume_job``. Held in the ``jobs`` table, so it
    survives runner restarts. Runs already queued or running go on; a manual trigger still
    runs. ``ok=False`` with "already paused by X at T" when someone else paused it first;
    ``missing=True`` when there is no such enabled job (the CLI exits 2)."""
    return _set_paused(ledger, job, paused=True, operator=operator, reason=reason, now=now)


def resume_job(ledger: Ledger, job: str, operator: str, *, now: float | None = None) -> ActionResult:
    """Resume a paused ``job``: the next scheduled slot runs as usual (the slots skipped
    while paused are not replayed). ``ok=False`` when the job is not paused; ``missing=True``
    when there is no such enabled job."""
    return _set_paused(ledger, job, paused=False, operator=operator, now=now)


def trigger_job(ledger: Ledger, job: str, operator: str) -> ActionResult:
    """Queue a manual run of ``job`` now (attempt 1, ``trigger='manual'``, a ``run_queued``
    event by ``operator:<name>``); a running runner picks it up. Runs even when the job is
    paused (the message says so). ``target_id`` is the new run's id; ``missing=True`` when
    there is no such enabled job."""
    store = SqlStore(ledger)
    try:
        run_id = store.queue_manual_run(job, actor=_actor(operator))
    except UnknownJob as exc:
        return ActionResult(False, unknown_job_words(exc), missing=True)
    known = store.job(job)
    note = " (the job is paused: this manual run goes ahead anyway)" if known and known.paused_at is not None else ""
    return ActionResult(True, f"queued run {run_id} of {job}{note}", run_id)


# -- escalations -----------------------------------------------------------------------------

#: Escalation states an operator can still act on.
ACTIVE_ESCALATION = (EscalationState.OPEN, EscalationState.ACKNOWLEDGED, EscalationState.SNOOZED)


def _already(esc: Escalation) -> str:
    if esc.state == EscalationState.ACKNOWLEDGED:
        return f"already acknowledged by {esc.acked_by} at {utc_hms(esc.acked_at or 0)}"
    if esc.state == EscalationState.RESOLVED:
        return f"already resolved by {esc.resolved_by} at {utc_hms(esc.resolved_at or 0)}"
    if esc.state == EscalationState.SNOOZED:
        return f"already snoozed by {esc.snoozed_by} until {utc_when(esc.snoozed_until or 0)}"
    return f"escalation is {esc.state}"


def _move_escalation(ledger: Ledger, esc_id: int, operator: str, *, allowed_from: tuple[str, ...], to_state: str,
                     fields: dict[str, Any], event: AuditEvent, verb: str, same_done: Callable[[Escalation], bool],
                     detail: dict[str, Any] | None = None, now: float,
                     on_moved: Callable[[Escalation], str] | None = None) -> ActionResult:
    got = SqlStore(ledger).move_escalation(esc_id, allowed_from=allowed_from, to_state=to_state, fields=fields,
                                           event=event, actor=_actor(operator), detail=detail, now=now)
    esc = got.before
    if esc is None:
        return ActionResult(False, f"no escalation {esc_id}", esc_id, missing=True)
    if got.moved:
        more = on_moved(esc) if on_moved is not None else ""
        return ActionResult(True, f"{verb} escalation {esc_id} ({esc.job} {esc.kind}){more}", esc_id)
    if esc.state not in allowed_from:
        if same_done(esc):
            return ActionResult(True, f"escalation {esc_id} {_already(esc)} (you); nothing to do", esc_id)
        return ActionResult(False, f"escalation {esc_id} {_already(esc)}", esc_id)
    return ActionResult(False, f"escalation {esc_id} changed concurrently; try again", esc_id)


def acknowledge(ledger: Ledger, esc_id: int, operator: str, *, now: float | None = None) -> ActionResult:
    """Acknowledge an open or snoozed escalation (someone is on it).

    Returns ``ActionResult(ok=False, "escalation 7 already acknowledged by ana at 04:12:03 UTC")``
    when someone else was first or it is resolved; ``ok=True`` without change when the same
    operator had already acknowledged it. ``now`` is Unix seconds.
    """
    ts = now if now is not None else time.time()
    return _move_escalation(ledger, esc_id, operator, allowed_from=(EscalationState.OPEN, EscalationState.SNOOZED),
                            to_state=EscalationState.ACKNOWLEDGED,
                            fields={"acked_by": operator, "acked_at": ts}, event=AuditEvent.ESCALATION_ACKNOWLEDGED,
                            verb="acknowledged", now=ts,
                            same_done=lambda e: e.state == EscalationState.ACKNOWLEDGED and e.acked_by == operator)


def snooze(ledger: Ledger, esc_id: int, operator: str, until: float, *, now: float | None = None) -> ActionResult:
    """Snooze an active escalation until ``until`` (Unix seconds, must be in the future).

    At ``until`` it reopens (``Store.expire_snoozes``) unless the job recovered meanwhile.
    Snoozing a snoozed item extends or shortens it. Resolved items cannot be snoozed.
    """
    ts = now if now is not None else time.time()
    if until <= ts:
        return ActionResult(False, f"snooze time {utc_when(until, ts)} is not in the future", esc_id)
    return _move_escalation(ledger, esc_id, operator, allowed_from=ACTIVE_ESCALATION, to_state=EscalationState.SNOOZED,
                            fields={"snoozed_by": operator, "snoozed_until": until}, event=AuditEvent.ESCALATION_SNOOZED,
                            verb="snoozed", on_moved=lambda _e: f" until {utc_when(until, ts)}",
                            same_done=lambda e: False,
                            detail={"until": until}, now=ts)


def resolve(ledger: Ledger, esc_id: int, operator: str, *, now: float | None = None) -> ActionResult:
    """Resolve an active escalation by hand. A later occurrence opens a new one. Resolving a
    ``circuit_open`` escalation also closes the job's breaker (its slots run again), and the
    message says so."""
    ts = now if now is not None else time.time()

    def close_breaker(esc: Escalation) -> str:
        # Resolving "the breaker is open" means the operator dealt with it: the job's slots
        # must run again, not stay skipped (silently, now) until the cooldown ends.
        if esc.kind != EscalationKind.CIRCUIT_OPEN or not SqlStore(ledger).close_breaker(
                esc.job, actor=_actor(operator), reason=f"closed by {operator} (resolved escalation {esc_id})", now=ts):
            return ""
        return f"; breaker closed: {esc.job} runs again"
    return _move_escalation(ledger, esc_id, operator, allowed_from=ACTIVE_ESCALATION, to_state=EscalationState.RESOLVED,
                            fields={"resolved_by": operator, "resolved_at": ts}, event=AuditEvent.ESCALATION_RESOLVED,
                            verb="resolved", now=ts, on_moved=close_breaker,
                            same_done=lambda e: e.state == EscalationState.RESOLVED and e.resolved_by == operator)
