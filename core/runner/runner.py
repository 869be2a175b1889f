"""The embedded runner (asyncio): schedules slots, dispatches queued runs, executes them in
their own process groups, captures bounded output, reads handoffs, enforces timeouts, and
hands every exit to the supervisor.

Ledger writes from the event loop use one connection owned by the loop's thread; the
supervisor (which may run verify commands) and the periodic supervisor work run in worker
threads with their own connections. Every run state change goes through
``core.ledger.lifecycle``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import __version__
from core.ledger import breaker, fanout, lifecycle, outcomes, retries
from core.ledger.connection import Ledger, add_event
from core.ledger.jobs import sync_jobs
from core.ledger.lifecycle import TERMINAL, State
from core.mission import worker as mission_worker
from core.mission.engine import MissionEngine
from core.processes import create_time, find_escaped, kill_escaped, signal_group
from core.runner import spawn
from core.runner.capture import Capture
from core.runner.handoff import read_handoff
from core.runner.reload import watch_specs
from core.runner.watchdog import Watchdog
from core.spec import schedule
from core.spec.model import JobSpec, LoadedJob, LoadResult, load_dir, resolve_cwd
from core.spec.settings import Settings
from core.supervisor import supervisor
from core.sweep import sweep

log = logging.getLogger(__name__)

DRAIN_AFTER_EXIT_S = 1.0  # how long output is still read after the leader exits
SETTLE_THREADS = 4  # supervisor settle threads (verify commands run there)
#: Seconds between mission passes when nothing wakes the loop (a worker run finishing wakes
#: it at once); picks up what a person did from the CLI or console (approve, answer, abort).
MISSION_IDLE_S = 1.0


class _SerialLedger(Ledger):
    """A ``Ledger`` whose writes queue on a lock shared by all of one runner's connections.

    The runner writes from its loop thread and from supervisor worker threads. Left to
    SQLite, those connections contend in ``BEGIN IMMEDIATE`` and the losers sleep in the
    busy handler (up to 100 ms a try) while the lock sits free, which capped throughput at a
    few hundred transitions per second. Taking turns on a ``threading`` lock first keeps the
    write lock busy; contention with other processes still goes through SQLite (busy
    timeout, ``Ledger.write`` retries), unchanged.
    """

    def __init__(self, path: str | os.PathLike[str], lock: threading.RLock) -> None:
        super().__init__(path)
        self._write_lock = lock

    def write(self, fn: Callable[[sqlite3.Connection], Any], *, max_wait_s: float | None = None) -> Any:
        with self._write_lock:
            return super().write(fn, max_wait_s=max_wait_s)


@dataclass
class Finished:
    """One finished run, as passed to ``on_finished`` (for one-line printing)."""

    run_id: int
    job: str
    attempt: int
    state: str
    duration_s: float | None
    exit_code: int | None
    signal: int | None
    reason: str | None
    ended_at: float


class Runner:
    """Runs the jobs of ``spec_dir`` against the ledger named in ``settings``.

    Args:
        spec_dir: folder of job spec TOML files (hot-reloaded).
        settings: runner-wide settings (ledger path, concurrency, heartbeat, lease, …).
        install_signal_handlers: stop on SIGINT/SIGTERM (only from the main thread).
        on_finished: called on the loop thread for every run that reaches a terminal state
            through this runner.
    """

    def __init__(self, spec_dir: str | os.PathLike[str], settings: Settings, *,
                 install_signal_handlers: bool = True,
                 on_finished: Callable[[Finished], None] | None = None,
                 runner_id: str | None = None) -> None:
        self.spec_dir = Path(spec_dir).resolve()  # jobs.source stays stable across restarts
        self.settings = settings
        self.id = runner_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.actor = f"runner:{self.id}"
        self.install_signal_handlers = install_signal_handlers
        self.on_finished = on_finished
        self.jobs: dict[str, LoadedJob] = {}
        self.live: dict[int, asyncio.Task[None]] = {}
        # Runs whose task died of an error in the runner itself (a ledger write that failed
        # with disk full, say): no longer watched, so their leases are not renewed and the
        # sweep loop settles them (``runner_error``) until a write succeeds.
        self.lost: set[int] = set()
        self._last_slot: dict[str, float | None] = {}
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._mission_wake: asyncio.Event | None = None
        self._thread_local = threading.local()
        self._bg: set[asyncio.Task[Any]] = set()
        self._prev_tick = time.time()
        self._write_lock = threading.RLock()  # shared by this runner's ledger connections
        self._settle_pool: ThreadPoolExecutor | None = None
        self.ledger: Ledger | None = None
        self.watchdog: Watchdog | None = None  # created in run(): one deadline thread per runner
        self.started = threading.Event()

    # -- public -------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Ask the runner to stop (thread-safe, idempotent)."""
        loop, stop = self._loop, self._stop
        if loop is None or stop is None:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(stop.set)

    async def run(self) -> None:
        """Run until ``request_stop`` or SIGINT/SIGTERM; then shut down (see README)."""
        self._loop = asyncio.get_running_loop()
        self.watchdog = Watchdog()
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._mission_wake = asyncio.Event()
        # Supervisor settles (verify + judge) run here: a few threads, so they don't starve the
        # event loop of the GIL; verify commands of one run never block the loop.
        self._settle_pool = ThreadPoolExecutor(max_workers=SETTLE_THREADS, thread_name_prefix="settle")
        try:
            self.settings.artifacts_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:  # runs are still executed and recorded; capture degrades
            log.error("artifacts folder %s unusable: %s", self.settings.artifacts_dir, exc)
        self.ledger = _SerialLedger(self.settings.ledger, self._write_lock)
        if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._loop.add_signal_handler(sig, self._stop.set)
        self._register()
        self._reconcile()
        owners = {r["name"]: r["source"] for r in self.ledger.query(
            "SELECT name, source FROM jobs WHERE enabled = 1 AND source IS NOT NULL LIMIT 100000")}
        self._load_specs(load_dir(self.spec_dir, prefer=owners))
        self.started.set()
        loops = [
            asyncio.create_task(self._scheduler_loop(), name="scheduler"),
            asyncio.create_task(self._dispatch_loop(), name="dispatch"),
            asyncio.create_task(self._heartbeat_loop(), name="heartbeat"),
            asyncio.create_task(self._sweep_loop(), name="sweep"),
            asyncio.create_task(self._reload_loop(), name="reload"),
            asyncio.create_task(self._mission_loop(), name="missions"),
        ]
        try:
            await self._stop.wait()
        finally:
            for t in loops:
                t.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            await self._shutdown()
            if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGINT, signal.SIGTERM):
                    with contextlib.suppress(Exception):
                        self._loop.remove_signal_handler(sig)

    # -- startup ------------------------------------------------------------------------
    def _register(self) -> None:
        now = time.time()
        me = os.getpid()

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO runners (id, hostname, pid, pid_create_time, started_at, heartbeat_at, heartbeat_s,"
                " lease_s, version) VALUES (?,?,?,?,?,?,?,?,?)",
                (self.id, socket.gethostname(), me, create_time(me), now, now, self.settings.heartbeat,
                 self.settings.lease, __version__))
            add_event(conn, actor=self.actor, kind="runner_started",
                      detail={"pid": me, "spec_dir": str(self.spec_dir)})
        self.ledger.write(tx)

    def _reconcile(self) -> None:
        try:
            settled = sweep.reconcile_startup(self.ledger, self.settings, runner_id=self.id)
        except Exception:
            log.exception("startup reconciliation failed; the periodic sweep will retry")
            return
        for run_id in settled or []:
            self._judge(run_id)

    def _load_specs(self, result: LoadResult) -> None:
        """Apply a fresh load: valid jobs replace old specs; jobs in a bad file keep theirs.

        While the spec folder itself is missing (deleted, or mid-swap by a checkout) every
        job keeps its last good spec and nothing is disabled; the error is recorded.
        """
        if self.jobs and any(e.field == "name" and "duplicate" in e.message for e in result.errors) \
                and self.spec_dir.is_dir():
            # A new file redefining a running job must not take it over: the file that
            # already owns the name keeps it, and the newcomer gets the duplicate error.
            result = load_dir(self.spec_dir, prefer={n: lj.source for n, lj in self.jobs.items()})
        for err in result.errors:
            log.warning("spec error: %s", err)
        if self.jobs and result.folder_missing:
            self.ledger.write(lambda conn: [add_event(
                conn, actor=self.actor, kind="spec_error", job=None, reason=str(err), detail=err.to_dict())
                for err in result.errors])
            return
        sync_jobs(self.ledger, result, actor=self.actor)
        new = dict(result.jobs)
        for name, old in self.jobs.items():
            if name not in new and old.source in result.bad_files:
                new[name] = old
        self.jobs = new

    # -- scheduling ---------------------------------------------------------------------
    async def _scheduler_loop(self) -> None:
        while True:
            try:
                self._schedule_tick(time.time())
            except Exception:
                log.exception("scheduler tick failed; retrying")
            await asyncio.sleep(0.25)

    def _last_recorded_slot(self, job: str) -> float | None:
        row = self.ledger.one("SELECT MAX(not_before) FROM runs WHERE job = ? AND trigger IN ('schedule','misfire')"
                              " AND attempt = 1 AND task = ''", (job,))
        return row[0] if row and row[0] is not None else None

    def _schedule_tick(self, now: float) -> None:
        # Lateness up to the gap since the previous tick (+1 s) is "due now", not a misfire:
        # a runner that was alive but slow (e.g. a ledger lock held for seconds) owes the slot.
        tolerance = max(2.0, now - self._prev_tick + 1.0)
        self._prev_tick = now
        for name, lj in list(self.jobs.items()):
            spec = lj.spec
            if spec.once:
                slot = schedule.once_slot(spec, now)
                if slot is not None and slot[1] <= now + 0.5:
                    self._queue(spec, slot[0], slot[1], "schedule")
                continue
            if not (spec.schedule or spec.every):
                continue
            if name not in self._last_slot:
                self._last_slot[name] = self._last_recorded_slot(name)
            last = self._last_slot[name]
            if last is not None:
                nxt = schedule.next_fire(spec, last)
                if nxt is None or nxt > now:
                    continue  # cheap path: nothing due
            plan = schedule.plan_slots(spec, last, now, tolerance=tolerance)
            if plan.missed:
                self._record_misfire(spec, plan)
            due = plan.due
            if len(due) > 1:
                # Several slots fell due during one stall (a ledger lock held for seconds):
                # run the newest once, record the others — never a burst of catch-up runs.
                self._record_coalesced(spec, due[:-1], due[-1])
                due = due[-1:]
            for ts in due:
                trigger = "schedule" if now - ts <= tolerance else "misfire"
                self._queue(spec, schedule.slot_key(ts), ts, trigger)
            marks = [x for x in (last, plan.missed_last, *plan.due) if x is not None]
            self._last_slot[name] = max(marks) if marks else now - tolerance

    def _record_coalesced(self, spec: JobSpec, skipped: list[float], kept: float) -> None:
        self.ledger.write(lambda conn: add_event(
            conn, actor=self.actor, kind="skipped_late", job=spec.name,
            reason=f"{len(skipped)} slot(s) fell due while the runner was stalled; the newest runs once",
            detail={"slots": [schedule.slot_key(t) for t in skipped[:100]], "kept": schedule.slot_key(kept)}))

    def _record_misfire(self, spec: JobSpec, plan: schedule.SlotPlan) -> None:
        """Slots that fell while no runner ran are skipped, never silently."""
        self.ledger.write(lambda conn: add_event(
            conn, actor=self.actor, kind="misfire_skipped", job=spec.name,
            reason=f"{plan.missed} slot(s) missed while no runner ran (misfire={spec.misfire})",
            detail={"missed": plan.missed, "first": schedule.slot_key(plan.missed_first or 0),
                    "last": schedule.slot_key(plan.missed_last or plan.missed_first or 0),
                    "policy": spec.misfire}))

    def _queue(self, spec: JobSpec, slot: str, not_before: float, trigger: str) -> int | None:
        """Insert attempt 1 of a slot (deduplicated by the UNIQUE (job, slot, task, attempt))."""
        now = time.time()

        def tx(conn: sqlite3.Connection) -> int | None:
            if conn.execute("SELECT 1 FROM runs WHERE job = ? AND slot = ? AND task = ''", (spec.name, slot)).fetchone():
                return None  # another runner queued this slot first
            if trigger == "schedule" and not spec.once:
                newer = schedule.next_fire(spec, not_before)
                if newer is not None and newer <= time.time():
                    # This write waited for the ledger lock so long that a newer slot is due
                    # already: that one runs (next tick), this one is recorded, not replayed.
                    add_event(conn, actor=self.actor, kind="skipped_late", job=spec.name,
                              reason="a newer slot fell due while this one waited for the ledger",
                              detail={"slots": [slot], "kept": schedule.slot_key(newer)})
                    return None
            if trigger in ("schedule", "misfire") and not breaker.admit(conn, spec, slot, actor=self.actor, now=now):
                return None
            if trigger != "misfire" and not spec.once:
                waiting = conn.execute(
                    "SELECT COUNT(*) FROM runs WHERE job = ? AND state = 'queued' AND task = ''",
                    (spec.name,)).fetchone()[0]
                live = conn.execute(
                    "SELECT COUNT(*) FROM runs WHERE job = ? AND state IN ('spawned','running','verifying')"
                    " AND task = ''", (spec.name,)).fetchone()[0]
                if waiting and live >= spec.concurrency:
                    exists = conn.execute("SELECT 1 FROM runs WHERE job = ? AND slot = ?", (spec.name, slot)).fetchone()
                    if not exists:
                        add_event(conn, actor=self.actor, kind="skipped_overlap", job=spec.name,
                                  reason="previous run still queued at concurrency limit", detail={"slot": slot})
                    return None
            cur = conn.execute(
                "INSERT OR IGNORE INTO runs (job, lineage, attempt, state, slot, task, trigger, spec_hash, not_before,"
                " created_at, updated_at) VALUES (?,?,1,'queued',?,'',?,?,?,?,?)",
                (spec.name, uuid.uuid4().hex, slot, trigger, spec.spec_hash(), not_before, now, now))
            if cur.rowcount != 1:
                return None
            run_id = int(cur.lastrowid)
            add_event(conn, actor=self.actor, kind="run_queued", run_id=run_id, job=spec.name, attempt=1,
                      to_state="queued", reason=trigger, detail={"slot": slot})
            return run_id
        run_id = self.ledger.write(tx)
        if run_id is not None and self._wake is not None:
            self._wake.set()
        return run_id

    # -- dispatch -----------------------------------------------------------------------
    async def _dispatch_loop(self) -> None:
        while True:
            try:
                self._dispatch(time.time())
            except Exception:
                log.exception("dispatch failed; retrying")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=0.2)

    def _dispatch(self, now: float) -> None:
        room = self.settings.concurrency - len(self.live)
        if room <= 0:
            return
        rows = self.ledger.query(
            "SELECT r.*, p.state AS parent_state FROM runs r LEFT JOIN runs p ON p.id = r.parent_run_id"
            " WHERE r.state = 'queued' AND r.not_before <= ? ORDER BY r.not_before, r.id LIMIT ?",
            (now, max(room * 4, 16)))
        per_job: dict[str, int] = {}
        for row in rows:
            if len(self.live) >= self.settings.concurrency:
                break
            run = dict(row)
            lj = self.jobs.get(run["job"])
            if lj is None:
                continue  # unknown here (removed, or another runner's folder): leave it queued
            spec = lj.spec
            if run["task"] and spec.kind == "fanout" and run["parent_run_id"] is not None:
                key = f"{run['job']}#{run['parent_run_id']}"  # sub-tasks: bounded per parent
                if run["parent_state"] is None or run["parent_state"] in TERMINAL:
                    continue  # nobody waits for it any more: the sweep abandons it (parent_ended)
                if key not in per_job:
                    per_job[key] = self.ledger.one(
                        "SELECT COUNT(*) FROM runs WHERE parent_run_id = ? AND state IN"
                        " ('spawned','running','verifying')", (run["parent_run_id"],))[0]
            elif not run["task"]:
                key = run["job"]
                if key not in per_job:
                    per_job[key] = self.ledger.one(
                        "SELECT COUNT(*) FROM runs WHERE job = ? AND task = '' AND state IN"
                        " ('spawned','running','verifying')", (run["job"],))[0]
            else:
                continue  # a sub-task of a job that is no longer a fan-out: leave it for the sweep/doctor
            if per_job[key] >= spec.concurrency:
                continue
            won = lifecycle.transition(
                self.ledger, run["id"], run["attempt"], State.QUEUED, State.SPAWNED, actor=self.actor,
                fields={"runner_id": self.id, "spawned_at": time.time(),
                        "lease_until": time.time() + self.settings.lease})
            if not won:
                continue  # another runner claimed it
            per_job[key] += 1
            body = self._execute_fanout(run, lj) if spec.kind == "fanout" and not run["task"] else self._execute(run, lj)
            task = asyncio.create_task(body, name=f"run-{run['id']}")
            self.live[run["id"]] = task
            task.add_done_callback(lambda _t, rid=run["id"]: self._run_done(rid))

    def _run_done(self, run_id: int) -> None:
        task = self.live.pop(run_id, None)
        if task is not None and not task.cancelled() and task.exception() is not None:
            log.error("run %s crashed in the runner: %r; the sweep loop settles it", run_id, task.exception())
            self.lost.add(run_id)
        if self._wake is not None:
            self._wake.set()

    # -- execution ----------------------------------------------------------------------
    @staticmethod
    def _task_of(spec: JobSpec, run: dict[str, Any]):
        return next((t for t in spec.tasks if t.name == run.get("task")), None) if run.get("task") else None

    def _command_for(self, spec: JobSpec, run: dict[str, Any]) -> list[str]:
        task = self._task_of(spec, run)
        if task is not None:
            return spec.argv(task.command)
        agent = mission_worker.command_for(spec, self.settings)
        if agent is not None:
            return agent
        if run.get("worker") == "fallback" and spec.fallback is not None:
            return spec.argv(spec.fallback)
        return spec.argv()

    def _env_for(self, spec: JobSpec, run: dict[str, Any], handoff: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update(spec.env)
        env.update({
            "WATCHKEEPER_RUN_ID": str(run["id"]),
            "WATCHKEEPER_RUNNER_ID": self.id,
            "WATCHKEEPER_ATTEMPT": str(run["attempt"]),
            "WATCHKEEPER_HANDOFF": str(handoff),
            "WATCHKEEPER_JOB": spec.name,
            "WATCHKEEPER_LINEAGE": run["lineage"],
        })
        if spec.max_steps is not None:
            env["WATCHKEEPER_MAX_STEPS"] = str(spec.max_steps)
        task = self._task_of(spec, run)
        if task is not None:
            env.update(task.env)
            env["WATCHKEEPER_TASK"] = task.name
            env["WATCHKEEPER_PARENT_RUN_ID"] = str(run["parent_run_id"])
        env.update(mission_worker.env_for(spec, run, self.settings, self.ledger.conn, handoff.parent))
        return env

    async def _execute(self, run: dict[str, Any], lj: LoadedJob) -> None:
        spec = lj.spec
        run_id, attempt = run["id"], run["attempt"]
        art = self.settings.artifacts_dir / str(run_id)
        try:
            art.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            log.warning("run %s: cannot create artifacts folder: %s", run_id, exc)
        handoff_path = art / "handoff.json"
        with contextlib.suppress(OSError):
            handoff_path.unlink()
        argv = self._command_for(spec, run)
        task_spec = self._task_of(spec, run)
        timeout = task_spec.timeout if task_spec is not None else spec.timeout
        wall_budget = spec.budget.wall is not None and spec.budget.wall < timeout
        if wall_budget:
            timeout = spec.budget.wall
        # Taken before the spawn: a fast job may have exited by the time spawn returns, and
        # its duration must not come out negative.
        started = time.time()
        try:
            proc = await spawn.start(argv, cwd=resolve_cwd(lj), env=self._env_for(spec, run, handoff_path))
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self._spawn_failed(run, str(art), f"{type(exc).__name__}: {exc}")
            return
        won = lifecycle.transition(
            self.ledger, run_id, attempt, State.SPAWNED, State.RUNNING, actor=self.actor,
            fields={"pid": proc.pid, "pgid": proc.pid, "pid_create_time": create_time(proc.pid),
                    "started_at": started, "lease_until": started + self.settings.lease,
                    "artifacts_dir": str(art)},
            detail={"pid": proc.pid, "argv": argv[:20]})
        if not won:
            # Someone settled the run while we spawned (abandoned, orphaned): don't let it run.
            signal_group(proc.pid, signal.SIGKILL)
            await proc.wait()
            proc.close()
            self._late_result(run, proc.returncode, "spawned")
            return
        out = Capture(art / "stdout.log", self.settings.output_cap)
        err = Capture(art / "stderr.log", self.settings.output_cap)
        readers = [asyncio.create_task(self._pump(proc.stdout, out)),
                   asyncio.create_task(self._pump(proc.stderr, err))]
        # The deadline is kept by the watchdog thread, so a ledger lock held elsewhere
        # (which can stall this loop) never delays a timeout kill.
        self.watchdog.watch(run_id, proc.pid, timeout, spec.grace)
        try:
            await proc.wait()
        except asyncio.CancelledError:
            # Runner shutting down hard: leave the process alone; a later runner settles it.
            self.watchdog.cancel(run_id)
            for r in readers:
                r.cancel()
            raise
        timed_out = self.watchdog.fired(run_id)
        self.watchdog.cancel(run_id)
        escaped: list[dict[str, Any]] = []
        if timed_out:
            # The leader is gone; whatever of its group ignored SIGTERM goes now, and so does
            # anything it started that left the group (setsid, setpgid) but carries its run id.
            signal_group(proc.pid, signal.SIGKILL)
            escaped = kill_escaped(run_id, self.id, exclude_pgid=proc.pid)
        # Drain what is left; a grandchild holding the pipe must not block us.
        done, pending = await asyncio.wait(readers, timeout=DRAIN_AFTER_EXIT_S)
        signal_group(proc.pid, signal.SIGKILL)  # leftover group members outlive nothing
        if pending:
            done2, pending = await asyncio.wait(pending, timeout=0.5)
            if pending and not escaped:
                escaped = find_escaped(run_id, self.id, exclude_pgid=proc.pid)  # still holding our pipe: record who
            for r in pending:
                r.cancel()
        for c in (out, err):
            c.close()
        proc.close()
        # When the process ended, not when the loop got round to it (a held ledger lock).
        ended = max(started, min(time.time(), proc.exited_at or time.time()))
        rc = proc.returncode
        exit_code = rc if rc is not None and rc >= 0 else None
        sig = -rc if rc is not None and rc < 0 else None
        hread = read_handoff(handoff_path, self.settings.handoff_max)
        findings = list(hread.findings)
        for c, name in ((out, "stdout"), (err, "stderr")):
            if c.write_error:
                findings.append({"code": "capture_degraded", "message": f"{name}: {c.write_error}"})
        findings.extend(budget_findings(spec, hread.data))
        if escaped:
            findings.append({"code": "escaped_processes", "message": (
                ("killed " if timed_out else "still running, holding the output pipe: ")
                + ", ".join(f"pid {e['pid']} ({e['cmd']})" for e in escaped[:10])
                + " — started by the job but outside its process group")})
        cols: dict[str, Any] = {
            "exit_code": exit_code, "signal": sig, "duration_s": ended - started,
            "output_truncated": int(out.truncated or err.truncated),
            **out.summary("stdout"), **err.summary("stderr"),
            "handoff_raw": hread.raw, "handoff": hread.data, "handoff_findings": findings,
        }
        fields = {"exit_code": exit_code, "signal": sig, "ended_at": ended}
        if timed_out:
            reason = f"budget.wall exceeded ({timeout:g}s)" if wall_budget else f"timeout after {timeout:g}s"

            def then_timeout(conn: sqlite3.Connection) -> None:
                outcomes.record(conn, run_id, state=State.TIMED_OUT.value, status="timed_out",
                                reason="budget_exceeded" if wall_budget else "timeout", **cols)
                retries.follow_up(conn, run_id, State.TIMED_OUT.value, actor=self.actor, spec=spec)
            won = lifecycle.transition(self.ledger, run_id, attempt, State.RUNNING, State.TIMED_OUT,
                                       actor=self.actor, reason=reason, fields=fields, then=then_timeout)
            if won:
                self._judge(run_id)
                self._finished(run_id)
            else:
                self._late_result(run, rc, "timed_out")
            return

        def then_verify(conn: sqlite3.Connection) -> None:
            outcomes.record(conn, run_id, state=State.VERIFYING.value,
                            status="success" if exit_code == 0 else "failed", **cols)
        won = lifecycle.transition(self.ledger, run_id, attempt, State.RUNNING, State.VERIFYING,
                                   actor=self.actor, fields=fields, then=then_verify)
        if not won:
            self._late_result(run, rc, "running")
            return
        await self._loop.run_in_executor(self._settle_pool, self._settle, run_id)
        self._finished(run_id)

    async def _execute_fanout(self, run: dict[str, Any], lj: LoadedJob) -> None:
        """Parent of a fan-out: queue every sub-task, wait until all settled, synthesize."""
        spec = lj.spec
        run_id, attempt = run["id"], run["attempt"]
        art = self.settings.artifacts_dir / str(run_id)
        with contextlib.suppress(OSError):
            art.mkdir(parents=True, exist_ok=True, mode=0o700)
        started = time.time()
        if not lifecycle.transition(self.ledger, run_id, attempt, State.SPAWNED, State.RUNNING, actor=self.actor,
                                    fields={"started_at": started, "lease_until": started + self.settings.lease,
                                            "artifacts_dir": str(art)},
                                    detail={"fanout": [t.name for t in spec.tasks]}):
            return
        self.ledger.write(lambda conn: fanout.create_children(conn, run, spec, actor=self.actor))
        self._wake.set()
        deadline = started + spec.timeout
        while True:
            settled, results = fanout.task_results(self.ledger.conn, run_id, spec)
            if settled:
                break
            state = self.ledger.one("SELECT state FROM runs WHERE id = ?", (run_id,))[0]
            if state != State.RUNNING:
                return  # abandoned or orphaned meanwhile: its children settle on their own
            if time.time() > deadline:
                self._fanout_timed_out(run, spec, results)
                return
            await asyncio.sleep(0.2)
        out = Capture(art / "stdout.log", self.settings.output_cap)
        err = Capture(art / "stderr.log", self.settings.output_cap)
        synth_ok: bool | None = None
        synth_rc: int | None = None
        if spec.synthesize is not None:
            remaining = max(5.0, deadline - time.time())
            synth_rc = await self._synthesize(spec, lj, run, fanout.synthesis_input(spec.name, run_id, results),
                                              out, err, remaining)
            synth_ok = synth_rc == 0
        out.close()
        err.close()
        exit_code, handoff = fanout.parent_outcome(spec, results, synth_ok)
        handoff["result"] = {**(handoff.get("result") or {}), "tasks": [
            {k: r.get(k) for k in ("task", "state", "attempts", "run_id", "exit_code", "signal", "reason")}
            for r in results]}
        if synth_rc is not None:
            handoff["result"]["synthesize_exit_code"] = synth_rc
        ended = time.time()
        cols: dict[str, Any] = {
            "exit_code": exit_code, "signal": None, "duration_s": ended - started,
            "output_truncated": int(out.truncated or err.truncated), **out.summary("stdout"), **err.summary("stderr"),
            "handoff_raw": json.dumps(handoff), "handoff": handoff, "handoff_findings": [],
        }

        def then_verify(conn: sqlite3.Connection) -> None:
            outcomes.record(conn, run_id, state=State.VERIFYING.value, status=handoff["status"], **cols)
        if not lifecycle.transition(self.ledger, run_id, attempt, State.RUNNING, State.VERIFYING, actor=self.actor,
                                    fields={"exit_code": exit_code, "ended_at": ended}, then=then_verify,
                                    detail={"succeeded": handoff["result"].get("succeeded"),
                                            "missing": handoff["result"].get("missing")}):
            self._late_result(run, exit_code, "running")
            return
        await self._loop.run_in_executor(self._settle_pool, self._settle, run_id)
        self._finished(run_id)

    def _fanout_timed_out(self, run: dict[str, Any], spec: JobSpec, results: list[dict[str, Any]]) -> None:
        pending = [r["task"] for r in results if not r.get("settled")]

        def then(conn: sqlite3.Connection) -> None:
            outcomes.record(conn, run["id"], state=State.TIMED_OUT.value, status="timed_out", reason="timeout",
                            handoff={"status": "failed", "error": "timeout", "result": {"unsettled": pending}},
                            handoff_findings=[])
            retries.follow_up(conn, run["id"], State.TIMED_OUT.value, actor=self.actor, spec=spec)
        if lifecycle.transition(self.ledger, run["id"], run["attempt"], State.RUNNING, State.TIMED_OUT,
                                actor=self.actor, reason=f"fan-out not settled within {spec.timeout:g}s",
                                detail={"unsettled": pending}, then=then):
            self._judge(run["id"])
            self._finished(run["id"])

    async def _synthesize(self, spec: JobSpec, lj: LoadedJob, run: dict[str, Any], payload: bytes,
                          out: Capture, err: Capture, timeout: float) -> int:
        """Run ``synthesize`` with every sub-task result as JSON on stdin; returns its exit
        code (-1 when it could not start, 124 on timeout)."""
        env = self._env_for(spec, run, self.settings.artifacts_dir / str(run["id"]) / "handoff.json")
        try:
            proc = await spawn.start(spec.argv(spec.synthesize), cwd=resolve_cwd(lj), env=env, stdin_pipe=True)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            err.feed(f"synthesize could not start: {exc}\n".encode())
            return -1
        readers = [asyncio.create_task(self._pump(proc.stdout, out)),
                   asyncio.create_task(self._pump(proc.stderr, err))]
        try:
            proc.stdin.write(payload)
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=timeout)
        except TimeoutError:
            await self._terminate(proc, spec.grace)
            await asyncio.wait(readers, timeout=DRAIN_AFTER_EXIT_S)
            for r in readers:
                r.cancel()
            proc.close()
            return 124
        await asyncio.wait(readers, timeout=DRAIN_AFTER_EXIT_S)
        signal_group(proc.pid, signal.SIGKILL)
        for r in readers:
            r.cancel()
        proc.close()
        return proc.returncode if proc.returncode is not None else -1

    async def _pump(self, stream: asyncio.StreamReader | None, cap: Capture) -> None:
        if stream is None:
            return
        while True:
            chunk = await stream.read(1 << 16)
            if not chunk:
                return
            cap.feed(chunk)

    async def _terminate(self, proc: spawn.Child, grace: float) -> None:
        """SIGTERM the whole group, SIGKILL it after ``grace`` seconds."""
        signal_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=grace)
        except TimeoutError:
            pass
        # The leader may be gone while group members ignore SIGTERM: kill the group anyway.
        signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=5)

    def _spawn_failed(self, run: dict[str, Any], art: str, message: str) -> None:
        run_id = run["id"]
        reason = f"spawn_failed: {message}"[:500]  # the cause, not just the class, is what the operator needs

        def then(conn: sqlite3.Connection) -> None:
            outcomes.record(conn, run_id, state=State.FAILED.value, status="failed", reason=reason,
                            stderr_head=message, handoff_findings=[])
            retries.follow_up(conn, run_id, State.FAILED.value, actor=self.actor)
        won = lifecycle.transition(self.ledger, run_id, run["attempt"], State.SPAWNED, State.FAILED,
                                   actor=self.actor, reason=reason, fields={"artifacts_dir": art},
                                   detail={"error": message[:2000]}, then=then)
        if won:
            self._judge(run_id)
            self._finished(run_id)

    def _late_result(self, run: dict[str, Any], rc: int | None, expected: str) -> None:
        """The process ended after someone else settled its run: record, never flip."""
        exit_code = rc if rc is not None and rc >= 0 else None
        sig = -rc if rc is not None and rc < 0 else None

        def tx(conn: sqlite3.Connection) -> str:
            row = conn.execute("SELECT state FROM runs WHERE id = ?", (run["id"],)).fetchone()
            state = row[0] if row else "missing"
            add_event(conn, actor=self.actor, kind="late_result", run_id=run["id"], job=run["job"],
                      attempt=run["attempt"], from_state=state, reason=f"exit after run was {state}",
                      detail={"exit_code": exit_code, "signal": sig, "expected_state": expected})
            return state
        self.ledger.write(tx)
        try:
            supervisor.note_late_result(self.ledger, run["id"], settings=self.settings)
        except Exception:
            log.exception("note_late_result failed for run %s", run["id"])

    def _thread_ledger(self) -> Ledger:
        led = getattr(self._thread_local, "ledger", None)
        if led is None:
            led = _SerialLedger(self.settings.ledger, self._write_lock)
            self._thread_local.ledger = led
        return led

    def _settle(self, run_id: int) -> None:
        try:
            supervisor.settle(self._thread_ledger(), run_id, settings=self.settings, actor="supervisor")
        except Exception:
            log.exception("supervisor.settle failed for run %s; settling by exit code", run_id)
            self._settle_fallback(run_id)

    def _settle_fallback(self, run_id: int) -> None:
        """Never leave a run in verifying because the supervisor broke: decide by exit code."""
        led = self._thread_ledger()
        row = led.one("SELECT * FROM runs WHERE id = ?", (run_id,))
        if row is None or row["state"] != State.VERIFYING:
            return
        ok = row["exit_code"] == 0
        to = State.SUCCEEDED if ok else State.FAILED

        def then(conn: sqlite3.Connection) -> None:
            outcomes.record(conn, run_id, state=to.value, reason="supervisor_error")
            if not ok:
                retries.follow_up(conn, run_id, to.value, actor=self.actor)
        lifecycle.transition(led, run_id, row["attempt"], State.VERIFYING, to, actor=self.actor,
                             reason="supervisor_error", then=then)

    def _judge(self, run_id: int) -> None:
        try:
            supervisor.judge_run(self.ledger, run_id, settings=self.settings)
        except Exception:
            log.exception("judging run %s failed", run_id)

    def _finished(self, run_id: int) -> None:
        row = self.ledger.one(
            "SELECT r.id, r.job, r.task, r.attempt, r.state, r.exit_code, r.signal, r.reason, r.started_at, r.ended_at,"
            " o.duration_s FROM runs r LEFT JOIN job_outcomes o ON o.run_id = r.id WHERE r.id = ?", (run_id,))
        if row is None:
            return
        if self._mission_wake is not None:
            self._mission_wake.set()  # a mission worker may have settled: no polling wait
        self._record_breaker(run_id, row)
        if self.on_finished is None:
            return
        try:
            name = f"{row['job']}/{row['task']}" if row["task"] else row["job"]
            self.on_finished(Finished(row["id"], name, row["attempt"], row["state"], row["duration_s"],
                                      row["exit_code"], row["signal"], row["reason"], row["ended_at"] or time.time()))
        except Exception:
            log.exception("on_finished callback failed")

    def _record_breaker(self, run_id: int, row: Any = None) -> None:
        """Move the job's breaker after run ``run_id`` ended (``row``: its ``runs`` row, when
        the caller already read it)."""
        if row is None:
            row = self.ledger.one("SELECT job, state, task FROM runs WHERE id = ?", (run_id,))
        if row is None or row["task"] or row["state"] not in lifecycle.TERMINAL:
            return
        lj = self.jobs.get(row["job"])
        if lj is None:
            return
        if row["state"] == State.SUCCEEDED and breaker.state_of(self.ledger.conn, row["job"])[0] == breaker.CLOSED:
            return  # a success on a closed breaker changes nothing: skip the write transaction
        try:
            changed = self.ledger.write(lambda conn: breaker.record(
                conn, lj.spec, run_id, row["state"], actor=self.actor, owner=lj.spec.owner,
                sinks=self.settings.notify))
        except Exception:
            log.exception("breaker update failed for run %s", run_id)
            return
        if changed == breaker.OPEN:
            log.warning("circuit breaker for %s opened after run %s: scheduled runs skipped for %gs",
                        row["job"], run_id, lj.spec.breaker.cooldown)
        elif changed == breaker.CLOSED:
            log.warning("circuit breaker for %s closed: trial run %s succeeded", row["job"], run_id)

    # -- missions -----------------------------------------------------------------------
    async def _mission_loop(self) -> None:
        """The missions' supervisor program (``core.mission.engine``), woken when a run
        finishes, else every ``MISSION_IDLE_S`` seconds; coordinator turns run in a thread."""
        engine = MissionEngine(self.settings)
        while True:
            self._mission_wake.clear()
            try:
                await asyncio.to_thread(lambda: engine.step(self._thread_ledger()))
            except Exception:
                log.exception("mission pass failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._mission_wake.wait(), timeout=MISSION_IDLE_S)

    # -- heartbeat, sweep, reload -------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        busy = False
        while True:
            try:
                self.heartbeat()
            except sqlite3.Error as exc:  # disk full, locked: one line a beat, not a traceback
                log.warning("heartbeat failed (%s); retrying next beat", exc)
            except Exception:
                log.exception("heartbeat failed; retrying next beat")
            if not busy:  # one periodic pass at a time; a slow delivery never piles up
                busy = True
                task = asyncio.create_task(asyncio.to_thread(self._periodic))
                self._bg.add(task)

                def _done(t: asyncio.Task[Any]) -> None:
                    nonlocal busy
                    busy = False
                    self._bg.discard(t)
                task.add_done_callback(_done)
            await asyncio.sleep(self.settings.heartbeat)

    def _periodic(self) -> None:
        try:
            supervisor.periodic(self._thread_ledger(), self.settings)
        except Exception:
            log.exception("supervisor.periodic failed")

    def heartbeat(self) -> None:
        """Renew this runner's heartbeat (``runners.heartbeat_at``) and the lease
        (``runs.lease_until``, Unix seconds) of every run it still watches — not of runs in
        ``lost``, nor of any run of this runner whose task is gone."""
        now = time.time()
        watched = json.dumps(sorted(self.live))

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE runners SET heartbeat_at = ? WHERE id = ?", (now, self.id))
            conn.execute(
                "UPDATE runs SET lease_until = ? WHERE runner_id = ? AND state IN ('spawned','running','verifying')"
                " AND id IN (SELECT value FROM json_each(?))",
                (now + self.settings.lease, self.id, watched))
        self.ledger.write(tx)

    async def _sweep_loop(self) -> None:
        sweeper = sweep.Sweeper(self.settings, actor=self.actor, own_runner_id=self.id)
        while True:
            await asyncio.sleep(self.settings.sweep_interval)
            try:
                report = await asyncio.to_thread(self._sweep_once, sweeper)
            except Exception:
                log.exception("sweep pass failed; retrying next pass")
                continue
            if self.lost:
                try:
                    lost = await asyncio.to_thread(self._settle_lost, sweeper, set(self.lost))
                    self.lost.difference_update(lost.finished)
                    report.orphaned.extend(lost.orphaned)
                except Exception:
                    log.exception("settling lost runs failed; retrying next pass")
            for run_id in report.orphaned:
                self._judge(run_id)
                self._finished(run_id)  # breaker, and the run's line like any other finish

    def _sweep_once(self, sweeper: Any) -> Any:
        return sweeper.sweep_once(self._thread_ledger())

    def _settle_lost(self, sweeper: Any, run_ids: set[int]) -> Any:
        """Settle runs in ``lost`` (their task died): kill a still-running process group,
        then ``orphaned`` with reason ``runner_error`` (an attempt; retried per policy).
        Returns ``sweep.LostReport``: ``finished`` (ids to drop from ``lost``: settled, or
        already terminal or not ours) and ``orphaned``; a failed write is retried next pass."""
        return sweeper.settle_lost(self._thread_ledger(), run_ids, runner_id=self.id, reason="runner_error")

    async def _reload_loop(self) -> None:
        try:
            await watch_specs(self.spec_dir, self._load_specs, self._stop)
        except Exception:
            log.exception("spec watcher stopped; specs will not hot-reload")

    # -- shutdown -----------------------------------------------------------------------
    async def _shutdown(self) -> None:
        """Stop spawning; give live runs ``shutdown_grace`` seconds; record what is left."""
        if self.live:
            log.warning("waiting up to %gs for %d running job(s)", self.settings.shutdown_grace, len(self.live))
            await asyncio.wait(list(self.live.values()), timeout=self.settings.shutdown_grace)
        left = sorted(self.live)
        for t in list(self.live.values()):
            t.cancel()
        await asyncio.gather(*self.live.values(), return_exceptions=True)
        for t in list(self._bg):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(t, timeout=5)
        now = time.time()

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE runners SET stopped_at = ?, stop_reason = ? WHERE id = ?",
                         (now, "clean shutdown", self.id))
            add_event(conn, actor=self.actor, kind="runner_stopped",
                      reason=f"{len(left)} run(s) left running" if left else "clean stop",
                      detail={"left_running": left})
        self.ledger.write(tx)
        self._settle_pool.shutdown(wait=False)
        self.ledger.close()
        led = getattr(self._thread_local, "ledger", None)
        if led is not None:
            led.close()


def budget_findings(spec: JobSpec, handoff: dict[str, Any] | None) -> list[dict[str, str]]:
    """Findings for a handoff that reports more steps, cost or tokens than the spec allows
    (``max_steps``, ``budget.cost``, ``budget.tokens``); code ``budget_exceeded``."""
    if not handoff:
        return []
    out = []
    checks = (("steps_used", spec.max_steps, "max_steps"), ("cost", spec.budget.cost, "budget.cost"),
              ("tokens", spec.budget.tokens, "budget.tokens"))
    for key, limit, name in checks:
        value = handoff.get(key)
        if limit is not None and isinstance(value, int | float) and value > limit:
            out.append({"code": "budget_exceeded", "message": f"handoff {key}={value:g} exceeds {name}={limit:g}"})
    return out
