"""Process-group helpers: identity (pid + create time) and group kills, through psutil/os."""

from __future__ import annotations

import os
import signal

import psutil


def create_time(pid: int) -> float | None:
    """The process's create time (Unix seconds, psutil's value), or None if it is gone.

    Works for a zombie that is not yet reaped, so it can be read right after spawning even
    for a command that exits at once.
    """
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return None


def is_same_process(pid: int | None, created: float | None) -> bool:
    """True when ``pid`` exists and is the process recorded at ``created`` (a reused pid is
    a different process). Zombies count as not alive."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        if created is not None and abs(proc.create_time() - created) > 0.01:
            return False
        return True
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return False


def group_members(pgid: int) -> list[int]:
    """Pids currently in process group ``pgid`` (zombies excluded)."""
    out = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError, psutil.AccessDenied):
            continue
    return out


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
