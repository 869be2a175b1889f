"""The dispatcher: claims due queued runs for this runner, within the concurrency limits.

A claim is the compare-and-set move ``queued → spawned`` (with ``runner_id``, ``spawned_at``
and a first lease); losing it means another runner claimed the run. Limits: the runner's
global ``concurrency`` (``room``), a job's ``concurrency`` over its own runs, and a fan-out
job's ``concurrency`` over the sub-tasks of one parent.

``tick(now, room)`` is synchronous and takes the time as an argument, so unit tests drive
it with a fake clock; the runner starts an executor task for every run it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from core.ledger.lifecycle import TERMINAL
from core.ledger.records import Run
from core.ledger.store import Store
from core.spec.loader import LoadedJob

#: Queued rows read per free slot: rows of jobs at their own limit are skipped, so read a
#: few more than there is room for.
READ_AHEAD = 4


@dataclass
class Claimed:
    """A run this runner now owns (``spawned``, as it was claimed), and its job."""

    run: Run
    job: LoadedJob


class Dispatcher:
    """Claims queued runs of ``jobs`` whose ``not_before`` has passed.

    Args:
        store: gives the calling thread's store (``core.ledger.store.Store``; a tick runs in
            a pool thread, and its writes join the runner's group commits).
        runner_id: written to ``runs.runner_id`` of a claimed run.
        actor: who the events name (``runner:<id>``).
        lease_s: the first lease of a claimed run, seconds.
        host: this runner's hostname and ``boot_id`` its host life's boot id, written to
            ``runs.host`` / ``runs.boot_id`` of a claimed run.
        labels: this host's labels; with ``host`` they say which pinned jobs (``JobSpec.host``)
            this runner claims.
    """

    def __init__(self, *, store: Callable[[], Store], runner_id: str, actor: str, lease_s: float,
                 host: str | None = None, boot_id: str | None = None, labels: Sequence[str] = ()) -> None:
        self._store = store
        self.runner_id = runner_id
        self.actor = actor
        self.lease_s = lease_s
        self.host = host
        self.boot_id = boot_id
        self.names = {n for n in (host, *labels) if n}
        self.jobs: Mapping[str, LoadedJob] = {}

    def tick(self, now: float, room: int) -> list[Claimed]:
        """Claim up to ``room`` due runs at ``now`` (Unix seconds); returns what was claimed,
        oldest ``not_before`` first. Rows of unknown jobs (removed, or another runner's
        folder) stay queued; sub-tasks of an ended parent stay for the sweep."""
        if room <= 0:
            return []
        store = self._store()
        due = store.due_runs(now, limit=max(room * READ_AHEAD, 16))
        chosen: list[Claimed] = []
        live: dict[str, int] = {}  # per limit key: live runs counted so far, the chosen included
        for queued in due:
            run = queued.run
            if len(chosen) >= room:
                break
            lj = self.jobs.get(run.job)
            if lj is None:
                continue
            spec = lj.spec
            if spec.hosts and not self.names.intersection(spec.hosts):
                continue  # pinned to other hosts: theirs to claim (a host_down says when they are all gone)
            if run.task and spec.kind == "fanout" and run.parent_run_id is not None:
                key = f"{run.job}#{run.parent_run_id}"  # sub-tasks: bounded per parent
                if queued.parent_state is None or queued.parent_state in TERMINAL:
                    continue  # nobody waits for it any more: the sweep abandons it (parent_ended)
                if queued.parent_started_at is not None and now > queued.parent_started_at + spec.timeout:
                    # Its parent is past its deadline (a runner took it over late): the parent
                    # times out and abandons it (parent_ended); started now, it would run on
                    # after its parent ended.
                    continue
                if key not in live:
                    live[key] = store.live_run_count(parent_run_id=run.parent_run_id)
            elif not run.task:
                key = run.job
                if key not in live:
                    live[key] = store.live_run_count(job=run.job)
            else:
                continue  # a sub-task of a job that is no longer a fan-out: for the sweep/doctor
            if live[key] >= spec.concurrency:
                continue
            live[key] += 1
            chosen.append(Claimed(run, lj))
        if not chosen:
            return []
        # One transaction for the whole tick (one commit, not one per run). A run another
        # runner claimed first is simply not ours; its commit wakes this loop again, so the
        # room it leaves is filled on the next tick.
        won = store.claim_runs([c.run for c in chosen], runner_id=self.runner_id, actor=self.actor, now=now,
                               lease_s=self.lease_s, host=self.host, boot_id=self.boot_id)
        return [c for c, ok in zip(chosen, won, strict=True) if ok]

    def next_due(self) -> float | None:
        """The earliest ``not_before`` of any queued run (Unix seconds; None: nothing queued)."""
        return self._store().next_queued_at()
