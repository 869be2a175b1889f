"""A re-attached run's monitor is not the runner's child: once it exits it may stay a zombie
until whoever adopted it reaps it (an init that reaps late, a parent that never does). Its
output is then fully drained, and the runner must not wait it out as if its drains still read
(the run's end was recorded seconds late, and after a search for escaped processes)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import psutil

from core import monitor
from core.runner import spawn
from tests.kit.sweep import wait_for

# The Popen object is kept: dropped at once, its __del__ polls the child, and a monitor that had
# already exited (a descheduled parent on a busy machine) was reaped there, so no zombie.
PARENT = "import subprocess, sys, time; child = subprocess.Popen(sys.argv[1:], start_new_session=True); time.sleep(60)"


def test_an_exited_monitor_left_a_zombie_counts_as_drained(tmp_path):
    monitor.prepare(tmp_path)
    # A parent that never reaps: the exited monitor stays a zombie in its own group.
    parent = subprocess.Popen([sys.executable, "-c", PARENT,
                               *monitor.argv(tmp_path, 8192, ["sh", "-c", "echo done"], timeout=60, grace=1)],
                              stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_for(lambda: monitor.exit_status(tmp_path) == 0, timeout=20)
        mon_pid = monitor.monitor_pid(tmp_path)
        assert mon_pid is not None
        assert wait_for(lambda: psutil.Process(mon_pid).status() == psutil.STATUS_ZOMBIE, timeout=20)
        job = int((tmp_path / "job.pid").read_text().split()[0])
        mon = spawn.Monitored(job, tmp_path, mon_pid, child=False)  # what a re-attaching runner holds
        assert asyncio.run(mon.drained(5.0)), "an exited monitor's zombie was taken for a drain still reading"
        assert (tmp_path / "stdout.log").read_text() == "done\n"
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
