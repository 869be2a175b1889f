"""The executor: runs one claimed run from ``spawned`` to its outcome.

It starts the command in its own process group (``spawn``), captures bounded output
(``capture``), leaves the deadline to the watchdog thread, reads the handoff, records the
move to ``verifying`` (or ``timed_out``) with the outcome, and hands the run to the
supervisor (verify + judge) in a pool thread. What happens after any run ends — the
supervisor's judgement, the job's breaker, the ``on_finished`` line — is ``after_end``,
shared with the fan-out parent and the sweep loop.

Nothing here blocks the event loop: every write goes to the runner's writer thread
(``core.ledger.writer``, awaited), process-table scans and handoff parsing run in worker
threads, and the supervisor (verify commands, the Claude judge) runs in the settle pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor as PoolExecutor
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from core import monitor, runas
from core.ledger import lifecycle
from core.ledger.connection import Ledger, is_locked_error
from core.ledger.lifecycle import State
from core.ledger.loop_store import LoopStore
from core.ledger.records import Run
from core.ledger.sql_store import SqlStore
from core.ledger.store import Store
from core.ledger.writer import Writer
from core.mission import worker as mission_worker
from core.processes import (
    create_time,
    describe,
    find_escaped,
    group_members,
    kill_escaped,
    signal_group,
    signal_name,
    stop_child,
)
from core.runner import spawn
from core.runner.capture import Capture
from core.runner.changes import LedgerChanges
from core.runner.handoff import read_handoff
from core.runner.reaper import Reaper
from core.runner.strays import TreeScans
from core.runner.waits import wait_event
from core.runner.watchdog import Watchdog
from core.spec.loader import LoadedJob, resolve_cwd
from core.spec.model import JobSpec
from core.spec.settings import Settings
from core.supervisor import supervisor
from core.supervisor.policy.breaker import BREAKER
from core.supervisor.policy.retry import RETRY
from core.text import quoted
from core.vocabulary import BreakerState, EndReason, RunCommand

log = logging.getLogger(__name__)
T = TypeVar("T")

DRAIN_AFTER_EXIT_S = 1.0  # how long output is still read after the leader exits
STRAY_LOOKS = 5  # looks for a run's strays at its end, while each finds something


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


#: Longest wait between two tries of a supervisor step while the ledger is out of reach (s).
LEDGER_WAIT_MAX_S = 5.0


class LedgerGaveUp(RuntimeError):
    """A supervisor step stopped waiting for the ledger: the runner is stopping and its ledger
    gave up (``Ledger.give_up``). Nothing was written; the run stays as it was for the next
    runner (one left ``verifying`` is settled when it is re-attached)."""


def until_ledger_answers(led: Ledger, step: Callable[[Ledger], T], what: str) -> T:
    """``step(led)``, tried again (backoff 0.2 s → ``LEDGER_WAIT_MAX_S``) for as long as it
    fails only because the ledger is out of reach or busy (``is_locked_error``: a lost
    PostgreSQL connection, a serialization conflict, SQLite's lock), as a write is never
    skipped; one warning line per step, however long. Raises ``LedgerGaveUp`` once ``led``
    gave up (a stop that cannot wait for the ledger: the thread must end, or the runner's
    exit waits for it for ever), and any other error at once."""
    delay, said = 0.2, False
    while True:
        try:
            return step(led)
        except Exception as exc:
            if not is_locked_error(exc):
                raise
            if led.given_up:
                raise LedgerGaveUp(f"{what}: the ledger {led.name} did not answer before the runner stopped") from exc
            if not said:
                log.warning("%s: the ledger is out of reach (%s); trying again until it answers", what, exc)
                said = True
            time.sleep(delay)
            delay = min(delay * 2, LEDGER_WAIT_MAX_S)


@dataclass
class Context:
    """What every part of one runner shares (built by ``Runner.run``).

    ``writer`` takes every write; ``ledger`` is the event loop's read connection (its own
    ``write`` goes through ``writer`` too, blocking: startup only); ``thread_ledger()``
    gives the calling pool thread its own; ``jobs()`` the current specs; ``wake()`` nudges
    the dispatcher. The loop writes through ``loop_store`` (the writer, awaited) and reads
    through ``store()`` (the calling thread's store).
    """

    settings: Settings
    runner_id: str
    actor: str
    writer: Writer
    ledger: Ledger
    thread_ledger: Callable[[], Ledger]
    watchdog: Watchdog
    settle_pool: PoolExecutor
    #: Where runs are started (``spawn.start_monitored``: folder set-up and ``Popen``), owned
    #: and shut down by the runner or ``exec`` that made it, so a stop leaves no thread.
    spawn_pool: PoolExecutor
    jobs: Callable[[], Mapping[str, LoadedJob]]
    wake: Callable[[], None]
    on_finished: Callable[[Finished], None] | None = None
    on_end: Callable[[], None] | None = None  # any run of this runner ended (wakes the missions)
    reaper: Reaper | None = None  # the child subreaper: ends what a run left outside its group
    tree_scans: TreeScans | None = None  # one look at the process tree for runs ending together
    #: Why run ``id`` was ended by an operator's stop (``run --kill``, Ctrl-C of ``exec``), or None.
    stopped_by: Callable[[int], str | None] | None = None
    #: Wakes loops waiting on runs they do not own (a fan-out parent on its sub-tasks): a run
    #: of this runner ended (``Executor.announce``) or the ledger feed saw a commit.
    changes: LedgerChanges = field(default_factory=LedgerChanges)
    loop_store: LoopStore = field(init=False)

    def __post_init__(self) -> None:
        self.loop_store = LoopStore(self.writer, retry=RETRY)

    def store(self) -> Store:
        """The calling thread's store: reads on that thread's own connection
        (``thread_ledger()``), writes through the writer."""
        return SqlStore(self.thread_ledger(), retry=RETRY)


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


def _rc(status: int | None) -> int | None:
    """A shell status as a ``Popen`` return code (negative: killed by that signal)."""
    code, sig = monitor.decode_status(status)
    return -sig if sig is not None else code


def task_of(spec: JobSpec, run: Run) -> Any:
    """The fan-out sub-task spec of ``run`` (its ``task``), None for an ordinary run."""
    return next((t for t in spec.tasks if t.name == run.task), None) if run.task else None


async def pump(stream: asyncio.StreamReader | None, cap: Capture) -> None:
    """Feed ``stream`` into ``cap`` until EOF."""
    if stream is None:
        return
    while True:
        chunk = await stream.read(1 << 16)
        if not chunk:
            return
        cap.feed(chunk)


class Executor:
    """Executes claimed runs; see the module docstring."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        #: Runs between their claim and their recorded start (job started, pid in the ledger).
        #: A stopping runner lets these finish starting before it leaves the rest to their
        #: monitors: a start cut off halfway would leave a job running that no record names.
        self.starting: set[int] = set()
        self._started = asyncio.Event()  # set whenever ``starting`` becomes empty

    async def starts_done(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until no run is between its claim and its recorded
        start; True when none is."""
        if not self.starting:
            return True
        self._started.clear()
        await wait_event(self._started, timeout)
        return not self.starting

    # -- the command a run starts with ---------------------------------------------------
    def command_for(self, spec: JobSpec, run: Run) -> list[str]:
        task = task_of(spec, run)
        if task is not None:
            return spec.argv(task.command)
        agent = mission_worker.command_for(spec, self.ctx.settings)
        if agent is not None:
            return agent
        if run.worker == RunCommand.FALLBACK and spec.fallback is not None:
            return spec.argv(spec.fallback)
        return spec.argv()

    def env_for(self, spec: JobSpec, run: Run, handoff: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update(spec.env)
        env.update({
            "WATCHKEEPER_RUN_ID": str(run.id),
            "WATCHKEEPER_RUNNER_ID": self.ctx.runner_id,
            "WATCHKEEPER_ATTEMPT": str(run.attempt),
            "WATCHKEEPER_HANDOFF": str(handoff),
            "WATCHKEEPER_JOB": spec.name,
            "WATCHKEEPER_LINEAGE": run.lineage,
        })
        if spec.max_steps is not None:
            env["WATCHKEEPER_MAX_STEPS"] = str(spec.max_steps)
        task = task_of(spec, run)
        if task is not None:
            env.update(task.env)
            env["WATCHKEEPER_TASK"] = task.name
            env["WATCHKEEPER_PARENT_RUN_ID"] = str(run.parent_run_id)
        env.update(mission_worker.env_for(spec, run, self.ctx.settings, self.ctx.store(), handoff.parent))
        return env

    # -- one run -------------------------------------------------------------------------
    async def execute(self, run: Run, lj: LoadedJob) -> None:
        """Run ``run`` (claimed, ``spawned``) to its outcome: the job starts under its
        per-run monitor (``core.monitor``), then ``follow`` watches it to its end."""
        self.starting.add(run.id)
        try:
            started = await self._start(run, lj)
        finally:
            self.starting.discard(run.id)
            if not self.starting:
                self._started.set()
        if started is not None:
            running, mon, degraded = started
            await self.follow(running, lj, mon, capture_note=degraded)

    async def _start(self, run: Run, lj: LoadedJob) -> tuple[Run, spawn.Monitored, str | None] | None:
        """Start ``run``'s job under its monitor and record it ``running`` (pid, start time,
        folder). Returns the run as recorded, its monitor and a capture note; None when it did
        not start (recorded as such: spawn failed, or settled meanwhile by someone else)."""
        ctx, spec = self.ctx, lj.spec
        run_id, attempt = run.id, run.attempt
        if run.task and task_of(spec, run) is None:
            # Its task left the job's spec after it was queued (a reload, an edit during a
            # stop): there is nothing to run, so it ends like a queued run of a removed job.
            if await ctx.loop_store.finish(
                    run_id, attempt, State.SPAWNED, State.ABANDONED, actor=ctx.actor,
                    reason_code=EndReason.JOB_REMOVED, reason=f"task {run.task} is no longer in job {spec.name}",
                    outcome={"status": "abandoned", "handoff_findings": []}):
                await self.after_end(run_id)
            return None
        art = ctx.settings.artifacts_dir / str(run_id)
        degraded = None
        try:
            art.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            # The run still runs and is recorded; its output goes to a private folder instead.
            art = Path(tempfile.mkdtemp(prefix=f"watchkeeper-run-{run_id}-"))
            degraded = f"artifacts folder unusable ({exc.strerror or exc}); output kept in {art}"
            log.warning("run %s: %s", run_id, degraded)
        handoff_path = art / "handoff.json"
        with contextlib.suppress(OSError):
            handoff_path.unlink()
        argv = self.command_for(spec, run)
        # Taken before the spawn: a fast job may have exited by the time spawn returns, and
        # its duration must not come out negative.
        started = time.time()
        env = self.env_for(spec, run, handoff_path)
        try:
            # A job's `user`: switched to when this runner may, else the run fails saying why
            # (never run as the runner's own user instead).
            account = runas.resolve(spec.user)
            if account is not None:
                argv, env = runas.wrap(argv, account), runas.environ(env, account, spec.env)
                runas.hand_over(art, ctx.settings.artifacts_dir, account)
        except (runas.RunAsError, OSError) as exc:
            await self.spawn_failed(run, str(art), f"could not start as its user: {exc}")
            return None
        try:
            mon = await spawn.start_monitored(ctx.spawn_pool, argv, cwd=resolve_cwd(lj), env=env, art=art,
                                              cap=ctx.settings.output_cap, timeout=self.timeout_of(spec, run)[0],
                                              grace=spec.grace)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            message, exit_code = start_failure(exc, argv, resolve_cwd(lj))
            await self.spawn_failed(run, str(art), message, exit_code=exit_code)
            return None
        fields: dict[str, Any] = {"pid": mon.pid, "pgid": mon.pid, "pid_create_time": create_time(mon.pid),
                  "started_at": started, "lease_until": started + ctx.settings.lease, "artifacts_dir": str(art)}
        won = await ctx.loop_store.start_run(run_id, attempt, actor=ctx.actor, fields=fields,
                                             detail={"pid": mon.pid, "argv": argv[:20]})
        if not won:
            # Someone settled the run while we spawned (abandoned, orphaned): don't let it run.
            mon.kill()
            await mon.job_exit()
            status = await mon.status()
            await mon.drained(DRAIN_AFTER_EXIT_S)
            await self.late_result(run, _rc(status), "spawned")
            return None
        return replace(run, state=State.RUNNING.value, **fields), mon, degraded

    def timeout_of(self, spec: JobSpec, run: Run) -> tuple[float, bool]:
        """(seconds, whether it is the ``budget.wall``) the run may take (``JobSpec.run_timeout``)."""
        return spec.run_timeout(run.task or "")

    async def follow(self, run: Run, lj: LoadedJob, mon: spawn.Monitored, *,
                     reattached: bool = False, capture_note: str | None = None) -> None:
        """Watch a running run (started here, or re-attached from an earlier runner with
        ``reattached``) to its end and record it: timeout and grace continue from the run's
        ``started_at``; the exit status and output come from its monitor's files, so a run
        that ended while no runner was there is recorded as it really ended."""
        ctx, spec = self.ctx, lj.spec
        run_id, attempt = run.id, run.attempt
        art = mon.art
        handoff_path = art / "handoff.json"
        started = float(run.started_at or time.time())
        timeout, wall_budget = self.timeout_of(spec, run)
        # The deadline is kept by the watchdog thread, so a ledger lock held elsewhere
        # (which can stall this loop) never delays a timeout kill; it counts from the run's
        # start, so a re-attached run past it is ended at once. The monitor keeps the same
        # deadline while no runner is there; whichever fires marks the folder ``timed_out``
        # first, so the runner that records the end says timed out. A job that already
        # ended (re-attached after its end) is not watched: its pid may be reused.
        if monitor.exit_status(art) is None:
            ctx.watchdog.watch(run_id, mon.pid, max(0.0, started + timeout - time.time()), spec.grace,
                               on_term=lambda _pgid: monitor.mark_timed_out(art))
        try:
            await mon.job_exit()
        except asyncio.CancelledError:
            # Runner stopping: the job goes on under its monitor; the next runner re-attaches it.
            ctx.watchdog.cancel(run_id)
            raise
        timed_out = ctx.watchdog.fired(run_id) or monitor.timed_out(art)
        ctx.watchdog.cancel(run_id)
        status = await mon.status()
        escaped: list[dict[str, Any]] = []
        escaped_how = ""
        reaper = ctx.reaper if ctx.reaper is not None and ctx.reaper.subreaper and not reattached else None
        if timed_out:
            # The leader is gone; whatever of its group ignored SIGTERM goes now.
            signal_group(mon.pid, signal.SIGKILL)
            if reaper is None:
                # Without a subreaper, what left the group (setsid, setpgid) but carries the run
                # id is found by a scan of every process: only here, at a timeout.
                escaped = await asyncio.to_thread(kill_escaped, run_id, str(run.runner_id or ctx.runner_id),
                                                  exclude_pgid=mon.pid)
                escaped_how = "killed "
        # Drain what is left (the monitor exits once its drains read the pipes to the end);
        # a grandchild holding the pipe must not block us.
        drained = await mon.drained(DRAIN_AFTER_EXIT_S)
        # What still runs in the job's group after its main process exited (a background
        # `cmd &`) ends now; said in the outcome so it is not ended silently.
        in_group = [] if timed_out else await self._group_leftovers(mon.pid)
        signal_group(mon.pid, signal.SIGKILL)  # leftover group members outlive nothing
        if reaper is not None:
            # As subreaper the runner adopted whatever the run started that left its process
            # group (setsid, double fork): ended now, whatever the outcome, success included.
            # "Created after the run started" on the kernel's clock, as psutil reads it (its
            # boot time is whole seconds): the leader's own create time, not time.time().
            leader_created = run.pid_create_time
            since = float(leader_created) if leader_created is not None else started - 1.0
            escaped, last = await self._end_strays(reaper, run_id, since, spec.grace, mon.pid)
            escaped_how = f"ended ({signal_name(last) or 'exited meanwhile'}) when the run ended: "
        # What held the pipe is ended now: its last output is read briefly; one that still
        # holds it (it left the group, and no subreaper found it) must not keep the run open.
        if not drained and not await mon.drained(0.5):
            if not escaped and reaper is None:
                escaped = await asyncio.to_thread(find_escaped, run_id, str(run.runner_id or ctx.runner_id),
                                                  exclude_pgid=mon.pid)
                escaped_how = "still running, holding the output pipe: "
            mon.end_monitor()
            await mon.drained(0.5)
        if status is None:  # no ``exit`` file (a full disk): what the monitor exited with
            status = mon.passed_status()
        try:
            out, err = await asyncio.to_thread(lambda: (monitor.finish_output(art, "stdout"),
                                                        monitor.finish_output(art, "stderr")))
            capture_error = None
        except OSError as exc:
            out = err = monitor.Output(0, b"", b"", False)
            capture_error = f"folding the output: {exc.strerror or exc}"
        # When the process ended (the monitor's record), not when the loop got round to it.
        ended = max(started, min(time.time(), mon.ended_at or time.time()))
        exit_code, sig = monitor.decode_status(status)
        rc = _rc(status)
        if os.path.lexists(handoff_path):  # parsing (up to handoff_max bytes of JSON) happens off the loop
            hread = await asyncio.to_thread(read_handoff, handoff_path, ctx.settings.handoff_max)
        else:  # a plain shell job wrote none: nothing to parse, no thread hop
            hread = read_handoff(handoff_path, ctx.settings.handoff_max)
        findings = list(hread.findings)
        for note in (capture_note, capture_error):
            if note:
                findings.append({"code": "capture_degraded", "message": note})
        findings.extend(budget_findings(spec, hread.data))
        if escaped:
            findings.append({"code": "escaped_processes", "message": (
                escaped_how + ", ".join(f"pid {p['pid']} ({p['cmd']})" for p in escaped[:10])
                + " — started by the job but outside its process group")})
        if in_group:
            findings.append({"code": "left_in_group", "message": (
                "ended (SIGKILL) when the run ended: " + ", ".join(f"pid {p['pid']} ({p['cmd']})" for p in in_group[:10])
                + " — still running in the job's process group after its main process exited")})
        cols: dict[str, Any] = {
            "exit_code": exit_code, "signal": sig, "duration_s": ended - started,
            "output_truncated": int(out.truncated or err.truncated),
            **out.summary("stdout"), **err.summary("stderr"),
            "handoff_raw": hread.raw, "handoff": hread.data, "handoff_findings": findings,
        }
        ends = {"exit_code": exit_code, "signal": sig, "ended_at": ended}
        stopped_by = ctx.stopped_by(run_id) if ctx.stopped_by is not None else None
        if stopped_by is not None and not timed_out:
            # Ended by an operator's stop (``run --kill``, Ctrl-C of ``exec``): recorded as
            # such, never judged as the job's own failure.
            outcome = {**cols, "status": "abandoned", "reason": "interrupted"}
            won = await ctx.loop_store.finish(
                run_id, attempt, State.RUNNING, State.ABANDONED, actor=ctx.actor,
                reason_code=EndReason.OPERATOR, reason="interrupted",
                fields=ends, outcome=outcome, spec=spec, detail={"by": stopped_by})
            if won:
                await self.after_end(run_id)
            else:
                await self.late_result(run, rc, "abandoned", cols)
            return
        if timed_out:
            code = EndReason.BUDGET_EXCEEDED if wall_budget else EndReason.TIMEOUT
            reason = (f"stopped at budget.wall ({timeout:g}s)" if wall_budget else f"timed out after {timeout:g}s")
            if sig == signal.SIGKILL:  # the watchdog's SIGKILL came after the grace
                reason += f"; SIGTERM ignored, killed {spec.grace:g}s later"
            outcome = {**cols, "status": "timed_out"}
            won = await ctx.loop_store.finish(
                run_id, attempt, State.RUNNING, State.TIMED_OUT, actor=ctx.actor, reason_code=code,
                reason=reason, fields=ends, outcome=outcome, spec=spec)
            if won:
                await self.after_end(run_id)
            else:
                await self.late_result(run, rc, "timed_out", cols)
            return
        if status is None:
            # The monitor died before the job and the job was not this runner's to reap (no
            # subreaper, or a re-attached run): how it ended cannot be told. Orphaned, as
            # when its runner died too, never judged as the job's own failure.
            reason = ("its monitor was killed while the job ran and the job's exit status could not be"
                      " collected; the process has ended")
            won = await ctx.loop_store.finish(
                run_id, attempt, State.RUNNING, State.ORPHANED, actor=ctx.actor,
                reason_code=EndReason.MONITOR_GONE, reason=reason, fields=ends, outcome=cols, spec=spec)
            if won:
                await self.after_end(run_id)
            else:
                await self.late_result(run, rc, "running", cols)
            return

        # Queued to the writer now (so a shutdown still commits it), and awaited by the settle
        # thread rather than the loop: one thread hop for everything after the exit.
        verifying = ctx.loop_store.enter_verifying(
            run_id, attempt, actor=ctx.actor, fields=ends,
            outcome={"status": "success" if exit_code == 0 else "failed", **cols})
        won, fin = await self.in_pool(self._settle_after, verifying, run_id)
        if not won:
            await self.late_result(run, rc, "running", cols)
            return
        self.announce(fin)

    async def _group_leftovers(self, pgid: int) -> list[dict[str, object]]:
        """``[{pid, cmd}]`` of the live members of the run's process group ``pgid`` after its
        leader exited; [] at once (no scan) when the group is empty."""
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        members = await asyncio.to_thread(group_members, pgid)
        return [describe(p) for p in members]

    async def _end_strays(self, reaper: Reaper, run_id: int, started: float, grace: float,
                          pgid: int) -> tuple[list[dict[str, Any]], int | None]:
        """End what run ``run_id`` (its leader created at ``started``, Unix seconds as psutil
        gives process create times) left outside its
        process group ``pgid``, looking again while a look found something (a stray's own
        children are adopted when it is ended), at most ``STRAY_LOOKS`` times. Returns
        ``([{pid, cmd}], last signal sent)``."""
        found: list[dict[str, Any]] = []
        last: int | None = None
        for _ in range(STRAY_LOOKS):
            tree = await self._tree_after_exit()
            if tree is not None and not tree.get(str(run_id)) and not reaper.adopted_since(tree, started):
                break  # nothing of this run is left: no thread hop
            got, sig = await asyncio.to_thread(reaper.end_run, run_id, grace=grace, exclude_pgid=pgid,
                                               tree=tree, since=started)
            if not got:
                break
            seen = {f["pid"] for f in found}
            found += [g for g in got if g["pid"] not in seen]
            last = sig if sig is not None else last
        return found, last

    async def _tree_after_exit(self) -> dict[str, list[Any]] | None:
        """The runner's process tree by run, looked at after this run's leader exited and
        shared with the runs ending at the same time; None: look per run (no shared scans,
        or the shared look failed)."""
        scans = self.ctx.tree_scans
        if scans is None:
            return None
        try:
            return await scans.after_now()
        except Exception:
            log.exception("the shared look at the process tree failed; looking for this run alone")
            return None

    async def in_pool(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the settle pool (the supervisor's threads)."""
        return await asyncio.get_running_loop().run_in_executor(self.ctx.settle_pool, fn, *args)

    async def settle(self, run_id: int) -> None:
        """Hand a ``verifying`` run to the supervisor (verify commands, judgement) in a worker
        thread, then record its end."""
        self.announce(await self.in_pool(self._settle_and_finish, run_id))

    def _settle_after(self, verifying: Future[bool], run_id: int) -> tuple[bool, Finished | None]:
        """In the settle pool: wait for the ``running → verifying`` write (``verifying``, queued
        to the writer by the loop; its error is raised here), then settle and finish the run.
        Returns (whether the move won its compare-and-set, the line for ``on_finished``); a
        lost move (someone else settled the run meanwhile) is not settled."""
        if not verifying.result():
            return False, None
        return True, self._settle_and_finish(run_id)

    def _settle_and_finish(self, run_id: int) -> Finished | None:
        self._settle(run_id)
        return self._finished_sync(run_id)

    async def terminate(self, proc: spawn.Child, grace: float) -> None:
        """Stop ``proc``'s whole process group with ``grace`` (``core.processes.stop_child``)."""
        await stop_child(proc.pid, proc.wait, grace)

    async def spawn_failed(self, run: Run, art: str, message: str, *, exit_code: int | None = None) -> None:
        """Record that ``run``'s job never started (``spawned → failed``, reason code
        ``spawn_failed``): ``message`` is the sentence for people (``start_failure``), never
        stored as the job's output; ``exit_code`` is what a shell would have exited with (127,
        126) or None."""
        ctx = self.ctx
        run_id = run.id
        # The sentence alone: the code is reason_code (older rows carry a "spawn_failed: " prefix).
        reason = message[:500]
        fields: dict[str, Any] = {"artifacts_dir": art}
        if exit_code is not None:
            fields["exit_code"] = exit_code
        won = await ctx.loop_store.finish(
            run_id, run.attempt, State.SPAWNED, State.FAILED, actor=ctx.actor,
            reason_code=EndReason.SPAWN_FAILED, reason=reason,
            fields=fields, detail={"error": message[:2000]},
            outcome={"status": "failed", "handoff_findings": [], "exit_code": exit_code})
        if won:
            await self.after_end(run_id)

    async def late_result(self, run: Run, rc: int | None, expected: str,
                          evidence: dict[str, Any] | None = None) -> None:
        """The process ended after someone else settled its run: record, never flip.
        ``evidence``: the capture's outcome columns (its output counts and slices)."""
        ctx = self.ctx
        exit_code = rc if rc is not None and rc >= 0 else None
        sig = -rc if rc is not None and rc < 0 else None
        await ctx.loop_store.record_late_result(run, actor=ctx.actor, exit_code=exit_code, signal=sig,
                                                expected=expected, evidence=evidence)
        await self.in_pool(self._note_late_result, run.id)

    def _note_late_result(self, run_id: int) -> None:
        try:
            until_ledger_answers(self.ctx.thread_ledger(),
                                  lambda led: supervisor.note_late_result(led, run_id, settings=self.ctx.settings),
                                  f"noting the late result of run {run_id}")
        except LedgerGaveUp as exc:
            log.warning("%s", exc)
        except Exception:
            log.exception("note_late_result failed for run %s", run_id)

    # -- after a run ended ---------------------------------------------------------------
    async def after_end(self, run_id: int) -> None:
        """A run reached a terminal state through this runner (or its sweep): the
        supervisor judges it (in the settle pool: the Claude judge may be consulted), then
        its breaker and ``on_finished``."""
        self.announce(await self.in_pool(self._judge_and_finish, run_id))

    def _judge_and_finish(self, run_id: int) -> Finished | None:
        self.judge(run_id)
        return self._finished_sync(run_id)

    def announce(self, fin: Finished | None) -> None:
        """On the loop thread: wake the missions, then ``on_finished``."""
        ctx = self.ctx
        if fin is None:
            return
        ctx.changes.notify()  # a fan-out parent may be waiting on this run
        if ctx.on_end is not None:
            ctx.on_end()  # a mission worker may have settled: no polling wait
        if ctx.on_finished is None:
            return
        try:
            ctx.on_finished(fin)
        except Exception:
            log.exception("on_finished callback failed")

    def _settle(self, run_id: int) -> None:
        try:
            # A ledger out of reach is waited for: settling by exit code then would record an
            # unverified run as a success (its checks never ran), and no escalation.
            until_ledger_answers(self.ctx.thread_ledger(),
                                  lambda led: supervisor.settle(led, run_id, settings=self.ctx.settings,
                                                                actor="supervisor"),
                                  f"settling run {run_id}")
        except LedgerGaveUp as exc:
            # Not settled by exit code either: it stays verifying, and the runner that
            # re-attaches it settles it with its checks.
            log.warning("%s; run %s stays verifying for the next runner", exc, run_id)
        except Exception:
            log.exception("supervisor.settle failed for run %s; settling by exit code", run_id)
            self._settle_fallback(run_id)

    def _settle_fallback(self, run_id: int) -> None:
        """Never leave a run in verifying because the supervisor broke: decide by exit code."""
        store = SqlStore(self.ctx.thread_ledger(), retry=RETRY)
        run = store.run(run_id)
        if run is None or run.state != State.VERIFYING:
            return
        to = State.SUCCEEDED if run.exit_code == 0 else State.FAILED
        store.finish_run(run_id, run.attempt, State.VERIFYING, to, actor=self.ctx.actor, reason_code=EndReason.SUPERVISOR_ERROR,
                         reason="the supervisor failed while settling it: decided by its exit code")

    def judge(self, run_id: int) -> None:
        """The supervisor's judgement of a terminal run (call from a pool thread)."""
        try:
            until_ledger_answers(self.ctx.thread_ledger(),
                                  lambda led: supervisor.judge_run(led, run_id, settings=self.ctx.settings),
                                  f"judging run {run_id}")
        except LedgerGaveUp as exc:
            log.warning("%s", exc)
        except Exception:
            log.exception("judging run %s failed", run_id)

    def _finished_sync(self, run_id: int) -> Finished | None:
        """In a pool thread: the run's breaker, and its line for ``on_finished``."""
        store = self.ctx.store()
        fin = store.finished_run(run_id)
        if fin is None:
            return None
        run = fin.run
        self.record_breaker(store, run)
        name = f"{run.job}/{run.task}" if run.task else run.job
        return Finished(run.id, name, run.attempt, run.state, fin.duration_s, run.exit_code,
                        run.signal, run.reason, run.ended_at or time.time())

    def record_breaker(self, store: Store, run: Run) -> None:
        """Move the job's breaker after ``run`` ended (as read after its end)."""
        ctx = self.ctx
        if run.task or run.state not in lifecycle.TERMINAL:
            return
        lj = ctx.jobs().get(run.job)
        if lj is None:
            return
        if run.state == State.SUCCEEDED and store.breaker_state(run.job) == BreakerState.CLOSED:
            return  # a success on a closed breaker changes nothing: skip the write transaction
        try:
            changed = store.record_breaker(lj.spec, run.id, run.state, actor=ctx.actor, words=BREAKER,
                                           owner=lj.spec.owner, sinks=ctx.settings.notify)
        except Exception:
            log.exception("breaker update failed for run %s", run.id)
            return
        if changed == BreakerState.OPEN:
            log.warning("circuit breaker for %s opened after run %s (cooldown %gs)",
                        run.job, run.id, lj.spec.breaker.cooldown)
        elif changed == BreakerState.CLOSED:
            log.warning("circuit breaker for %s closed: trial run %s succeeded", run.job, run.id)


#: What a shell exits with when a command is not found, or found but not executable.
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126


def start_failure(exc: BaseException, argv: list[str], cwd: str | None) -> tuple[str, int | None]:
    """Why a job could not start, as a sentence for people (not Python's exception text,
    which would read as the job's output), and the exit status a shell would have given
    (127 not found, 126 not executable) or None: ``("could not start: no such command
    'x'", 127)``. Names are quoted through the one escaper (``core.text.quoted``)."""
    prog = argv[0] if argv else ""
    where = getattr(exc, "filename", None)
    if isinstance(exc, FileNotFoundError):
        if cwd is not None and where == cwd:
            return f"could not start: no such folder {quoted(cwd)} (cwd)", None
        return f"could not start: no such command {quoted(where or prog)}", EXIT_NOT_FOUND
    if isinstance(exc, PermissionError):
        return f"could not start: {quoted(where or prog)} is not executable (permission denied)", EXIT_NOT_EXECUTABLE
    if isinstance(exc, OSError):
        return f"could not start: {exc.strerror or exc}", None
    return f"could not start: {exc}", None
