"""Re-attach: a starting runner takes over the runs an earlier runner of this host left.

A runner that stops (``run``'s default, ``systemctl restart``, an upgrade) or crashes leaves
its jobs running under their per-run monitors (``core.monitor``). The next runner finds, for
every live run of a gone runner of this host (``core.sweep.sweep.reattachable``):

* a monitor still running the job → it takes the run over (lease, timeout, output cap and
  cancellation continue) and follows it to its end like one it started;
* a job that ended while no runner was there → it records the status and output the monitor
  kept, and the supervisor judges it: ``succeeded`` or ``failed``, never ``interrupted``;
* a run whose outcome was recorded but not yet judged → the supervisor settles it;
* a fan-out parent (no process of its own) → it waits on its sub-tasks again (queueing any
  the stop came before) and synthesizes, like one it started.

Each take-over is a compare-and-set on (state, attempt, previous runner) with a
``reattached`` event (``core.ledger.runners.reattach_run``), so two runners never both take a
run. What cannot be re-attached (no monitor, no exit status) is left to the orphan sweep.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from core.ledger.connection import Ledger
from core.ledger.records import Run
from core.ledger.sql_store import SqlStore
from core.liveness import hostname
from core.spec.loader import LoadedJob
from core.spec.model import spec_from_json
from core.sweep import sweep

#: What ``reattached`` events say about a run, by what was found.
FOUND = {"running": "still running under its monitor: followed by the new runner",
         "ended": "ended while no runner was there: its monitor kept the exit status and output",
         "verifying": "outcome recorded, verdict not yet: settled by the new runner",
         "fanout": "fan-out parent: the new runner waits on its sub-tasks and synthesizes"}


@dataclass
class Candidate:
    """One run a starting runner can take over: the run and what was found."""

    run: Run
    found: str


def candidates(ledger: Ledger, *, runner_id: str) -> list[Candidate]:
    """The live runs of gone runners of this host that ``runner_id`` can take over (oldest
    first). Reads tables ``runs`` and ``runners``, the runs' folders and the process table;
    never writes. Raises ``StorageError`` when the ledger cannot be read."""
    now, host = time.time(), hostname()
    out = []
    for run, owner in SqlStore(ledger).live_runs_and_owners():
        if not run.runner_id or run.runner_id == runner_id:
            continue
        found = sweep.reattachable(run, owner, now=now, this_host=host)
        if found is not None:
            out.append(Candidate(run, found))
    return out


def job_for(ledger: Ledger, name: str, current: dict[str, LoadedJob]) -> LoadedJob | None:
    """The job a re-attached run belongs to: the runner's current spec, else the one the ledger
    stored (a job removed from the folder still has its running run followed to the end)."""
    if name in current:
        return current[name]
    job = SqlStore(ledger).job(name)
    if job is None:
        return None
    try:
        spec = spec_from_json(job.spec)
    except ValueError:
        return None
    return LoadedJob(spec, job.source or "", job.source_line)
