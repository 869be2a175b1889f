"""Starting a job's process and waiting for it, on the runner's own event loop.

Python 3.11's asyncio waits for every child on a thread of its own (``ThreadedChildWatcher``);
starting that thread cost the runner's loop more than a tenth of its time per run. On Linux
a pidfd (``os.pidfd_open``) becomes readable when the child exits, so the loop waits for it
like any other file descriptor; elsewhere a pool thread waits instead. The watcher is per
child, never process-global, so several runners (or a runner beside the console) can share
one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from pathlib import Path

from core import monitor
from core.processes import forget_child, group_members, signal_group, start_child


class Child:
    """A started process: ``pid``, ``returncode`` (None while running; negative: killed by
    that signal), ``stdout``/``stderr`` as ``asyncio.StreamReader``, ``stdin`` as an
    ``asyncio.StreamWriter`` when requested."""

    def __init__(self, popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self._popen = popen
        self._loop = loop
        self.pid = popen.pid
        self.returncode: int | None = None
        self.exited_at: float | None = None  # wall time (Unix s) the exit was seen
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self.stdin: asyncio.StreamWriter | None = None
        self._exited: asyncio.Future[int] = loop.create_future()
        self._transports: list[asyncio.BaseTransport] = []
        self._watch()

    def _watch(self) -> None:
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._loop.create_task(self._wait_in_thread())
            return

        def ready() -> None:
            try:
                reaped, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else: the status is lost
                reaped, status = self.pid, None
            if reaped == 0:
                return  # not exited yet
            self._loop.remove_reader(fd)
            os.close(fd)
            self._finish(os.waitstatus_to_exitcode(status) if status is not None else 255)

        self._loop.add_reader(fd, ready)

    async def _wait_in_thread(self) -> None:
        self._finish(await asyncio.to_thread(self._popen.wait))

    def _finish(self, code: int) -> None:
        self.exited_at = time.time()
        self.returncode = code
        forget_child(self.pid)  # waited for: its pid may be reused
        self._popen.returncode = code  # the Popen object must not try to reap it again
        if not self._exited.done():
            self._exited.set_result(code)

    async def wait(self) -> int:
        """Wait for the process to exit; returns its return code."""
        return await asyncio.shield(self._exited)

    def close(self) -> None:
        """Close the pipes (after the output was drained or abandoned)."""
        for t in self._transports:
            with contextlib.suppress(Exception):
                t.close()


async def start(argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str], stdin_pipe: bool = False,
                limit: int = 1 << 16) -> Child:
    """Start ``argv`` in a new session (its own process group), stdout/stderr piped.

    Raises:
        OSError: the program could not be started (not found, not executable, bad cwd).
        ValueError: invalid arguments (e.g. a NUL byte in argv or env).
    """
    loop = asyncio.get_running_loop()
    popen = start_child(  # argv comes from the operator's own job spec
        list(argv), stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=cwd, env=dict(env), start_new_session=True, close_fds=True)
    child = Child(popen, loop)
    for name in ("stdout", "stderr"):
        reader = asyncio.StreamReader(limit=limit, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(partial(asyncio.StreamReaderProtocol, reader),
                                                         getattr(popen, name))
        child._transports.append(read_transport)
        setattr(child, name, reader)
    if stdin_pipe:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, popen.stdin)
        child.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        child._transports.append(transport)
    return child


# -- a job under its per-run monitor (``core.monitor``): the run outlives the runner ----------
#: Seconds to wait for the monitor's ``exit`` file after the job's process is gone (the
#: monitor writes it the moment it reaps the job).
STATUS_WAIT_S = 2.0
#: Seconds between two looks when no pidfd can be had (not Linux).
POLL_S = 0.1


def _check_program(argv: Sequence[str], cwd: str | None, env: Mapping[str, str]) -> None:
    """Raise as ``Popen`` would when ``argv[0]`` cannot be run: the monitor starts it later,
    and a missing program must still be a spawn failure, not exit 127 of a started run."""
    if not argv:
        raise ValueError("empty command")
    prog = str(argv[0])
    if "\0" in prog:
        raise ValueError("embedded null byte")
    if "/" in prog:
        path = prog if os.path.isabs(prog) else os.path.join(cwd or os.getcwd(), prog)
        if not os.path.exists(path):
            raise FileNotFoundError(2, "No such file or directory", prog)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(13, "Permission denied", prog)
        return
    if shutil.which(prog, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(2, "No such file or directory", prog)


async def wait_gone(pid: int, *, reap: bool = False) -> int | None:
    """Wait until process ``pid`` exits (a pidfd on Linux, any process; else polling). With
    ``reap`` (our own child), collect its status so it leaves no zombie, and return it (a
    ``Popen`` return code; None when someone else reaped it)."""
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        fd = None
    except (AttributeError, OSError):
        while _running(pid, reap):
            await asyncio.sleep(POLL_S)
        return _reaped.pop(pid, None)
    if fd is not None:
        fut: asyncio.Future[None] = loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)
        loop.add_reader(fd, ready)
        try:
            await fut
        finally:
            loop.remove_reader(fd)
            os.close(fd)
    if reap:
        _running(pid, True)
        forget_child(pid)
        return _reaped.pop(pid, None)
    return None


#: Statuses of monitors reaped by ``_running`` and not yet asked for (pid → return code).
_reaped: dict[int, int] = {}


def _running(pid: int, reap: bool) -> bool:
    if reap:
        with contextlib.suppress(ChildProcessError, OSError):
            got, status = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                _reaped[pid] = os.waitstatus_to_exitcode(status)
                return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Monitored:
    """A job running under its monitor, started now (``start_monitored``) or re-attached by a
    later runner (``attach``). ``pid``: the job's (its process group too); ``art``: the run's
    folder; ``monitor``: the monitor's pid (None when it is gone)."""

    def __init__(self, pid: int, art: Path, monitor_pid: int | None, *, child: bool) -> None:
        self.pid = pid
        self.art = art
        self.monitor = monitor_pid
        self._child = child  # the monitor is this process's child: reap it
        self.ended_at: float | None = None
        self._monitor_rc: int | None = None  # the monitor's own exit status, once reaped
        #: The job's status when this process reaped the job itself (its monitor died first).
        self.job_status: int | None = None

    async def job_exit(self) -> None:
        """Wait until the job's own process exits (at once when its monitor already recorded
        the exit: the pid may belong to another process by now)."""
        if monitor.exit_status(self.art) is None:
            await wait_gone(self.pid)

    async def status(self) -> int | None:
        """The job's status (``$?``) from the monitor's ``exit`` file, waiting up to
        ``STATUS_WAIT_S`` while the monitor lives; None when it never came (the monitor died)."""
        deadline = time.monotonic() + STATUS_WAIT_S
        while True:
            st = monitor.exit_status(self.art)
            if st is not None:
                self.ended_at = monitor.exit_time(self.art)
                return st
            if time.monotonic() > deadline or not self.monitor_running():
                st = monitor.exit_status(self.art)  # written just before it exited
                if st is not None:
                    self.ended_at = monitor.exit_time(self.art)
                    return st
                # No file (a full disk): the monitor that exited passed the status on itself.
                rc = self._monitor_rc
                if rc is not None and rc >= 0:
                    return rc
                # The monitor died (kill -9) before the job: the job was re-parented to this
                # process (the runner is child subreaper) and its status is ours to collect —
                # once the kernel has moved it over, which a monitor still dying has not yet.
                st = self.reap_job()
                if st is not None or time.monotonic() > deadline:
                    return st
            await asyncio.sleep(0.005)

    def reap_job(self) -> int | None:
        """The job's status as a shell would report it (128 + N for signal N), collected here
        when its monitor died first and the job was re-parented to this process (a child
        subreaper); None when the job is not this process's child (no subreaper, or another
        runner's job: its status is lost). Sets ``ended_at``. Never raises."""
        if self.job_status is not None:
            return self.job_status
        try:
            got, st = os.waitpid(self.pid, os.WNOHANG)
        except (ChildProcessError, OSError):
            return None
        if got != self.pid:
            return None
        code = os.waitstatus_to_exitcode(st)
        self.ended_at = time.time()
        self.job_status = 128 - code if code < 0 else code
        return self.job_status

    def passed_status(self) -> int | None:
        """The job's status as the exited monitor passed it on (its own exit status), when
        this process reaped it; None otherwise."""
        rc = self._monitor_rc
        return rc if rc is not None and rc >= 0 else None

    def monitor_running(self) -> bool:
        if self.monitor is None:
            return False
        if self._child:
            running = _running(self.monitor, True)
            if not running and self.monitor in _reaped:
                self._monitor_rc = _reaped.pop(self.monitor)
            return running
        return monitor.monitor_alive(self.art)

    async def drained(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the monitor to exit (its drains read the pipes to
        the end); True when it did."""
        if self.monitor is None:
            return True
        deadline = time.monotonic() + timeout
        try:
            rc = await asyncio.wait_for(wait_gone(self.monitor, reap=self._child), timeout)
            if rc is not None:
                self._monitor_rc = rc
        except TimeoutError:
            return False
        # A monitor that was killed (kill -9) leaves its drains behind, still reading: they
        # end at the pipes' end like under a live monitor, and are waited for the same way.
        while self.helpers_left():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(POLL_S / 5 if self._child else POLL_S)  # else each look scans the process table
        return True

    def helpers_left(self) -> bool:
        """True while a helper of the monitor (a drain: its process group, led by the
        monitor) still runs; those re-parented to this process are reaped on the way. Never
        raises."""
        if self.monitor is None:
            return False
        with contextlib.suppress(ChildProcessError, OSError):
            while os.waitpid(-self.monitor, os.WNOHANG)[0] > 0:
                pass
        try:
            os.killpg(self.monitor, 0)
        except (ProcessLookupError, PermissionError):
            return False
        if self._child:
            return True
        # A re-attached run's monitor is not ours to reap: once exited it (and its drains) may
        # stay zombies in the group until whoever adopted them reaps them (an init that reaps
        # late), which is not a helper still reading.
        return bool(group_members(self.monitor))

    def kill(self) -> None:
        """SIGKILL the job's process group, or the job alone while it has no group yet: its
        pid is known before it made its own session. Never raises."""
        if not signal_group(self.pid, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)

    def end_monitor(self) -> None:
        """Kill the monitor and its drains (its own process group): something the job started
        holds the pipe and could not be ended; what was drained so far is kept."""
        if self.monitor is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.monitor, 9)


#: Threads that start monitors. ``Popen`` returns only once its child has exec'd (vfork),
#: and the child first makes its own session, which moves it to a new scheduler autogroup:
#: on a loaded host that wait is many milliseconds, once per run. It is kept off every event
#: loop, and off the default executor too (the runner's ticks run there).
SPAWN_THREADS = 4
def spawn_pool() -> ThreadPoolExecutor:
    """A pool for ``start_monitored``: ``SPAWN_THREADS`` threads, so a burst of starts is not
    held up by one slow fork. The caller owns it and shuts it down when it stops."""
    return ThreadPoolExecutor(max_workers=SPAWN_THREADS, thread_name_prefix="watchkeeper-spawn")


def _start_monitor(argv: list[str], cwd: str | None, env: dict[str, str], art: Path, cap: int, timeout: float,
                   grace: float) -> subprocess.Popen[bytes]:
    """The blocking part of ``start_monitored`` (file system and ``Popen``), in a spawn thread.
    The monitor gets a session of its own (out of reach of the terminal's Ctrl-C and hangup;
    its own CPU share under autogroup scheduling), without ``preexec_fn`` or a user switch, so
    CPython still starts it with vfork (a job's ``user`` is switched by ``core.runas``)."""
    _check_program(argv, cwd, env)
    monitor.prepare(art)
    return start_child(monitor.argv(art, cap, argv, timeout=timeout, grace=grace), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd, env=monitor.env(env),
                       start_new_session=True, close_fds=True)


async def start_monitored(pool: Executor, argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str], art: Path,
                          cap: int, timeout: float = 0.0, grace: float = 0.0) -> Monitored:
    """Start ``argv`` under a per-run monitor (``core.monitor``) writing to folder ``art``,
    ``cap`` bytes kept per stream; with ``timeout`` (seconds, > 0) the monitor itself ends
    the job at that deadline (SIGTERM, SIGKILL ``grace`` seconds later), runner or not.
    Returns once the job's pid is known (the monitor prints it as soon as it has forked the
    job); the event loop is never blocked on the start (``_start_monitor`` runs in a thread
    of ``pool``, see ``spawn_pool``).

    Raises:
        OSError: the program could not be started (not found, not executable, bad cwd), or
            the folder or the monitor could not be set up.
        ValueError: invalid arguments (e.g. a NUL byte in argv or env).
    """
    loop = asyncio.get_running_loop()
    popen = await loop.run_in_executor(pool, _start_monitor, [str(a) for a in argv], cwd, dict(env), art,
                                       cap, timeout, grace)
    reader = asyncio.StreamReader(loop=loop)
    transport, _ = await loop.connect_read_pipe(partial(asyncio.StreamReaderProtocol, reader), popen.stdout)
    try:
        line = await reader.readline()
    finally:
        transport.close()
    popen.returncode = 0  # waited for by ``Monitored``, never by the Popen object
    try:
        pid = int(line)
    except ValueError:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(popen.pid, 0)
        forget_child(popen.pid)
        raise OSError(f"the run's monitor did not start (folder {art}{_full(art)})") from None
    return Monitored(pid, art, popen.pid, child=True)


def _full(art: Path) -> str:
    """``": its file system is full"`` when ``art``'s file system has no block or no inode
    left (the monitor cannot record its pid there, so it refuses to start the job); else ""."""
    try:
        st = os.statvfs(art)
    except OSError:
        return ""
    return ": its file system is full" if st.f_bavail == 0 or (st.f_files and st.f_favail == 0) else ""


def attach(pid: int, art: Path) -> Monitored:
    """A job started by an earlier runner: ``pid`` from ``runs.pid``, ``art`` its folder."""
    mon = monitor.monitor_pid(art) if monitor.monitor_alive(art) else None
    return Monitored(pid, art, mon, child=False)
