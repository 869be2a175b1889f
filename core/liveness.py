"""Is a process, or a runner, still alive? The sweep's only source of evidence.

A process is identified by its pid AND its create time (psutil), because pids are reused:
a different process that happens to get the same pid is not the run's process. A zombie
(exited, not yet reaped) counts as dead: it can no longer do work.

A runner is judged from its ``runners`` row:

* ``alive``   – heartbeat fresh (``heartbeat_at + lease_s >= now``) and, on this host, its
  process still exists;
* ``stalled`` – heartbeat stale but its process is alive on this host (stopped with SIGSTOP,
  blocked, swapping). Its runs are never touched; the condition is reported instead;
* ``gone``    – it recorded a clean stop, or its process is dead on this host, or its
  heartbeat is stale and it lives on another host (where we cannot look).

The process check is authoritative on this host: a dead pid cannot renew a heartbeat, so a
runner killed with SIGKILL is ``gone`` at once, which is what lets startup reconciliation
settle its runs without waiting for the lease.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Protocol

import psutil

from core.processes import run_processes
from core.vocabulary import RunnerLiveness  # noqa: F401 (re-exported: callers import it from here)

#: Seconds two create-time readings of the same process may differ by. psutil derives the
#: create time from boot time plus clock ticks (1/100 s); pids are handed out sequentially,
#: so a reused pid within half a second of the original's start is practically impossible.
CREATE_TIME_TOLERANCE_S = 0.5




def hostname() -> str:
    """This machine's host name, as runners record it in ``runners.hostname``."""
    return socket.gethostname()


def process_alive(pid: int | None, pid_create_time: float | None) -> bool:
    """True when a non-zombie process with this pid exists and started at ``pid_create_time``
    (Unix seconds, within ``CREATE_TIME_TOLERANCE_S``).

    ``pid`` None → False (nothing was ever started). ``pid_create_time`` None → existence
    alone decides, erring towards "alive" so an old row is never falsely declared dead.
    Never raises.
    """
    if pid is None or pid <= 0:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        if pid_create_time is None:
            return True
        return abs(proc.create_time() - float(pid_create_time)) <= CREATE_TIME_TOLERANCE_S
    except psutil.ZombieProcess:
        return False
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        # Exists but belongs to someone else: cannot compare create times, so not dead.
        return True


class RunnerLife(Protocol):
    """What liveness reads of a runner: ``core.ledger.records.Runner`` has these fields."""

    @property
    def hostname(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def pid_create_time(self) -> float | None: ...
    @property
    def heartbeat_at(self) -> float: ...
    @property
    def lease_s(self) -> float: ...
    @property
    def stopped_at(self) -> float | None: ...


def runner_liveness(row: RunnerLife, *, now: float | None = None,
                    this_host: str | None = None) -> RunnerLiveness:
    """Classify one runner (a ``core.ledger.records.Runner``: ``hostname``, ``pid``,
    ``pid_create_time``, ``heartbeat_at`` and ``stopped_at`` epoch s, ``lease_s`` s).

    ``now`` is Unix seconds (default: now); ``this_host`` defaults to ``hostname()``.
    See the module docstring for the three outcomes. Never raises.
    """
    now = time.time() if now is None else now
    same_host = row.hostname == (this_host or hostname())
    if row.stopped_at is not None:
        return RunnerLiveness.GONE
    fresh = float(row.heartbeat_at) + float(row.lease_s) >= now
    if same_host:
        if not process_alive(row.pid, row.pid_create_time):
            return RunnerLiveness.GONE
        return RunnerLiveness.ALIVE if fresh else RunnerLiveness.STALLED
    return RunnerLiveness.ALIVE if fresh else RunnerLiveness.GONE


def run_group_leftovers(pgid: int | None, run_id: int) -> list[psutil.Process]:
    """Live processes left in a run's process group after its leader died: their process
    group is ``pgid`` AND their environment carries ``WATCHKEEPER_RUN_ID=<run_id>``
    (``core.processes.run_processes``).

    Both must hold, so a reused pid (or pgid) of an unrelated process never matches: only a
    process the run itself started (and that stayed in its group) is returned. Never our own
    group. For the rare path (a dead leader) only.
    """
    if not pgid or pgid <= 1:
        return []
    try:
        if pgid == os.getpgid(0):
            return []
    except OSError:
        return []
    return run_processes(run_id, pgid=pgid)
