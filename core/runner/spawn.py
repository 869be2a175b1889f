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
import subprocess
import time
from collections.abc import Mapping, Sequence
from functools import partial

from core.processes import forget_child, start_child


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
