"""Process-group helpers: identity (pid + create time) and group kills, through psutil/os."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import psutil


def create_time(pid: int) -> float | None:
    """The process's create time (Unix seconds, psutil's value), or None if it is gone.

    Works for a zombie that is not yet reaped, so it can be read right after spawning even
    for a command that exits at once.
    """
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, ProcessLookupError, ValueError):
        return None


def signal_group(pgid: int | None, sig: int) -> bool:
    """Send ``sig`` to the whole process group; False when the group no longer exists."""
    if not pgid or pgid <= 1:
        return False
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def signal_name(sig: int | None) -> str:
    """9 → 'SIGKILL'; None → ''."""
    if sig is None:
        return ""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def run_processes(run_id: int, *, runner_id: str | None = None, pgid: int | None = None,
                  exclude_pgid: int | None = None) -> list[psutil.Process]:
    """Live processes (not zombies, not this one) started for run ``run_id``: their
    environment carries ``WATCHKEEPER_RUN_ID=<run_id>`` (inherited), and
    ``WATCHKEEPER_RUNNER_ID=<runner_id>`` too when ``runner_id`` is given. ``pgid`` keeps only
    members of that process group; ``exclude_pgid`` drops them. Scans every process: call it
    only on rare paths (a timeout, a dead leader)."""
    me, want = os.getpid(), str(run_id)
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == me or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if pgid is not None or exclude_pgid is not None:
                group = os.getpgid(proc.pid)
                if (pgid is not None and group != pgid) or group == exclude_pgid:
                    continue
            env = proc.environ()
            if env.get("WATCHKEEPER_RUN_ID") != want:
                continue
            if runner_id is not None and env.get("WATCHKEEPER_RUNNER_ID") != runner_id:
                continue
            found.append(proc)
        except (psutil.Error, ProcessLookupError, OSError):
            continue
    return found


def describe(proc: psutil.Process) -> dict[str, object]:
    """``{pid, cmd}`` for a report: the command line cut to 120 characters, else its name."""
    try:
        cmd = " ".join(proc.cmdline())[:120] or proc.name()
    except psutil.Error:  # gone meanwhile, or unreadable: the pid is what matters
        cmd = "?"
    return {"pid": proc.pid, "cmd": cmd}


def find_escaped(run_id: int, runner_id: str, *, exclude_pgid: int | None = None) -> list[dict[str, object]]:
    """Live processes started for run ``run_id`` by runner ``runner_id`` that left its process
    group: they carry ``WATCHKEEPER_RUN_ID=<run_id>`` and ``WATCHKEEPER_RUNNER_ID=<runner_id>``
    in their environment (inherited) but another pgid. Both must match: run ids restart at 1
    in every ledger, so another Watchkeeper's run 7 is not ours.
    Returns ``[{pid, cmd}]``. Scans every process: call it only on the rare path."""
    return [describe(p) for p in run_processes(run_id, runner_id=runner_id, exclude_pgid=exclude_pgid)]


def kill_escaped(run_id: int, runner_id: str, *, exclude_pgid: int | None = None) -> list[dict[str, object]]:
    """SIGKILL every process ``find_escaped`` finds (and their own groups); returns them."""
    found = find_escaped(run_id, runner_id, exclude_pgid=exclude_pgid)
    for item in found:
        pid = int(str(item["pid"]))
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return found


async def stop_child(pgid: int, wait: Callable[[], Awaitable[Any]], grace: float) -> None:
    """Stop a child we started and can ``wait`` for (its process group is ``pgid``): SIGTERM
    the whole group, wait up to ``grace`` seconds for the leader to exit, then SIGKILL the
    group anyway (members may ignore SIGTERM after the leader is gone) and wait up to 5 s
    more. Never raises for a group that is already gone."""
    signal_group(pgid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(wait()), timeout=grace)
    signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(wait()), timeout=5)


def descendants(pid: int | None = None) -> list[psutil.Process]:
    """Every live descendant of ``pid`` (default: this process), children first.

    On Linux it follows ``/proc/<pid>/task/<tid>/children`` down the tree, so it reads only
    the tree's own entries, not every process's (a run ending costs the same however many
    processes the machine has); elsewhere, or without that file, ``psutil``'s
    ``children(recursive=True)``. Processes that vanish meanwhile are left out."""
    root = os.getpid() if pid is None else pid
    try:
        tids = os.listdir(f"/proc/{root}/task")
        if not tids or not os.path.exists(f"/proc/{root}/task/{tids[0]}/children"):
            raise FileNotFoundError
    except OSError:
        try:
            return psutil.Process(root).children(recursive=True)
        except psutil.Error:
            return []
    found: list[int] = []
    seen = {root}
    stack = [root]
    while stack:
        parent = stack.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # exited meanwhile
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as fh:
                    kids = fh.read().split()
            except OSError:
                continue
            for k in kids:
                child = int(k)
                if child not in seen:
                    seen.add(child)
                    found.append(child)
                    stack.append(child)
    out = []
    for child in found:
        try:
            out.append(psutil.Process(child))
        except psutil.Error:
            continue
    return out
