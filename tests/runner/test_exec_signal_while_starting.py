"""``watchkeeper exec``: a Ctrl-C or SIGTERM that arrives while the job is being started —
its run recorded, its pid not yet — reaches the job once its pid is recorded. It was only
remembered: the job ran to its end unasked, and the run was recorded as interrupted (found by
a helper: 3 of ~130 signals, in a window of a few milliseconds)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

from core.ledger import lifecycle
from core.ledger.connection import Ledger
from core.ledger.sql_store import SqlStore
from core.runner.execwrap import ExecWrapper
from core.spec.loader import LoadedJob
from core.spec.model import JobSpec
from core.spec.settings import Settings
from core.vocabulary import EndReason
from tests.kit.runs import add_run


def _dead(proc: subprocess.Popen, within: float) -> bool:
    deadline = time.monotonic() + within
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc.poll() is not None


async def test_a_signal_before_the_pid_is_recorded_reaches_the_job_once_it_is(tmp_path: Path):
    path = tmp_path / "wk.db"
    job = subprocess.Popen(["sleep", "30"], start_new_session=True)  # the job, being started
    try:
        with Ledger(path) as led:
            run_id = led.write(lambda c: add_run(c, "win", "spawned"))  # claimed, no pid yet
            store = SqlStore(led)
            wrapper = ExecWrapper(LoadedJob(JobSpec(name="win", command=["sleep", "30"]), "exec", None),
                                  Settings(ledger=path), record=None)
            run = store.run(run_id)
            assert run is not None and run.pid is None
            wrapper._forward(signal.SIGINT, store, [run])  # what the wrapper's signal handler calls
            await asyncio.sleep(0.2)
            assert job.poll() is None  # nothing to signal yet: no pid recorded
            assert led.write(lambda c: lifecycle.apply(c, run_id, 1, "spawned", "running", actor="test",
                                                       fields={"pid": job.pid, "pgid": job.pid}))
            deadline = time.monotonic() + 10
            while job.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert job.returncode == -signal.SIGINT
            assert wrapper._signalled == signal.SIGINT
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


async def test_a_run_that_never_got_a_pid_is_left_alone(tmp_path: Path):
    path = tmp_path / "wk.db"
    with Ledger(path) as led:
        run_id = led.write(lambda c: add_run(c, "win", "spawned"))
        store = SqlStore(led)
        wrapper = ExecWrapper(LoadedJob(JobSpec(name="win", command=["true"]), "exec", None),
                              Settings(ledger=path), record=None)
        run = store.run(run_id)
        assert run is not None
        wrapper._forward(signal.SIGTERM, store, [run])
        assert led.write(lambda c: lifecycle.apply(c, run_id, 1, "spawned", "failed", actor="test",  # start failed
                                                   reason_code=EndReason.SPAWN_FAILED))
        await asyncio.wait_for(asyncio.gather(*wrapper._forwarding), timeout=5)  # ends without a pid
