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

"This host" is one host life: the same hostname AND boot id (``same_life``). A runner of
another host, or of this host before a reboot, is judged by its heartbeat and lease alone:
a process there with the same pid (pid namespaces, containers, a reused pid after a reboot)
never makes it look alive.

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




#: Where Linux keeps the id of the current boot: a new one after every reboot.
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


def hostname() -> str:
    """This host's name, as runners record it in ``runners.hostname`` and ``runs.host``: the
    environment's ``WATCHKEEPER_HOST`` when set (containers, or two "hosts" on one machine
    to try the fleet), else the machine's host name."""
    return os.environ.get("WATCHKEEPER_HOST", "").strip() or socket.gethostname()


def boot_id() -> str | None:
    """This host life's boot id (``runners.boot_id``, ``runs.boot_id``): the environment's
    ``WATCHKEEPER_BOOT_ID`` when set (containers sharing one kernel, each its own host), else
    the kernel's ``/proc/sys/kernel/random/boot_id``; None where neither exists (not Linux).

    Hostname plus boot id name one *host life*: after a reboot the same hostname is a new
    life, whose process ids say nothing about the old life's processes."""
    got = os.environ.get("WATCHKEEPER_BOOT_ID", "").strip()
    if got:
        return got
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def same_life(host: str | None, boot: str | None, *, this_host: str | None = None) -> bool:
    """True when a runner or run recorded on ``host`` with boot id ``boot`` lives in this
    host life (``this_host`` defaults to ``hostname()``), so its process ids can be probed
    here. A ``boot`` of None (a row written before boot ids were recorded) is judged by the
    hostname alone; a ``host`` of None (no host recorded) counts as this host."""
    if host is not None and host != (this_host or hostname()):
        return False
    return boot is None or boot == boot_id()


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
    def boot_id(self) -> str | None: ...
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
    same_host = same_life(row.hostname, row.boot_id, this_host=this_host)
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
