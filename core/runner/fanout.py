"""The runner side of a fan-out (``kind = "fanout"``): the parent run queues one sub-task run
per task, waits until every one has settled (all-settled, never fail-fast), runs
``synthesize`` with every result as JSON on stdin, and records the parent's outcome.
What the ledger knows about fan-outs (children, results, the parent's status) is
``core.ledger.fanout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from core import liveness, monitor
from core.ledger import fanout
from core.ledger.lifecycle import State
from core.ledger.records import Run
from core.processes import create_time, signal_group
from core.runner import changes, spawn
from core.runner.capture import Capture
from core.runner.executor import DRAIN_AFTER_EXIT_S, Executor, LedgerGaveUp, pump, until_ledger_answers
from core.spec.loader import LoadedJob, resolve_cwd
from core.spec.model import JobSpec
from core.vocabulary import EndReason

log = logging.getLogger(__name__)

#: Longest a parent waits between two looks at its sub-tasks, seconds: a safety bound only.
#: It looks again when a run of this runner ends or anything commits to the ledger
#: (``Context.changes``); this bound covers a wake-up feed that is down.
SAFETY_S = 30.0


#: How long a resumed parent past its deadline waits between two looks while a sub-task that
#: ended in time is being recorded, seconds (a record wakes it sooner).
RECORD_WAIT_S = 1.0
#: The file in a parent's artifacts folder holding ``<pid> <create time>`` of its running
#: ``synthesize``.
SYNTH_PID = "synthesize.pid"


def _ended_in_time(store: Any, results: list[dict[str, Any]], deadline: float) -> bool:
    """Whether a sub-task the ledger does not show settled had in fact ended by ``deadline``
    (Unix s): its outcome is recorded and its verdict not yet (``verifying``), or its monitor
    on this host wrote its exit status while no runner was up (its re-attach is recording
    it); also True when a sub-task moved since ``results`` was read (the caller looks again).
    ``results``: ``Store.subtask_results``; reads ``runs`` and the sub-tasks' folders."""
    for r in results:
        child_id = r.get("run_id")
        if r.get("settled") or not child_id:
            continue
        child = store.run(child_id)
        if child is None:
            continue
        if child.state != r.get("state"):
            return True  # it moved since ``results`` was read: look again rather than judge a stale look
        if child.state == State.VERIFYING and (child.ended_at or 0.0) <= deadline:
            return True
        if child.state == State.RUNNING and child.artifacts_dir:
            art = Path(child.artifacts_dir)
            ended = monitor.exit_time(art)
            if ended is not None and ended <= deadline and monitor.exit_status(art) is not None:
                return True
    return False


def _last_end(store: Any, results: list[dict[str, Any]]) -> float | None:
    """When the last of the settled sub-tasks ended (``runs.ended_at``, Unix s), None when
    none recorded an end."""
    ends = [child.ended_at for r in results if (child_id := r.get("run_id"))
            and (child := store.run(child_id)) is not None and child.ended_at is not None]
    return max(ends) if ends else None


def _ended_late(store: Any, results: list[dict[str, Any]], deadline: float) -> set[str]:
    """The tasks whose last attempt ended after ``deadline`` (Unix s; ``runs.ended_at``)."""
    late = set()
    for r in results:
        child_id = r.get("run_id")
        child = store.run(child_id) if child_id else None
        if child is not None and child.ended_at is not None and child.ended_at > deadline:
            late.add(str(r.get("task")))
    return late


async def _end_cut_off_synthesize(art: Path) -> None:
    """Kill (SIGKILL, its whole process group) a ``synthesize`` of this parent that a runner
    crash left running (``art/synthesize.pid`` names it, pid and create time, so a reused pid
    is never hit), and wait up to ``DRAIN_AFTER_EXIT_S`` for it to be gone."""
    try:
        pid_s, created_s = (art / SYNTH_PID).read_text().split()[:2]
        pid, created = int(pid_s), float(created_s)
    except (OSError, ValueError):
        return
    if not created or not liveness.process_alive(pid, created):
        return  # gone, or its identity unknown (no create time): a reused pid is never signalled
    log.warning("%s: the synthesize a runner crash cut off (pid %d) still runs: killed, to be run again",
                art, pid)
    signal_group(pid, signal.SIGKILL)
    give_up = time.monotonic() + DRAIN_AFTER_EXIT_S
    while liveness.process_alive(pid, created) and time.monotonic() < give_up:
        await asyncio.sleep(0.05)


class FanoutParent:
    """Executes fan-out parent runs with ``executor``'s context and after-end path."""

    def __init__(self, executor: Executor) -> None:
        self.ex = executor
        self.ctx = executor.ctx
        #: ``{parent run id: pid}`` of each ``synthesize`` running now (the leader of its own
        #: process group): what ``run --kill`` signals for a parent, which has no process.
        self.synthesizing: dict[int, int] = {}

    async def execute(self, run: Run, lj: LoadedJob) -> None:
        """Parent of a fan-out: queue every sub-task, wait until all settled, synthesize."""
        ctx, spec = self.ctx, lj.spec
        run_id, attempt = run.id, run.attempt
        art = ctx.settings.artifacts_dir / str(run_id)
        with contextlib.suppress(OSError):
            art.mkdir(parents=True, exist_ok=True, mode=0o700)
        started = time.time()
        fields = {"started_at": started, "lease_until": started + ctx.settings.lease, "artifacts_dir": str(art)}
        if not await ctx.loop_store.start_run(run_id, attempt, actor=ctx.actor, fields=fields,
                                              detail={"fanout": [t.name for t in spec.tasks]}):
            return
        await self._wait_and_synthesize(run, lj, started, art)

    async def resume(self, run: Run, lj: LoadedJob) -> None:
        """Take up a running fan-out parent an earlier runner of this host left (a clean stop,
        a crash, an upgrade: ``core.runner.reattach``), already re-attached to this runner:
        queue whatever sub-tasks the stop came before (idempotent), wait for them all from
        where the stop left off (the timeout still counts from the parent's ``started_at``),
        and synthesize. A synthesize the stop cut off runs again from the start. A parent
        whose job is no longer a fan-out is ended ``orphaned`` (reason ``interrupted``), its
        queued sub-tasks abandoned in the same transaction."""
        ctx = self.ctx
        art = Path(run.artifacts_dir) if run.artifacts_dir else ctx.settings.artifacts_dir / str(run.id)
        await _end_cut_off_synthesize(art)  # a crash's leftover, whatever happens to the parent now
        if lj.spec.kind != "fanout":
            reason = f"job {lj.spec.name} is no longer a fan-out, so the runner that took it over ended it"
            if await ctx.loop_store.finish(run.id, run.attempt, State.RUNNING, State.ORPHANED, actor=ctx.actor,
                                           reason_code=EndReason.INTERRUPTED, reason=reason, spec=lj.spec):
                await self.ex.after_end(run.id)
            return
        await self._wait_and_synthesize(run, lj, float(run.started_at or time.time()), art)

    async def _wait_and_synthesize(self, run: Run, lj: LoadedJob, started: float, art: Path) -> None:
        """Queue the sub-tasks (idempotent), wait until every one settled, synthesize into
        ``art`` (the parent's artifacts folder), record the parent's outcome."""
        ctx, spec = self.ctx, lj.spec
        run_id, attempt = run.id, run.attempt
        await ctx.loop_store.create_subtasks(run, spec, actor=ctx.actor)
        ctx.wake()
        deadline = started + spec.timeout
        work_end: float | None = None  # when the last sub-task ended (runs.ended_at, Unix s)

        def look() -> tuple[bool, list[dict[str, Any]], set[str], str | None, bool]:
            """(settled, results, tasks that ended late, the parent's state, whether an
            unsettled sub-task had in fact ended in time), in one look at the ledger."""
            nonlocal work_end
            store = ctx.store()
            settled, results = store.subtask_results(run_id, spec)
            if settled:
                work_end = _last_end(store, results)
                return True, results, _ended_late(store, results, deadline), None, False
            state = store.run_state(run_id)
            in_time = (time.time() > deadline and state == State.RUNNING
                       and _ended_in_time(store, results, deadline))
            return False, results, set(), state, in_time

        with ctx.changes.subscribe() as changed:
            while True:
                changed.clear()  # before the look: a change after it still wakes the wait
                stopped_by = ctx.stopped_by(run_id) if ctx.stopped_by is not None else None
                if stopped_by is not None:
                    await self._abandoned(run, spec, stopped_by)
                    return
                try:
                    # In a thread, waited out while the ledger is out of reach: a PostgreSQL
                    # outage blocked the whole runner here, then crashed the parent's task
                    # (orphaned, a false critical page) with its sub-tasks all succeeded.
                    settled, results, late, state, in_time = await asyncio.to_thread(
                        lambda: until_ledger_answers(ctx.thread_ledger(), lambda _led: look(),
                                                     f"fan-out parent {run_id}"))
                except LedgerGaveUp:
                    return  # the runner is stopping: the parent stays running for the next one
                if settled:
                    if late:
                        # Settled only after the deadline (they ended while no runner was up to
                        # time the parent out): timed out, as a runner that stayed up says.
                        await self._timed_out(run, spec, [{**r, "settled": r.get("task") not in late}
                                                          for r in results])
                        return
                    break
                if state != State.RUNNING:
                    return  # abandoned or orphaned meanwhile: its children settle on their own
                now = time.time()
                if now > deadline:
                    if in_time:
                        # A resumed parent: what ended while no runner was up is being recorded
                        # now (re-attach); the deadline holds for when sub-tasks ended.
                        await changes.wait(changed, RECORD_WAIT_S)
                        continue
                    await self._timed_out(run, spec, results)
                    return
                await changes.wait(changed, min(SAFETY_S, deadline - now + 0.01))
        out = Capture(art / "stdout.log", ctx.settings.output_cap)
        err = Capture(art / "stderr.log", ctx.settings.output_cap)
        synth_ok: bool | None = None
        synth_rc: int | None = None
        synth_s = 0.0
        if spec.synthesize is not None:
            remaining = max(5.0, deadline - time.time())
            synth_began = time.monotonic()
            synth_rc = await self._synthesize(spec, lj, run, fanout.synthesis_input(spec.name, run_id, results),
                                              out, err, remaining, art)
            synth_ok = synth_rc == 0
            synth_s = time.monotonic() - synth_began
            stopped_by = ctx.stopped_by(run_id) if ctx.stopped_by is not None else None
            if stopped_by is not None:  # ``run --kill`` ended it: the operator's stop, not its result
                out.close()
                err.close()
                await self._abandoned(run, spec, stopped_by)
                return
        out.close()
        err.close()
        exit_code, handoff = fanout.parent_outcome(spec, results, synth_ok)
        handoff["result"] = {**(handoff.get("result") or {}), "tasks": [
            {k: r.get(k) for k in ("task", "state", "attempts", "run_id", "exit_code", "signal", "reason")}
            for r in results]}
        if synth_rc is not None:
            handoff["result"]["synthesize_exit_code"] = synth_rc
        ended = time.time()
        # The work's time: until the last sub-task ended, plus the synthesize. Not until this
        # runner saw it: a parent resumed after a restart, or one that waited out a ledger
        # outage, would otherwise count the runner's absence and be judged slow.
        took = (work_end - started + synth_s) if work_end is not None else ended - started
        cols: dict[str, Any] = {
            "exit_code": exit_code, "signal": None, "duration_s": max(0.0, min(took, ended - started)),
            "output_truncated": int(out.truncated or err.truncated), **out.summary("stdout"), **err.summary("stderr"),
            "handoff_raw": json.dumps(handoff), "handoff": handoff, "handoff_findings": [],
        }

        verifying = ctx.loop_store.enter_verifying(
            run_id, attempt, actor=ctx.actor, fields={"exit_code": exit_code, "ended_at": ended},
            outcome={"status": handoff["status"], **cols},
            detail={"succeeded": handoff["result"].get("succeeded"), "missing": handoff["result"].get("missing")})
        if not await ctx.loop_store.wait(verifying):
            await self.ex.late_result(run, exit_code, "running")
            return
        await self.ex.settle(run_id)

    async def _abandoned(self, run: Run, spec: JobSpec, stopped_by: str) -> None:
        """``run --kill``: the parent ends as its running sub-tasks do (abandoned, reason
        ``interrupted``, never judged as the job's own failure), its queued ones abandoned
        with it in the same transaction; no ``synthesize`` runs after the stop."""
        ctx = self.ctx
        outcome = {"status": "abandoned", "reason": "interrupted", "handoff_findings": []}
        if await ctx.loop_store.finish(
                run.id, run.attempt, State.RUNNING, State.ABANDONED, actor=ctx.actor,
                reason_code=EndReason.OPERATOR, reason="interrupted", fields={"ended_at": time.time()},
                outcome=outcome, spec=spec, detail={"by": stopped_by}):
            await self.ex.after_end(run.id)

    async def _timed_out(self, run: Run, spec: JobSpec, results: list[dict[str, Any]]) -> None:
        ctx = self.ctx
        pending = [r.get("task") for r in results if not r.get("settled")]  # JSON documents
        outcome = {"status": "timed_out", "handoff_findings": [],
                   "handoff": {"status": "failed", "error": "timeout", "result": {"unsettled": pending}}}
        if await ctx.loop_store.finish(
                run.id, run.attempt, State.RUNNING, State.TIMED_OUT, actor=ctx.actor,
                reason_code=EndReason.FANOUT_UNSETTLED, reason=f"fan-out not settled within {spec.timeout:g}s",
                detail={"unsettled": pending}, outcome=outcome, spec=spec):
            await self.ex.after_end(run.id)

    async def _synthesize(self, spec: JobSpec, lj: LoadedJob, run: Run, payload: bytes,
                          out: Capture, err: Capture, timeout: float, art: Path) -> int:
        """Run ``synthesize`` with every sub-task result as JSON on stdin; returns its exit
        code (-1 when it could not start, 124 on timeout). Its pid is kept in
        ``art/synthesize.pid`` while it runs, so that the runner resuming this parent after a
        crash ends the one the crash cut off before starting it again."""
        await _end_cut_off_synthesize(art)
        env = self.ex.env_for(spec, run, self.ctx.settings.artifacts_dir / str(run.id) / "handoff.json")
        try:
            proc = await spawn.start(spec.argv(spec.synthesize), cwd=resolve_cwd(lj), env=env, stdin_pipe=True)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            err.feed(f"synthesize could not start: {exc}\n".encode())
            return -1
        pid_file = art / SYNTH_PID
        with contextlib.suppress(OSError):
            pid_file.write_text(f"{proc.pid} {create_time(proc.pid) or 0}\n")
        self.synthesizing[run.id] = proc.pid
        try:
            return await self._follow_synthesize(proc, payload, out, err, timeout, spec.grace)
        except asyncio.CancelledError:
            # The runner is stopping: it has no monitor to follow this by, and the runner that
            # resumes the parent runs it again from the start, so none is left half-done.
            signal_group(proc.pid, signal.SIGKILL)
            raise
        finally:
            self.synthesizing.pop(run.id, None)
            with contextlib.suppress(OSError):
                pid_file.unlink()

    async def _follow_synthesize(self, proc: spawn.Child, payload: bytes, out: Capture, err: Capture,
                                 timeout: float, grace: float) -> int:
        readers = [asyncio.create_task(pump(proc.stdout, out)), asyncio.create_task(pump(proc.stderr, err))]
        try:
            assert proc.stdin is not None
            proc.stdin.write(payload)
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with contextlib.suppress(Exception):
                proc.stdin.close()  # type: ignore[union-attr]
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=timeout)
        except TimeoutError:
            await self.ex.terminate(proc, grace)
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
