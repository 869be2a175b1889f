"""``LoopStore``: the store's writes for a runner's event loop.

The runner's loop must never wait on the ledger (a lock held by another process would stall
every run's output and deadline). Its writes go to the runner's writer thread
(``core.ledger.writer``), which commits them in groups; each operation here is one
transaction in the writer's next group commit, awaited without blocking the loop (or, for
``enter_verifying``, queued now and awaited by whoever needs the answer). The statements are
the same ones ``SqlStore`` composes, so both backends serve it.

Every operation is compare-and-set where it moves a run, with its audit event in the same
transaction, and passes typed records (``core.ledger.records``), never rows. Times are Unix
epoch seconds (UTC). Errors: ``core.ledger.connection.StorageError`` when the write failed
(disk full, ledger unreachable; locks are waited out); ``WriterClosed`` after ``close``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any, cast

from core.ledger import adoption, fanout, lifecycle, outcomes, queue, runners, runs, terminal
from core.ledger.connection import Conn
from core.ledger.lifecycle import State
from core.ledger.records import Run
from core.ledger.store import RetryRule
from core.ledger.writer import Writer
from core.spec.model import JobSpec
from core.vocabulary import EndReason


class LoopStore:
    """Writes of one runner's loop through ``writer``.

    Args:
        writer: the runner's writer thread.
        retry: the retry policy applied when a run ends failed (``finish``).
    """

    def __init__(self, writer: Writer, *, retry: RetryRule) -> None:
        self.writer = writer
        self.retry = retry

    async def start_run(self, run_id: int, attempt: int, *, actor: str, fields: Mapping[str, Any],
                        detail: dict[str, Any] | None = None) -> bool:
        """``spawned → running`` compare-and-set on (state, attempt), setting ``fields``
        (``runs`` columns: pid, pgid, pid_create_time, started_at, lease_until, artifacts_dir),
        with its event. False: someone settled the run meanwhile (nothing written)."""
        return bool(await self.writer.run(lambda conn: lifecycle.apply(
            conn, run_id, attempt, State.SPAWNED, State.RUNNING, actor=actor, fields=fields, detail=detail)))

    async def finish(self, run_id: int, attempt: int, from_state: str, to_state: str, *, actor: str,
                     reason_code: EndReason, reason: str | None = None, fields: Mapping[str, Any] | None = None,
                     detail: dict[str, Any] | None = None, outcome: Mapping[str, Any] | None = None,
                     spec: JobSpec | None = None) -> bool:
        """End a run (``Store.finish_run``: the terminal move, its outcome, the fan-out parent's
        queued sub-tasks, the retry decision and maybe the next attempt) in one transaction.
        Returns whether the move won."""
        return bool(await self.writer.run(lambda conn: terminal.finish(
            conn, run_id, attempt, from_state, to_state, actor=actor, reason_code=reason_code, reason=reason,
            fields=fields, detail=detail, outcome=outcome, spec=spec, retry=self.retry)))

    def enter_verifying(self, run_id: int, attempt: int, *, actor: str, fields: Mapping[str, Any],
                        outcome: Mapping[str, Any], detail: dict[str, Any] | None = None) -> Future[bool]:
        """Queue ``running → verifying`` (compare-and-set, setting ``fields``: exit_code,
        signal, ended_at) with the run's outcome (``outcome``: ``job_outcomes`` columns,
        ``status`` included) to the writer now, so a shutdown still commits it. The future
        says whether the move won (its error, if the write failed)."""
        def tx(conn: Conn) -> bool:
            if not lifecycle.apply(conn, run_id, attempt, State.RUNNING, State.VERIFYING, actor=actor,
                                   fields=fields, detail=detail):
                return False
            outcomes.record(conn, run_id, state=State.VERIFYING.value, **outcome)
            return True
        return self.writer.submit(tx)

    async def record_late_result(self, run: Run, *, actor: str, exit_code: int | None, signal: int | None,
                                 expected: str, evidence: Mapping[str, Any] | None = None) -> str:
        """The run's process ended after someone else settled it: a ``late_result`` event
        (never a state change) and the output its capture counted (``evidence``). Returns the
        run's state now ("missing" when the row is gone)."""
        return str(await self.writer.run(lambda conn: queue.record_late_result(
            conn, run, actor=actor, exit_code=exit_code, signal=signal, expected=expected,
            evidence=dict(evidence) if evidence else None)))

    async def create_subtasks(self, parent: Run, spec: JobSpec, *, actor: str) -> list[int]:
        """Queue attempt 1 of every sub-task of fan-out ``spec`` under ``parent``; idempotent
        (a restart never duplicates them). Returns the new run ids."""
        return list(await self.writer.run(lambda conn: fanout.create_children(conn, parent, spec, actor=actor)))

    async def renew_lease(self, run_id: int, *, lease_s: float) -> bool:
        """Lease run ``run_id`` for ``lease_s`` more seconds while it is spawned, running or
        verifying (``watchkeeper exec``'s heartbeat). False once it is no longer live."""
        return bool(await self.writer.run(lambda conn: adoption.renew_lease(conn, run_id, time.time() + lease_s)))

    async def process_groups(self, run_ids: Sequence[int]) -> dict[int, int]:
        """``{run id: pid of its monitor}`` (the leader of its process group) for those of
        ``run_ids`` that have one."""
        ids = list(run_ids)

        def read(conn: Conn) -> dict[int, int]:
            out = {}
            for i in ids:
                got = runs.get(conn, i, "pid")
                if got is not None and got["pid"]:
                    out[i] = int(got["pid"])
            return out
        return dict(await self.writer.run(read))

    async def record_stopped(self, runner_id: str, *, actor: str, left_running: list[int], reason: str,
                             detail: dict[str, Any] | None = None) -> list[Run]:
        """Mark the runner stopped (``runners.stopped_at``/``stop_reason``) with its
        ``runner_stopped`` event naming the runs it left running. Returns those runs (by id)."""
        def tx(conn: Conn) -> list[Run]:
            runners.record_stopped(conn, runner_id, actor=actor, left_running=left_running, reason=reason,
                                   detail=detail)
            return [Run.from_row(r) for r in runs.in_ids(conn, left_running)]
        return list(await self.writer.run(tx))

    async def reattach_run(self, run: Run, *, runner_id: str, lease_s: float, reason: str) -> bool:
        """Take over live ``run`` an earlier runner of this host left (compare-and-set on its
        state, attempt and previous runner), renewing its lease, with a ``reattached`` event
        saying ``reason``. False: another starting runner took it first."""
        return bool(await self.writer.run(lambda conn: runners.reattach_run(
            conn, run, runner_id=runner_id, lease_s=lease_s, reason=reason)))

    async def wait(self, pending: Future[bool]) -> bool:
        """Await a write queued with ``enter_verifying`` on the loop."""
        return bool(await asyncio.wrap_future(cast("Future[object]", pending)))
