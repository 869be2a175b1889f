"""``watchkeeper exec``: one command run as a recorded run, without a runner (cron adoption).

The run goes ``queued → spawned → running → verifying → terminal`` through the runner's own
``Executor`` (same spawn, process group, output capture, handoff environment, watchdog
timeout, supervisor verification and judgement, escalations), so an exec'd run is told apart
from a runner's only by its trigger (``exec``) and its missing ``runner_id``. The wrapper
renews the run's lease every heartbeat; if the wrapper is killed the lease runs out and the
sweep settles the run (and kills the job if it still runs on this host). Retries the job's
policy queues are run here too, after their backoff. Due notifications are delivered before
the wrapper exits, since no runner may be there to do it.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from core import liveness
from core.ledger.connection import Ledger
from core.ledger.loop_store import LoopStore
from core.ledger.records import Run
from core.ledger.sql_store import SqlStore
from core.ledger.thread_ledgers import ThreadLedgers
from core.ledger.writer import Writer, WriterLedger
from core.processes import signal_group
from core.runner.executor import Context, Executor
from core.runner.watchdog import Watchdog
from core.spec.loader import LoadedJob
from core.spec.model import JobSpec
from core.spec.settings import Settings
from core.supervisor import notify
from core.vocabulary import EndReason, RunState

log = logging.getLogger(__name__)

#: Longest time spent delivering due notifications before the wrapper exits, seconds.
DELIVERY_BUDGET_S = 10.0
#: Longest a signal waits for a starting job's pid before it is passed on, seconds (a start
#: takes milliseconds; a ledger another process holds locked can delay its record).
FORWARD_WAIT_S = 30.0


@dataclass
class ExecResult:
    """How the wrapped command ended: the last attempt's run id, state and exit status."""

    run_id: int
    state: str
    exit_status: int          # what ``watchkeeper exec`` exits with
    attempts: int
    reason: str | None
    stderr_tail: str | None
    #: The last attempt's artifacts folder (``runs.artifacts_dir``): its ``stdout.log`` and
    #: ``stderr.log`` hold the kept output. None when the run never got one.
    artifacts_dir: str | None = None


def exit_status(end: Run | None) -> int:
    """The command's own exit code of the ended run ``end``; 128 + N for death by signal N (as
    a shell reports it); 127 when it could not start; 1 for any other end without an exit code
    (orphaned, abandoned, or no run at all). A run that exited 0 but failed verification exits
    1: the cron line failed."""
    if end is None:
        return 1
    if end.exit_code is not None:
        if end.exit_code == 0 and end.state != RunState.SUCCEEDED:
            return 1
        return int(end.exit_code)
    if end.signal is not None:
        return 128 + int(end.signal)
    if end.reason_code == EndReason.SPAWN_FAILED:
        return 127
    return 1


class ExecWrapper:
    """Runs ``job`` (its ``spec`` carrying the command) once, plus the retries its policy
    queues, against the ledger in ``settings``.

    Args:
        job: the job as run: its spec (with the command to run) and where it came from
            (``source`` decides a relative ``cwd``).
        settings: ledger path, lease and heartbeat seconds, sinks, artifacts folder.
        record: the ``jobs`` row to write first, as ``(spec, source)`` (source None for a job
            ``exec`` owns itself); None leaves the row alone (a job a spec file owns).
    """

    def __init__(self, job: LoadedJob, settings: Settings, *,
                 record: tuple[JobSpec, str | None] | None) -> None:
        self.job = job
        self.settings = settings
        self.record = record
        self.id = f"exec:{liveness.hostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.actor = f"exec:{os.getpid()}"
        self._thread_ledgers: ThreadLedgers | None = None
        self._writer: Writer | None = None
        self._signalled: int | None = None
        self._forwarding: set[asyncio.Task[None]] = set()  # signals waiting for a starting job's pid
        #: Set once the wrapped command is being started: from then on it is not run again
        #: unrecorded if the ledger fails (``watchkeeper exec`` fails open only before).
        self.command_started = False

    def _thread_ledger(self) -> Ledger:
        assert self._thread_ledgers is not None
        return self._thread_ledgers.get()

    async def run(self, *, install_signal_handlers: bool = True) -> ExecResult:
        """Run to the end; see the module docstring. A SIGTERM/SIGINT to the wrapper is passed
        on to the job's process group, and the run is recorded as it then ends."""
        settings = self.settings
        with contextlib.suppress(OSError):
            settings.artifacts_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._writer = writer = Writer(settings.ledger)  # every write, as in the runner: one thread
        self._thread_ledgers = ThreadLedgers(writer)
        ledger = WriterLedger(writer)
        watchdog = Watchdog()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="exec-settle")
        ctx = Context(settings=settings, runner_id=self.id, actor=self.actor, writer=writer, ledger=ledger,
                      thread_ledger=self._thread_ledger, watchdog=watchdog, settle_pool=pool,
                      spawn_pool=pool,
                      jobs=lambda: {self.job.spec.name: self.job}, wake=lambda: None,
                      stopped_by=self._stopped_by)
        executor = Executor(ctx)
        store = SqlStore(ledger)
        loop = asyncio.get_running_loop()
        current: list[Run] = []  # the attempt running now, for a forwarded signal
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self._forward, sig, store, current)
        try:
            spec = self.job.spec
            if self.record is not None:
                store.adopt_job(self.record[0], source=self.record[1], line=self.job.line, actor=self.actor)
            here = {"host": liveness.hostname(), "boot_id": liveness.boot_id()}  # a fleet sweeps it by its host
            run = store.start_adopted_run(spec, actor=self.actor, lease_s=settings.lease, **here)
            attempts = 0
            while True:
                attempts += 1
                current[:] = [run]
                renew = asyncio.create_task(self._renew(ctx.loop_store, run.id))
                self.command_started = True
                try:
                    await executor.execute(run, self.job)
                finally:
                    renew.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await renew
                retry = store.queued_retry(run.lineage, run.attempt)
                if retry is None or self._signalled is not None:
                    break
                await asyncio.sleep(max(0.0, retry.not_before - time.time()))
                try:
                    run = store.claim_adopted_retry(retry, actor=self.actor, lease_s=settings.lease, **here)
                except LookupError:
                    break  # a runner (or an operator) took it: it is theirs now
            end, outcome = store.run(run.id), store.outcome(run.id)
            await asyncio.to_thread(self._deliver)
            stderr = (outcome.stderr_tail or outcome.stderr_head) if outcome is not None else None
            return ExecResult(run.id, end.state if end is not None else "missing", exit_status(end), attempts,
                              end.reason if end is not None else None, stderr,
                              end.artifacts_dir if end is not None else None)
        finally:
            if install_signal_handlers and threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGINT, signal.SIGTERM):
                    with contextlib.suppress(Exception):
                        loop.remove_signal_handler(sig)
            watchdog.stop()
            pool.shutdown(wait=True)
            self._thread_ledgers.close()  # a thread still reading keeps its connection (ThreadLedgers)
            ledger.close()
            writer.close()

    def _stopped_by(self, run_id: int) -> str | None:
        """Why the run was ended by whoever runs the wrapper (Ctrl-C, SIGTERM), or None."""
        if self._signalled is None:
            return None
        return f"watchkeeper exec received {signal.Signals(self._signalled).name}"

    async def _renew(self, loop_store: LoopStore, run_id: int) -> None:
        """Renew the run's lease every heartbeat through the writer thread: a ledger another
        process holds locked never stalls this loop (and the job's output)."""
        while True:
            await asyncio.sleep(self.settings.heartbeat)
            try:
                await loop_store.renew_lease(run_id, lease_s=self.settings.lease)
            except Exception as exc:  # a locked or full disk: the next beat retries, the lease has slack
                log.warning("lease renewal of run %s failed (%s); retrying next beat", run_id, exc)

    def _forward(self, sig: int, store: SqlStore, current: list[Run]) -> None:
        self._signalled = sig
        now = store.run(current[0].id) if current else None
        if now is not None and now.pid:
            signal_group(now.pid, sig)
        elif now is not None and now.state in (RunState.QUEUED, RunState.SPAWNED):
            # Still starting: its pid is not recorded yet. Passed on once it is, or the job
            # would run to its end unasked while the run is recorded as interrupted.
            task = asyncio.get_running_loop().create_task(self._forward_once_started(sig, store, now.id))
            self._forwarding.add(task)
            task.add_done_callback(self._forwarding.discard)

    async def _forward_once_started(self, sig: int, store: SqlStore, run_id: int) -> None:
        """Signal ``run_id``'s process group with ``sig`` as soon as its pid is recorded
        (``runs.pid``, polled every 20 ms, at most ``FORWARD_WAIT_S`` seconds); nothing when it
        ended without one (the start failed)."""
        deadline = time.monotonic() + FORWARD_WAIT_S
        while time.monotonic() < deadline:
            run = store.run(run_id)
            if run is None or (run.pid is None and run.state not in (RunState.QUEUED, RunState.SPAWNED)):
                return
            if run.pid:
                signal_group(run.pid, sig)
                return
            await asyncio.sleep(0.02)

    def _deliver(self) -> None:
        sinks = list(self.settings.notify)
        if not sinks:
            return
        led = self._thread_ledger()
        started = time.monotonic()
        try:
            while time.monotonic() - started < DELIVERY_BUDGET_S:
                left = DELIVERY_BUDGET_S - (time.monotonic() - started)
                stats = notify.deliver_due(led, sinks, budget_s=left)
                if not (stats.sent or stats.retried or stats.failed):
                    break
                if stats.retried and not stats.sent:
                    break  # a sink is down: its rows stay pending for the sweep or a runner
        except Exception:
            log.exception("notification delivery failed; the rows stay pending")


