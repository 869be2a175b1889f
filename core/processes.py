"""Process-group helpers: identity (pid + create time) and group kills, through psutil/os."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psutil

# -- this process's own children ------------------------------------------------------------
# As child subreaper the runner adopts every orphan below it, so "a child of the runner" is
# either one it started (a job's leader, a verify command, a notification command) or a stray
# a run left behind — possibly with its environment wiped (``env -i``). The strays are told
# apart by this registry: every child the runner starts is recorded here, under a lock held
# across the fork, until it was waited for.
_own_lock = threading.Lock()
_own: set[int] = set()


def start_child(argv: Any, **popen_kw: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **popen_kw)``, recording the child as this process's own
    until ``forget_child(pid)`` (call it once the child was waited for). Raises what Popen
    raises."""
    with _own_lock:
        proc = subprocess.Popen(argv, **popen_kw)  # noqa: S603 - callers pass their own argv
        _own.add(proc.pid)
    return proc


def restore_job_signals() -> None:
    """Put SIGINT and SIGQUIT back to their defaults in this process when it inherited them
    ignored (started as a non-interactive shell's background job: ``watchkeeper run &`` in a
    script). An ignored signal survives ``exec``: the sh monitor's foreground start (where
    ``env`` has no ``--default-signal``) would hand it on to every job, which could then not
    be interrupted as a terminal would. SIGINT gets Python's own handler
    (``KeyboardInterrupt``), SIGQUIT ``SIG_DFL``; a handler already set is left alone. Does
    nothing outside the main thread (``signal.signal`` works only there)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def forget_child(pid: int) -> None:
    """The child ``pid`` (from ``start_child``) was waited for: its pid may be reused."""
    with _own_lock:
        _own.discard(pid)


def is_own_child(pid: int) -> bool:
    """True when ``pid`` was started by ``start_child`` and not yet forgotten. A child being
    started while this is asked is registered before the lock is free, so a pid seen in the
    process table before the call is answered truly."""
    with _own_lock:
        return pid in _own


def run_child(argv: Any, *, input: str | None = None, timeout: float | None = None,  # noqa: A002
              **popen_kw: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, input=..., capture_output=True, text=True, timeout=...)`` through
    ``start_child``. Raises ``subprocess.TimeoutExpired`` (the child killed and reaped) and
    what Popen raises."""
    proc = start_child(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen_kw)
    try:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)
    finally:
        forget_child(proc.pid)


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
    for proc in found:
        pid = int(str(proc["pid"]))
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return found


# -- stopping with grace: SIGTERM, wait up to ``grace`` seconds, SIGKILL what is left ---------
#: Seconds waited after the SIGKILL for the processes to be gone.
KILL_WAIT_S = 2.0
#: Seconds between two looks while waiting (synchronous variants).
POLL_S = 0.05


def group_members(pgid: int) -> list[psutil.Process]:
    """Non-zombie processes whose process group is ``pgid`` (scans the process table)."""
    out = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def _with_grace(send: Callable[[int], bool], alive: Callable[[], bool], grace: float,
                poll: float) -> int | None:
    """The one policy: SIGTERM (``send``), wait up to ``grace`` seconds while ``alive()``,
    SIGKILL if still alive, wait up to ``KILL_WAIT_S`` more. Returns the last signal sent,
    None when nothing was alive to receive the first."""
    if not alive() or not send(signal.SIGTERM):
        return None
    last: int = signal.SIGTERM
    deadline = time.monotonic() + max(0.0, grace)
    while time.monotonic() < deadline:
        if not alive():
            return last
        time.sleep(poll)
    if alive() and send(signal.SIGKILL):
        last = signal.SIGKILL
        deadline = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < deadline and alive():
            time.sleep(poll)
    return last


def stop_group(pgid: int, *, grace: float, poll: float = POLL_S) -> int | None:
    """Stop every process of group ``pgid`` with grace (``_with_grace``); for a group we did
    not start (the sweep, an operator's abandon). Blocking: call it off the event loop.

    Returns the last signal sent (``signal.SIGTERM`` or ``signal.SIGKILL``), or None when
    the group was already empty. Raises ``PermissionError`` if the group is not ours to kill.
    """
    def send(sig: int) -> bool:
        try:
            os.killpg(pgid, sig)
            return True
        except ProcessLookupError:
            return False
    return _with_grace(send, lambda: bool(group_members(pgid)), grace, poll)


def stop_processes(procs: list[psutil.Process], *, grace: float, poll: float = POLL_S) -> int | None:
    """Stop each of ``procs`` with grace (``_with_grace``). Signals go through psutil, which
    refuses a process whose pid was reused since it was found (create time differs).
    Blocking. Returns the last signal sent, or None when none of them was still alive."""
    def one_alive(p: psutil.Process) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def send(sig: int) -> bool:
        sent = False
        for p in procs:
            if one_alive(p):
                try:
                    p.send_signal(sig)
                    sent = True
                except psutil.Error:
                    continue
        return sent
    return _with_grace(send, lambda: any(one_alive(p) for p in procs), grace, poll)


async def stop_child(pgid: int, wait: Callable[[], Awaitable[Any]], grace: float) -> None:
    """The same policy for a child we started and can ``wait`` for on the event loop (its
    process group is ``pgid``): SIGTERM the group, await the leader up to ``grace`` seconds,
    then SIGKILL the group anyway (members may ignore SIGTERM after the leader is gone) and
    await up to ``KILL_WAIT_S`` more. Never raises for a group that is already gone."""
    signal_group(pgid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(wait()), timeout=grace)
    signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(wait()), timeout=KILL_WAIT_S)

