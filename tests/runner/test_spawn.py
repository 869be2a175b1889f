"""Starting and waiting for a child on the runner's loop: pidfd path and thread fallback."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from core.runner import spawn


async def _run(argv, stdin: bytes | None = None):
    child = await spawn.start(argv, cwd=None, env=os.environ, stdin_pipe=stdin is not None)
    if stdin is not None:
        child.stdin.write(stdin)
        await child.stdin.drain()
        child.stdin.close()
    out = await child.stdout.read()
    err = await child.stderr.read()
    code = await child.wait()
    child.close()
    return code, out, err, child


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "thread-fallback"])
async def test_exit_code_signal_and_output(monkeypatch, pidfd):
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    code, out, err, child = await _run([sys.executable, "-c", "import sys; print('hi'); "
                                        "print('oops', file=sys.stderr); sys.exit(7)"])
    assert (code, out, err) == (7, b"hi\n", b"oops\n") and child.returncode == 7
    code, *_ = await _run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert code == -9


async def test_stdin_and_own_process_group():
    code, out, _, child = await _run([sys.executable, "-c", "import os, sys; "
                                      "print(os.getpgid(0) == os.getpid(), sys.stdin.read())"], stdin=b"payload")
    assert code == 0 and out == b"True payload\n"


async def test_several_loops_in_one_process():
    # Each loop waits for its own children: nothing process-global to fight over.
    def in_thread() -> int:
        return asyncio.run(_run([sys.executable, "-c", "raise SystemExit(3)"]))[0]
    results = await asyncio.gather(*(asyncio.to_thread(in_thread) for _ in range(3)),
                                   _run([sys.executable, "-c", "raise SystemExit(4)"]))
    assert results[:3] == [3, 3, 3] and results[3][0] == 4


async def test_missing_program_raises():
    with pytest.raises(OSError):
        await spawn.start(["/nonexistent/prog"], cwd=None, env=os.environ)
