"""The embedded runner (asyncio): composes the scheduler, the dispatcher, the executor (and
its fan-out parent), the heartbeat, the runner's own sweep and the spec watcher.

Each part does its work in a synchronous ``tick(now)`` (``scheduler``, ``dispatcher``) or
one coroutine per run (``executor``, ``fanout``); this module only decides when they run.
Nothing here polls per job: the scheduler loop sleeps until the next due slot (or a spec
change), the dispatch loop until the next queued run is due, a run is queued by this
runner, or another process commits to the ledger (``core.ledger.wake``: the WAL file's change
on SQLite, ``LISTEN/NOTIFY`` on PostgreSQL; no polling). Every run state change goes through
``core.ledger.lifecycle``.

Nothing blocks the event loop: every ledger write of the runner goes through ONE writer
thread (``core.ledger.writer``) that commits in groups; the scheduler's and dispatcher's
ticks, the sweep, the supervisor (verify commands, the Claude judge) and the missions run in
pool threads, each with its own read connection. The watchdog thread stays as the safety
net for deadlines. Every thread and connection is closed at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from core import __version__, liveness
from core.ledger import dialect, wake
from core.ledger.connection import Ledger, StorageError
from core.ledger.jobs import job_sources, sync_jobs
from core.ledger.loop_store import LoopStore
from core.ledger.records import Run
from core.ledger.sql_store import SqlStore
from core.ledger.store import Store
from core.ledger.thread_ledgers import ThreadLedgers
from core.ledger.writer import Writer, WriterLedger
from core.mission.engine import MissionEngine
from core.processes import create_time, signal_group, signal_name, stop_group
from core.runner import reattach, spawn
from core.runner.daily_prune import DailyPrune
from core.runner.deadman import Deadman
from core.runner.dispatcher import Claimed, Dispatcher
from core.runner.executor import Context, Executor, Finished
from core.runner.failures import FailureLog
from core.runner.fanout import FanoutParent
from core.runner.reaper import Reaper
from core.runner.reload import signature, watch_specs
from core.runner.scheduler import Scheduler
from core.runner.strays import TreeScans
from core.runner.systemd import ServiceNotifier
from core.runner.waits import wait_event
from core.runner.watchdog import Watchdog
from core.spec.loader import LoadedJob, LoadResult, load_dir
from core.spec.settings import Settings
from core.supervisor import supervisor
from core.supervisor.policy.retry import RETRY
from core.sweep import sweep, watch

__all__ = ["Finished", "Runner"]

log = logging.getLogger(__name__)

#: What a stop does with the runs still going: leave them to their monitors and the next
#: runner, wait for them (up to ``shutdown_grace``), or end them.
STOP_MODES = ("leave", "drain", "kill")
#: Seconds a ``--kill`` stop waits, after the SIGKILL, for the runs to be recorded.
KILL_RECORD_S = 5.0
#: Seconds between SIGTERM and SIGKILL when a run abandoned from another host is killed here.
KILL_REQUEST_GRACE_S = 5.0
SETTLE_THREADS = 4  # supervisor settle threads (verify commands run there)
#: Longest the dispatcher sleeps with nothing due, seconds (a bound; wake-ups come earlier).
IDLE_WAKE_S = 30.0
#: Tables whose change wakes the missions' pass (see ``Runner._on_tables``).
MISSION_TABLES = frozenset({"missions", "mission_workers", "mission_calls"})
#: Longest wait between two mission passes, seconds (a bound: a worker run finishing wakes the
#: loop at once, and so does any other process's commit, e.g. a person's approve, answer or
#: abort from the CLI or console, through the ledger feed).
MISSION_IDLE_S = 30.0
#: Seconds a stopping runner waits at most for runs being started to be recorded running
#: (a spawn takes milliseconds; the bound keeps a stuck ledger from holding the stop).
START_WAIT_S = 5.0
#: How long a stop waits at least for a ledger that does not answer before it ends
#: unrecorded, seconds (``Runner._give_up_ledgers``; ``shutdown_grace`` when longer): long
#: enough for a PostgreSQL restart or failover.
STOP_LEDGER_WAIT_S = 5.0


class Runner:
    """Runs the jobs of ``spec_dir`` against the ledger named in ``settings``.

    Args:
        spec_dir: folder of job spec TOML files (hot-reloaded).
        settings: runner-wide settings (ledger path, concurrency, heartbeat, lease, …).
        install_signal_handlers: stop on SIGINT/SIGTERM (only from the main thread).
        on_finished: called on the loop thread for every run that reaches a terminal state
            through this runner.
        subreaper: make this process a child subreaper (Linux), so whatever a run starts
            outside its process group is re-parented here and ended when the run ends
            (``core.runner.reaper``). It applies to the whole process: an embedding test
            harness may turn it off.

    After ``run`` returns, ``stop_reason`` says why it stopped ("SIGTERM (systemd stop)", …)
    and ``left_behind`` lists the runs it left running (``[{id, job, task, attempt, pid}]``),
    for the next runner to re-attach.

    ``stop_mode`` says what a stop does with the runs still going (``STOP_MODES``): "leave"
    (default) leaves them to their monitors and the next runner; "drain" waits up to
    ``shutdown_grace`` seconds for them first; "kill" ends them (SIGTERM, SIGKILL after
    ``shutdown_grace``), recorded as abandoned, reason ``interrupted``. A second SIGINT stops
    waiting. ``on_notice`` gets the operator-facing lines of a stop ("waiting up to 10s…");
    ``on_started`` is called once the runner is up and a SIGINT/SIGTERM is a clean stop.
    """

    # Made by run(): the loop's events, the threads, the connections and the parts live only
    # while it runs.
    _stop: asyncio.Event
    _wake: asyncio.Event  # the dispatcher: a run was queued or ended
    _kick: asyncio.Event  # the scheduler: specs changed
    _mission_wake: asyncio.Event
    _reload_lock: asyncio.Lock  # reloads are applied one at a time, in order
    _loaded_signature: tuple[tuple[str, int, int], ...] | None  # spec files as of the first load
    _settle_pool: ThreadPoolExecutor
    writer: Writer  # the one writer thread
    loop_store: LoopStore  # the loop's writes, through the writer
    ledger: Ledger  # the loop's read connection
    watchdog: Watchdog  # one deadline thread per runner
    scheduler: Scheduler
    dispatcher: Dispatcher
    executor: Executor
    fanout: FanoutParent

    def __init__(self, spec_dir: str | os.PathLike[str], settings: Settings, *,
                 install_signal_handlers: bool = True,
                 on_finished: Callable[[Finished], None] | None = None,
                 runner_id: str | None = None, subreaper: bool = True, stop_mode: str = "leave",
                 on_notice: Callable[[str], None] | None = None,
                 on_started: Callable[[], None] | None = None) -> None:
        if stop_mode not in STOP_MODES:
            raise ValueError(f"stop_mode must be one of {', '.join(STOP_MODES)}, not {stop_mode!r}")
        self.spec_dir = Path(spec_dir).resolve()  # jobs.source stays stable across restarts
        self.settings = settings
        self.id = runner_id or f"{liveness.hostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.actor = f"runner:{self.id}"
        self.install_signal_handlers = install_signal_handlers
        self.on_finished = on_finished
        self.jobs: dict[str, LoadedJob] = {}
        self.live: dict[int, asyncio.Task[None]] = {}
        # Runs whose task died of an error in the runner itself (a ledger write that failed
        # with disk full, say): no longer watched, so their leases are not renewed and the
        # sweep loop settles them (``runner_error``) until a write succeeds.
        self.lost: set[int] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._bg: set[asyncio.Task[Any]] = set()
        self.reaper = Reaper(self.id)
        self.failures = FailureLog(log)  # the loops' failures: one line per kind, rate-limited
        self._beat_failing_since = 0.0  # monotonic: the first of the heartbeats failing now, 0 when none
        self._judge_hold_until = 0.0  # monotonic: judge no other runner before this (hold_judging)
        self._sweeper: Any = None
        self._subreaper = subreaper
        self.stop_reason = "stop requested"
        self._stop_detail: dict[str, Any] = {}
        self.left_behind: list[Run] = []  # the runs a stop left running under their monitors
        #: Set when the stop could not be recorded (the ledger did not answer): the ids of the
        #: runs it left running all the same.
        self.unrecorded_left: list[int] | None = None
        self.started = threading.Event()
        self.service = ServiceNotifier()  # systemd's READY/WATCHDOG; silent outside systemd
        self.deadman = Deadman(self.settings.deadman.url, timeout=self.settings.deadman.timeout)
        self._pinging = False
        self.stop_mode = stop_mode
        self.on_notice = on_notice
        self.on_started = on_started
        self._killing: dict[int, str] = {}  # runs ended by a --kill stop: why

    # -- public -------------------------------------------------------------------------
    def request_stop(self, reason: str | None = None) -> None:
        """Ask the runner to stop (thread-safe, idempotent). ``reason`` is recorded as the
        runner's ``stop_reason`` (e.g. "console quit")."""
        loop, stop = self._loop, getattr(self, "_stop", None)
        if loop is None or stop is None:
            return
        if reason and not stop.is_set():
            self.stop_reason = reason
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(stop.set)

    def _on_signal(self, sig: signal.Signals) -> None:
        """SIGINT/SIGTERM: a clean stop, attributed. Under systemd (``INVOCATION_ID`` set) a
        SIGTERM is the unit being stopped or restarted."""
        if self._stop.is_set():
            if not self._hurry.is_set():
                self._hurry.set()
                if self.stop_mode == "kill":  # --kill does not leave runs behind: it stops waiting for SIGTERM
                    self._notice(f"{sig.name} again: no longer waiting; SIGKILL now to what still runs")
                else:
                    self._notice(f"{sig.name} again: no longer waiting; what still runs is left running"
                                 " for the next runner")
            return
        systemd = bool(os.environ.get("INVOCATION_ID"))
        self.stop_reason = sig.name + (" (systemd stop)" if systemd and sig == signal.SIGTERM else "")
        self._stop_detail = {"signal": sig.name, "user": os.environ.get("USER") or self.settings.operator,
                             "systemd_invocation": os.environ.get("INVOCATION_ID"), "pid": os.getpid()}
        self._notice(f"{sig.name} received: stopping ({self._stop_plan()})")
        self._stop.set()

    async def run(self) -> None:
        """Run until ``request_stop`` or SIGINT/SIGTERM; then shut down (see docs/settings.md)."""
        self._loop = asyncio.get_running_loop()
        self.watchdog = Watchdog()
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._kick = asyncio.Event()
        self._mission_wake = asyncio.Event()
        self._hurry = asyncio.Event()  # a second SIGINT: stop waiting for runs
        self._reload_lock = asyncio.Lock()
        self._loaded_signature = None
        # Supervisor settles (verify + judge) run here: a few threads, so they don't starve the
        # event loop of the GIL; verify commands of one run never block the loop.
        self._settle_pool = ThreadPoolExecutor(max_workers=SETTLE_THREADS, thread_name_prefix="settle")
        self._spawn_pool = spawn.spawn_pool()
        # The heartbeat's own thread and connection (``heartbeat``).
        self._beat_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="heartbeat")
        self._beat_ledger: Ledger | None = None
        try:
            self.settings.artifacts_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:  # runs are still executed and recorded; capture degrades
            log.error("artifacts folder %s unusable: %s", self.settings.artifacts_dir, exc)
        self.writer = Writer(self.settings.ledger)
        self.ledger = WriterLedger(self.writer)  # the loop's reads; its writes are startup only
        self._thread_ledgers = ThreadLedgers(self.writer)
        if self._subreaper:
            self.reaper.start()
        self._compose()
        if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._loop.add_signal_handler(sig, self._on_signal, sig)
        registered_at = time.time()
        self._register()
        # Taken before the load: a spec written between it and the watch starting is reloaded.
        self._loaded_signature = signature(Path(self.spec_dir))
        self._load_specs(load_dir(self.spec_dir, prefer=job_sources(self.ledger)))
        # Runs an earlier runner of this host left (a stop, a crash, an upgrade) are taken over
        # first, so the startup sweep orphans only what nothing can tell the end of.
        await self._reattach()
        await self._reconcile()
        self._record_past_gap(registered_at)
        self.started.set()
        # Said once the signal handlers are in place: a Ctrl-C after this line is a clean stop.
        self._notice_started()
        self.service.ready(f"running {len(self.jobs)} job(s) from {self.spec_dir}")
        daily_prune = DailyPrune(self.settings, self._thread_ledger, actor=self.actor)
        loops = [
            asyncio.create_task(daily_prune.loop(self._stop), name="retention"),
            asyncio.create_task(self._scheduler_loop(), name="scheduler"),
            asyncio.create_task(self._dispatch_loop(), name="dispatch"),
            asyncio.create_task(self._sweep_loop(), name="sweep"),
            asyncio.create_task(self._reload_loop(), name="reload"),
            asyncio.create_task(self._mission_loop(), name="missions"),
            # Another process's commit (``watchkeeper trigger`` on any host) wakes the dispatcher.
            asyncio.create_task(wake.follow(self.settings.ledger, self._on_commit, stop=self._stop,
                                            tables=dialect.WAKE_TABLES, on_tables=self._on_tables),
                                name="ledger-feed"),
        ]
        # The heartbeat goes on while a stop drains or kills runs: a stopping runner is alive,
        # and must never look stalled (a critical runner gap) to a watcher.
        self._heartbeat_task = asyncio.create_task(self._heartbeat_loop(), name="heartbeat")
        try:
            await self._stop.wait()
        finally:
            self.service.stopping()
            for t in loops:
                t.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            await self._shutdown()
            if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGINT, signal.SIGTERM):
                    with contextlib.suppress(Exception):
                        self._loop.remove_signal_handler(sig)

    def _store(self) -> Store:
        """The calling thread's store: reads on its own connection, writes through the writer
        (ticks run in pool threads)."""
        return SqlStore(self._thread_ledger(), retry=RETRY)

    def _compose(self) -> None:
        writer = self.writer
        self.scheduler = Scheduler(store=self._store, actor=self.actor, on_queued=lambda _id: self._nudge_threadsafe())
        self.dispatcher = Dispatcher(store=self._store, runner_id=self.id, actor=self.actor,
                                     lease_s=self.settings.lease, host=liveness.hostname(),
                                     boot_id=liveness.boot_id(), labels=self.settings.labels)
        ctx = Context(settings=self.settings, runner_id=self.id, actor=self.actor, writer=writer, ledger=self.ledger,
                      thread_ledger=self._thread_ledger, watchdog=self.watchdog, settle_pool=self._settle_pool,
                      spawn_pool=self._spawn_pool,
                      jobs=lambda: self.jobs, wake=self._nudge, on_finished=self.on_finished,
                      on_end=self._mission_wake.set, reaper=self.reaper,
                      tree_scans=TreeScans(self.reaper), stopped_by=self._killing.get)
        self.executor = Executor(ctx)
        self.loop_store = ctx.loop_store
        self.fanout = FanoutParent(self.executor)

    def _on_commit(self) -> None:
        """A connection committed: dispatch, the missions' pass and fan-out parents look again."""
        self._on_tables(None)

    def _on_tables(self, changed: frozenset[str] | None) -> None:
        """Commits changed ``changed`` (None: unknown, so anything): dispatch and fan-out
        parents look again; the missions' pass only for a mission table (a worker run of
        this runner ending wakes it itself, ``on_end``): on a busy fleet every runner's
        commit reaches every runner, and a pass per commit was a read per runner each time."""
        self._nudge()
        if changed is None or changed & MISSION_TABLES:
            self._mission_wake.set()
        executor = getattr(self, "executor", None)
        if executor is not None:
            executor.ctx.changes.notify()

    def _nudge(self) -> None:
        wake = getattr(self, "_wake", None)
        if wake is not None:
            wake.set()

    def _nudge_threadsafe(self) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # loop closed: nothing to wake
                loop.call_soon_threadsafe(self._nudge)

    # -- startup ------------------------------------------------------------------------
    def _register(self) -> None:
        me = os.getpid()
        SqlStore(self.ledger).register_runner(
            runner_id=self.id, hostname=liveness.hostname(), boot_id=liveness.boot_id(), pid=me,
            pid_create_time=create_time(me), labels=self.settings.labels,
            heartbeat_s=self.settings.heartbeat, lease_s=self.settings.lease, version=__version__,
            spec_dir=str(self.spec_dir), actor=self.actor, owner=self.settings.runner_owner)

    def _record_past_gap(self, started_at: float) -> None:
        """The runner before this one vanished without a clean stop: record the gap after the
        fact (``core.sweep.watch.record_past_gap``); this runner's heartbeat resolves it."""
        try:
            watch.record_past_gap(self.ledger, self.settings, runner_id=self.id, started_at=started_at,
                                  specs=[lj.spec for lj in self.jobs.values()])
        except Exception:
            log.exception("recording the runner gap before this start failed; `watchkeeper status` still shows it")

    async def _reattach(self) -> None:
        """Take over the runs earlier runners of this host left (``core.runner.reattach``):
        follow the live ones, record the true end of those that ended meanwhile, settle those
        left verifying. Failures are logged; the next sweep pass tries again."""
        try:
            found = await asyncio.to_thread(lambda: reattach.candidates(self._thread_ledger(), runner_id=self.id))
        except Exception:
            log.exception("looking for runs to re-attach failed; the next sweep pass tries again")
            return
        for cand in found:
            run = cand.run
            if run.id in self.live:
                continue
            lj = await asyncio.to_thread(reattach.job_for, self._thread_ledger(), run.job, self.jobs)
            if lj is None:
                continue  # no spec at all: the sweep settles it
            try:
                won = await self.loop_store.reattach_run(run, runner_id=self.id, lease_s=self.settings.lease,
                                                         reason=reattach.FOUND[cand.found])
            except StorageError as exc:
                log.warning("run %s: re-attaching failed (%s); the next sweep pass tries again", run.id, exc)
                continue
            if not won:
                continue
            log.warning("run %s (%s): re-attached; %s", run.id, run.job, reattach.FOUND[cand.found])
            if cand.found == "verifying":
                body = self.executor.settle(run.id)
            elif cand.found == "fanout":
                body = self.fanout.resume(run, lj)
            elif run.pid is None or run.artifacts_dir is None:
                continue  # reattachable() vouched for both; a run without them is the sweep's
            else:
                mon = spawn.attach(run.pid, Path(run.artifacts_dir))
                body = self.executor.follow(run, lj, mon, reattached=True)  # its processes carry the old runner id
            self._track(run.id, body)

    async def _reconcile(self) -> None:
        try:
            settled = await asyncio.to_thread(
                lambda: sweep.reconcile_startup(self._thread_ledger(), self.settings, runner_id=self.id))
        except Exception:
            log.exception("startup reconciliation failed; the periodic sweep will retry")
            return
        for run_id in settled or []:
            await self.executor.in_pool(self.executor.judge, run_id)

    def _load_specs(self, result: LoadResult) -> None:
        """Apply a fresh load at startup (on the loop, before anything runs)."""
        new = self._sync_specs(result, self.ledger)
        if new is not None:
            self._apply_jobs(new)

    def _on_reload(self, result: LoadResult) -> None:
        """The spec watcher's callback (on the loop): the ledger part runs in a pool thread,
        one reload at a time and in order; the new specs are applied back on the loop."""
        task = asyncio.create_task(self._reload(result), name="reload-apply")
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def _reload(self, result: LoadResult) -> None:
        async with self._reload_lock:
            try:
                new = await asyncio.to_thread(lambda: self._sync_specs(result, self._thread_ledger()))
            except Exception:
                log.exception("applying the reloaded specs failed; the previous specs stay")
                return
            if new is not None:
                self._apply_jobs(new)

    def _sync_specs(self, result: LoadResult, led: Ledger) -> dict[str, LoadedJob] | None:
        """Record a fresh load in the ledger; returns the jobs to run from now on (None: keep
        the current ones). Valid jobs replace old specs; jobs in a bad file keep theirs.

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
            SqlStore(led).record_spec_errors(result.errors, actor=self.actor)
            return None
        # An invalid file opens (or a fixed one resolves) its spec_invalid escalation here;
        # a job that never loaded has no owner of its own: the runner's owner hears of it.
        sync_jobs(led, result, actor=self.actor, sinks=self.settings.notify, owner=self.settings.runner_owner)
        new = dict(result.jobs)
        for name, old in self.jobs.items():
            if name not in new and old.source in result.bad_files:
                new[name] = old
        return new

    def _apply_jobs(self, new: dict[str, LoadedJob]) -> None:
        """On the loop: the parts run ``new`` from now on; the scheduler and dispatcher wake."""
        self.jobs = new
        self.scheduler.set_jobs(new)
        self.dispatcher.jobs = new
        kick = getattr(self, "_kick", None)
        if kick is not None:
            kick.set()
        self._nudge()

    # -- scheduling and dispatch --------------------------------------------------------
    async def _scheduler_loop(self) -> None:
        while True:
            self._kick.clear()
            try:
                wake = await asyncio.to_thread(self.scheduler.tick, time.time())
                self.failures.ok("scheduler tick")
            except Exception as exc:
                self.failures.failed("scheduler tick", exc)
                wake = time.time() + 1.0
            await wait_event(self._kick, wake - time.time())

    async def _dispatch_loop(self) -> None:
        while True:
            self._wake.clear()
            next_due: float | None = None
            try:
                room = self.settings.concurrency - len(self.live)
                tick = asyncio.ensure_future(asyncio.to_thread(self._dispatch_tick, room))
                try:
                    claims, next_due = await asyncio.shield(tick)
                except asyncio.CancelledError:
                    # A stop arrived while this tick claimed: what it claimed is started like
                    # any run being started (then left to its monitor), never left claimed
                    # with nothing started (``spawned`` with no process, for a day elsewhere).
                    # Bounded: a claim stuck on a ledger that does not answer must not hold
                    # the stop (that stop goes unrecorded anyway, and the sweep settles it).
                    # A tick that ends after this wait ends unheard: its error is the lost
                    # ledger the stop reports once, not a second traceback on the way out.
                    tick.add_done_callback(lambda t: t.cancelled() or t.exception())
                    done, _ = await asyncio.wait({tick}, timeout=START_WAIT_S)
                    if done and tick.exception() is None:
                        for claimed in tick.result()[0]:
                            self._start(claimed.run, claimed.job)
                    raise
                for claimed in claims:
                    self._start(claimed.run, claimed.job)
                self.failures.ok("dispatch")
            except Exception as exc:
                self.failures.failed("dispatch", exc)
            # Sleep until the next queued run is due, this runner queues or ends a run, or
            # another process commits (the ledger feed sets _wake). A queued run that is
            # due but was not claimed waits for a limit to free up (a run ending wakes us).
            now = time.time()
            limit = next_due if next_due is not None and next_due > now else now + IDLE_WAKE_S
            await wait_event(self._wake, limit - time.time())

    def _dispatch_tick(self, room: int) -> tuple[list[Claimed], float | None]:
        """In a pool thread: claim what is due, and when the next queued run is due. With no
        room nothing is read: a run of this runner ending wakes the loop (every commit of a
        busy fleet would otherwise cost a read here)."""
        if room <= 0:
            return [], None
        return self.dispatcher.tick(time.time(), room), self.dispatcher.next_due()

    def _start(self, run: Run, lj: LoadedJob) -> None:
        if lj.spec.kind == "fanout" and not run.task:
            body = self.fanout.execute(run, lj)
        else:
            body = self.executor.execute(run, lj)
        self._track(run.id, body)

    def _track(self, run_id: int, body: Any) -> None:
        """Run ``body`` (a run's coroutine) as a live run of this runner."""
        task = asyncio.create_task(body, name=f"run-{run_id}")
        self.live[run_id] = task
        task.add_done_callback(lambda _t: self._run_done(run_id))

    def _run_done(self, run_id: int) -> None:
        task = self.live.pop(run_id, None)
        if task is not None and not task.cancelled() and task.exception() is not None:
            log.error("run %s crashed in the runner: %r; the sweep loop settles it", run_id, task.exception())
            self.lost.add(run_id)
        self._nudge()

    def _thread_ledger(self) -> Ledger:
        return self._thread_ledgers.get()

    # -- missions -----------------------------------------------------------------------
    async def _mission_loop(self) -> None:
        """The mission engine (``core.mission.engine``), woken when a run
        finishes, else every ``MISSION_IDLE_S`` seconds; coordinator turns run in a thread."""
        engine = MissionEngine(self.settings)
        while True:
            self._mission_wake.clear()
            try:
                await asyncio.to_thread(lambda: engine.step(self._thread_ledger()))
                self.failures.ok("mission pass")
            except Exception as exc:
                self.failures.failed("mission pass", exc)
            await wait_event(self._mission_wake, MISSION_IDLE_S)

    # -- heartbeat, sweep, reload -------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        busy = False
        while True:
            status = f"{len(self.live)} run(s) live, {len(self.jobs)} job(s)"
            beat_ok = False
            began = time.monotonic()
            try:
                await self.heartbeat()
                self.failures.ok("heartbeat")
                beat_ok = True
            except StorageError as exc:  # disk full, locked: one line a minute, not a traceback
                self.failures.failed("heartbeat", exc)
                status = f"heartbeat write failing: {exc}"
            except Exception as exc:
                self.failures.failed("heartbeat", exc)
                status = "heartbeat failing (see the log)"
            now = time.monotonic()
            if not beat_ok:
                self._beat_failing_since = self._beat_failing_since or began
            elif self._beat_failing_since or now - began > self.settings.heartbeat:
                # The ledger took this runner's heartbeat late (a server restart, a failover, a
                # lock): the others' went stale just the same, and may take as long again to
                # get through (a connection pool backing off), so this runner judges no other
                # runner, run or host by their heartbeats for a lease plus that long.
                out = now - (self._beat_failing_since or began)
                self.hold_judging(f"the ledger took {out:.1f}s to take this runner's heartbeat", out)
                self._beat_failing_since = 0.0
            # The loop turned, so systemd's watchdog is fed even while the ledger is unwritable:
            # a restart would not fix a full disk, and the sweep reports the stale heartbeat.
            self.service.alive(status)
            if self.deadman.url and not self._pinging:  # never blocks the beat; one ping at a time
                self._pinging = True
                ping = asyncio.create_task(asyncio.to_thread(self.deadman.ping, ok=beat_ok))
                self._bg.add(ping)

                def _pinged(t: asyncio.Task[Any]) -> None:
                    self._pinging = False
                    self._bg.discard(t)
                ping.add_done_callback(_pinged)
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

    def hold_judging(self, why: str, out_s: float = 0.0) -> None:
        """For one lease plus ``out_s`` seconds (how long this runner could not reach the
        ledger) from now, declare no other runner's run dead (the sweep), and no host down or
        runner gap (the periodic pass): this runner's view of the ledger was interrupted
        (``why``), and so were the others' heartbeats."""
        hold = self.settings.lease + out_s
        self._judge_hold_until = max(self._judge_hold_until, time.monotonic() + hold)
        if self._sweeper is not None:
            self._sweeper.hold(hold, why)
        else:
            log.warning("%s; judging no other runner for %.1fs", why, hold)

    def _periodic(self) -> None:
        try:
            self._answer_kill_requests()
            self.failures.ok("kill requests")
        except Exception as exc:
            self.failures.failed("kill requests", exc)
        try:
            supervisor.periodic(self._thread_ledger(), self.settings,
                                judge_others=time.monotonic() >= self._judge_hold_until)
            self.failures.ok("supervisor periodic pass")
        except Exception as exc:
            self.failures.failed("supervisor periodic pass", exc)

    def _answer_kill_requests(self) -> None:
        """Kill the processes of this runner's runs that an operator on another host abandoned
        (``runs.abandon_requested_at``), then confirm each in the ledger (``abandon_kill``).
        Only this runner's own runs, on this host: their pid and create time are its own."""
        store = SqlStore(self._thread_ledger())
        for run in store.kill_requests(list(self.live)):
            sig = None
            if run.pid and liveness.process_alive(run.pid, run.pid_create_time):
                with contextlib.suppress(ProcessLookupError):
                    sig = stop_group(run.pgid or os.getpgid(run.pid), grace=KILL_REQUEST_GRACE_S)
            note = (f"killed by runner {self.id} on {liveness.hostname()} ({signal_name(sig)})" if sig
                    else f"process already gone (runner {self.id} on {liveness.hostname()})")
            store.confirm_kill(run.id, actor=self.actor, note=note)
            log.warning("run %s: abandoned by %s from another host: %s", run.id, run.abandon_requested_by, note)

    async def heartbeat(self) -> None:
        """Renew this runner's heartbeat (``runners.heartbeat_at``) and the lease
        (``runs.lease_until``, Unix seconds) of every run it still watches — not of runs in
        ``lost``, nor of any run of this runner whose task is gone — in one statement for
        all of them (``core.ledger.runners.renew``).

        It is written in its own small transaction on its own connection and thread, never
        queued behind the writer's group commits: a group a PostgreSQL serialization conflict
        makes run again (whole, with backoff) must not hold the heartbeat back past the lease,
        or other hosts would take this live runner's host for down and orphan its runs."""
        watched = list(self.live)
        await asyncio.get_running_loop().run_in_executor(self._beat_pool, self._beat, watched)

    def _beat(self, watched: list[int]) -> None:
        """In the heartbeat thread: renew on that thread's own connection."""
        if self._beat_ledger is None:
            self._beat_ledger = Ledger(self.settings.ledger)
        SqlStore(self._beat_ledger).renew_leases(self.id, watched, lease_s=self.settings.lease)

    def _close_beat(self) -> None:
        """In the heartbeat thread: close its connection."""
        if self._beat_ledger is not None:
            with contextlib.suppress(StorageError):
                self._beat_ledger.close()
            self._beat_ledger = None

    async def _sweep_loop(self) -> None:
        sweeper = sweep.Sweeper(self.settings, actor=self.actor, own_runner_id=self.id)
        self._sweeper = sweeper
        if time.monotonic() < self._judge_hold_until:
            sweeper.hold(self._judge_hold_until - time.monotonic(), "holding on from before the sweep began")
        while True:
            await asyncio.sleep(self.settings.sweep_interval)
            try:
                report = await asyncio.to_thread(self._sweep_once, sweeper)
                self.failures.ok("sweep pass")
            except Exception as exc:
                self.failures.failed("sweep pass", exc)
                continue
            if self.lost:
                try:
                    lost = await asyncio.to_thread(self._settle_lost, sweeper, set(self.lost))
                    self.lost.difference_update(lost.finished)
                    report.orphaned.extend(lost.orphaned)
                except Exception:
                    log.exception("settling lost runs failed; retrying next pass")
            for run_id in report.orphaned:
                await self.executor.after_end(run_id)  # judged, breaker, and its line like any other finish
            if report.pending:  # perhaps left by another runner of this host that stopped since
                await self._reattach()
            if self.reaper.subreaper:
                try:
                    await asyncio.to_thread(self.reaper.reap_strays)
                except Exception:
                    log.exception("reaping adopted processes failed; retrying next pass")

    def _sweep_once(self, sweeper: Any) -> Any:
        return sweeper.sweep_once(self._thread_ledger())

    def _settle_lost(self, sweeper: Any, run_ids: set[int]) -> Any:
        """Settle runs in ``lost`` (their task died): kill a still-running process group,
        then ``orphaned`` with reason ``runner_error`` (an attempt; retried per policy).
        Returns ``sweep.LostReport``: ``finished`` (ids to drop from ``lost``: settled, or
        already terminal or not ours) and ``orphaned``; a failed write is retried next pass."""
        return sweeper.settle_lost(self._thread_ledger(), run_ids, runner_id=self.id)

    async def _reload_loop(self) -> None:
        try:
            await watch_specs(self.spec_dir, self._on_reload, self._stop,
                              loaded_signature=self._loaded_signature)
        except Exception:
            log.exception("spec watcher stopped; specs will not hot-reload")

    # -- shutdown -----------------------------------------------------------------------
    def _notice_started(self) -> None:
        if self.on_started is not None:
            try:
                self.on_started()
            except Exception:
                log.exception("on_started callback failed")

    def _notice(self, text: str) -> None:
        """An operator-facing line about the stop (``on_notice``, and the log)."""
        log.warning("%s", text)
        if self.on_notice is not None:
            try:
                self.on_notice(text)
            except Exception:
                log.exception("on_notice callback failed")

    def _stop_plan(self) -> str:
        """What this stop does with the runs still going, in words."""
        n, grace = len(self.live), self.settings.shutdown_grace
        if not n:
            return "no run in flight"
        if self.stop_mode == "drain":
            return (f"waiting up to {grace:g}s for {n} running job(s) to finish; Ctrl-C again to stop waiting"
                    " (they keep running and the next runner re-attaches them)")
        if self.stop_mode == "kill":
            return f"ending {n} running job(s): SIGTERM now, SIGKILL after {grace:g}s; Ctrl-C again to SIGKILL now"
        return f"{n} running job(s) keep running under their monitors; the next runner re-attaches them"

    async def _wait_live(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the live runs to end, or a second SIGINT."""
        if not self.live:
            return
        hurry = asyncio.create_task(self._hurry.wait())
        try:
            await asyncio.wait([*self.live.values(), hurry], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            while self.live and not self._hurry.is_set():
                left = timeout - (time.monotonic() - self._stop_began)
                if left <= 0:
                    break
                await asyncio.wait([*self.live.values(), hurry], timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hurry.cancel()

    async def _kill_live(self) -> None:
        """``--kill``: end every live run's process group (SIGTERM, SIGKILL after
        ``shutdown_grace``); each is recorded as abandoned (reason ``interrupted``) by its own
        task, which is waited for briefly."""
        ids = sorted(self.live)
        pids = await self.loop_store.process_groups(ids)
        pids.update(self.fanout.synthesizing)  # a fan-out parent's process is its synthesize
        why = f"runner {self.id} stopped with --kill ({self.stop_reason})"
        for run_id in ids:
            self._killing[run_id] = why
            signal_group(pids.get(run_id), signal.SIGTERM)
        self.executor.ctx.changes.notify()  # a fan-out parent (no process) ends on this
        await self._wait_live(self.settings.shutdown_grace)
        for run_id in list(self.live):
            signal_group(pids.get(run_id), signal.SIGKILL)
        self._hurry.clear()
        self._stop_began = time.monotonic()
        await self._wait_live(KILL_RECORD_S)

    # -- shutdown -----------------------------------------------------------------------
    async def _shutdown(self) -> None:
        """Stop spawning; then, by ``stop_mode``, leave the live runs to their monitors, wait
        for them, or end them; record what is left; close the threads and connections this
        runner opened. The heartbeat goes on until the stop is recorded."""
        self._stop_began = time.monotonic()
        # A run being started finishes starting first (its pid recorded), so it is left to
        # its monitor and re-attached, never cut off with its job running unrecorded. A run
        # task the last dispatch tick created has not run yet: one turn of the loop lets it
        # say it is starting.
        await asyncio.sleep(0)
        if not await self.executor.starts_done(START_WAIT_S):
            log.warning("run(s) %s still starting at the stop; left to the sweep", sorted(self.executor.starting))
        self._spawn_pool.shutdown(wait=False)  # nothing is started after this point
        if self.live and self.stop_mode == "drain":
            await self._wait_live(self.settings.shutdown_grace)
        elif self.live and self.stop_mode == "kill":
            await self._kill_live()
        left = sorted(self.live)
        # From here on the stop needs the ledger (the last heartbeat, the stop record). One
        # that does not answer (PostgreSQL down) must not hold the stop forever: after
        # STOP_LEDGER_WAIT_S, or at a further signal, every ledger of this runner stops
        # retrying and the stop ends, saying what it could not record.
        self._hurry.clear()
        give_up = asyncio.get_running_loop().call_later(max(STOP_LEDGER_WAIT_S, self.settings.shutdown_grace),
                                                         self._give_up_ledgers)
        hurried = asyncio.create_task(self._hurry.wait())
        hurried.add_done_callback(lambda task: None if task.cancelled() else self._give_up_ledgers())
        try:
            await self._record_stop(left)
        finally:
            give_up.cancel()
            hurried.cancel()

    def _give_up_ledgers(self) -> None:
        """Every ledger this runner opened stops retrying (``Ledger.give_up``)."""
        for led in (self.writer.ledger, self.ledger, self._beat_ledger):
            if led is not None:
                led.give_up()
        self._thread_ledgers.give_up()

    async def _record_stop(self, left: list[int]) -> None:
        """The ledger part of a stop: the heartbeat ends, the stop is recorded with the runs
        ``left`` running, and the threads and connections close."""
        for t in list(self.live.values()):
            t.cancel()  # the job goes on under its monitor
        await asyncio.gather(*self.live.values(), return_exceptions=True)
        self._heartbeat_task.cancel()
        await asyncio.gather(self._heartbeat_task, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.get_running_loop().run_in_executor(self._beat_pool, self._close_beat)
        await asyncio.to_thread(self._beat_pool.shutdown, True)
        if self._bg:  # together, not one after another: n of them took up to 5 s each
            await asyncio.wait(list(self._bg), timeout=5)
        try:
            self.left_behind = await self.loop_store.record_stopped(
                self.id, actor=self.actor, left_running=left, reason=self.stop_reason, detail=self._stop_detail)
        except StorageError as exc:
            self.unrecorded_left = left
            self._notice(f"the ledger {self.writer.ledger.name} did not answer ({exc}): this stop is not recorded;"
                         f" the next runner, or another host's sweep, finds this runner gone"
                         + (f" and its run(s) {', '.join(map(str, left))} with it" if left else ""))
        # Settles still verifying get a moment to record; then the writer commits what is
        # queued and stops (a later write fails loudly with WriterClosed, never silently).
        self._settle_pool.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.to_thread(self._settle_pool.shutdown, True),
                                   timeout=self.settings.shutdown_grace + 5)
        self.watchdog.stop()
        self.writer.close()
        self.ledger.close()
        # Not every thread's: one a cancelled task left reading must not lose its connection
        # mid-statement (sqlite3 crashes the process); those close when their thread ends.
        self._thread_ledgers.close()
