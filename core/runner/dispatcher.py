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
from functools import partial
from typing import Any

from core.ledger import lifecycle, queue
from core.ledger.lifecycle import TERMINAL, State
from core.spec.loader import LoadedJob

#: Queued rows read per free slot: rows of jobs at their own limit are skipped, so read a
#: few more than there is room for.
READ_AHEAD = 4


@dataclass
class Claimed:
    """A run this runner now owns (``spawned``): its ``runs`` row as a dict, and its job."""

    run: dict[str, Any]
    job: LoadedJob


class Dispatcher:
    """Claims queued runs of ``jobs`` whose ``not_before`` has passed.

    Args:
        write: runs ``fn(conn)`` in one write transaction and returns its result.
        read: runs ``fn(conn)`` on a read connection and returns its result.
        runner_id: written to ``runs.runner_id`` of a claimed run.
        actor: who the events name (``runner:<id>``).
        lease_s: the first lease of a claimed run, seconds.
        host: this runner's hostname and ``boot_id`` its host life's boot id, written to
            ``runs.host`` / ``runs.boot_id`` of a claimed run.
        labels: this host's labels; with ``host`` they say which pinned jobs (``JobSpec.host``)
            this runner claims.
    """

    def __init__(self, *, write: Callable[[Callable[[Any], Any]], Any], read: Callable[[Callable[[Any], Any]], Any],
                 runner_id: str, actor: str, lease_s: float, host: str | None = None,
                 boot_id: str | None = None, labels: Sequence[str] = ()) -> None:
        self._write = write
        self._read = read
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
        rows = self._read(lambda conn: queue.due_queued(conn, now, max(room * READ_AHEAD, 16)))
        claimed: list[Claimed] = []
        live: dict[str, int] = {}  # per limit key: live runs counted so far
        for run in rows:
            if len(claimed) >= room:
                break
            lj = self.jobs.get(run["job"])
            if lj is None:
                continue
            spec = lj.spec
            if spec.hosts and not self.names.intersection(spec.hosts):
                continue  # pinned to other hosts: theirs to claim (a host_down says when they are all gone)
            if run["task"] and spec.kind == "fanout" and run["parent_run_id"] is not None:
                key = f"{run['job']}#{run['parent_run_id']}"  # sub-tasks: bounded per parent
                if run["parent_state"] is None or run["parent_state"] in TERMINAL:
                    continue  # nobody waits for it any more: the sweep abandons it (parent_ended)
                if key not in live:
                    parent = run["parent_run_id"]
                    live[key] = self._read(partial(queue.live_runs_of_parent, parent_run_id=parent))
            elif not run["task"]:
                key = run["job"]
                if key not in live:
                    live[key] = self._read(partial(queue.live_runs_of_job, job=run["job"]))
            else:
                continue  # a sub-task of a job that is no longer a fan-out: for the sweep/doctor
            if live[key] >= spec.concurrency:
                continue
            if not self._claim(run, now):
                continue  # another runner claimed it
            live[key] += 1
            claimed.append(Claimed(run, lj))
        return claimed

    def next_due(self) -> float | None:
        """The earliest ``not_before`` of any queued run (Unix seconds; None: nothing queued)."""
        return self._read(queue.next_queued_at)

    def _claim(self, run: dict[str, Any], now: float) -> bool:
        return bool(self._write(lambda conn: lifecycle.apply(
            conn, run["id"], run["attempt"], State.QUEUED, State.SPAWNED, actor=self.actor,
            fields={"runner_id": self.runner_id, "spawned_at": now, "lease_until": now + self.lease_s,
                    "host": self.host, "boot_id": self.boot_id})))
