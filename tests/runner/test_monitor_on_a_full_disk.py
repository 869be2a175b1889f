"""A full artifacts disk never loses a run's pids or exit status, and never stops a run from
starting: the ``exit`` line is made blank before the job can end (by ``prepare`` for the sh
monitor, by the C monitor itself once it printed the pid) and the status is written over it
without a new disk block; on a disk already full the run starts
all the same (its capture degrades, its monitor passes the status on as its own)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess

import pytest

from core import monitor
from tests.kit import monitors
from tests.kit.sweep import wait_for


@pytest.fixture(params=monitors.KINDS)
def kind(request, monkeypatch):
    monitors.use(monkeypatch, request.param)
    return request.param


def test_the_exit_line_is_blank_while_the_job_runs_and_the_status_needs_no_new_block(tmp_path, kind):
    # sh: ``prepare`` made the blank; C: the monitor made it just after printing the pid.
    monitor.prepare(tmp_path)
    proc = subprocess.Popen(monitor.argv(tmp_path, 8192, ["sleep", "60"], timeout=120, grace=1),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    job = int(proc.stdout.readline())
    try:
        assert wait_for(lambda: os.path.exists(tmp_path / "exit")
                        and (tmp_path / "exit").stat().st_size == len(monitor.BLANK), timeout=20)
        assert monitor.exit_status(tmp_path) is None
    finally:
        os.kill(job, signal.SIGTERM)  # the sh job may not lead its group yet
        assert proc.wait(timeout=20) == 143
    assert monitor.exit_status(tmp_path) == 143
    assert (tmp_path / "exit").stat().st_size == len(monitor.BLANK)  # written over, not grown


def test_a_real_monitor_writes_its_lines_over_the_blanks(tmp_path, kind):
    monitor.prepare(tmp_path)
    proc = subprocess.Popen(monitor.argv(tmp_path, 8192, ["sh", "-c", "exit 7"], timeout=60, grace=1),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    job = int(proc.stdout.readline())
    assert proc.wait(timeout=20) == 7
    assert monitor.exit_status(tmp_path) == 7 and monitor.monitor_pid(tmp_path) == proc.pid
    assert int((tmp_path / "job.pid").read_text().split()[0]) == job


def test_a_disk_already_full_still_lets_the_run_start(tmp_path, monkeypatch, kind):
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        if data == monitor.BLANK:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)
    monkeypatch.setattr(monitor.os, "write", full)
    monitor.prepare(tmp_path)  # no error: the run starts, only the blank lines are missing
    # The sh monitor's FIFOs are made all the same; the C one has its own pipes.
    assert all((tmp_path / f).exists() == (kind == "sh") for f in monitor.FIFOS)
    assert monitor.exit_status(tmp_path) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tiny tmpfs needs root")
def test_a_monitor_on_a_disk_already_full_still_records_its_pids_and_status(tmp_path, kind):
    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)]).returncode != 0:
        pytest.skip("tmpfs cannot be mounted here")
    try:
        fd = os.open(full / "filler", os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"x" * 4096)
        os.close(fd)
        art = full / "run"
        monitor.prepare(art)  # the blank lines cannot be written: no error
        proc = subprocess.Popen(monitor.argv(art, 8192, ["sh", "-c", "echo hi; exit 5"], timeout=60, grace=1),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        job = int(proc.stdout.readline())
        assert proc.wait(timeout=20) == 5
        assert monitor.exit_status(art) == 5 and monitor.exit_time(art) is not None
        assert monitor.monitor_pid(art) == proc.pid
        assert (art / "job.pid").is_symlink() and int(os.readlink(art / "job.pid")) == job
    finally:
        subprocess.run(["umount", "-l", str(full)])


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tiny tmpfs needs root")
def test_with_no_inode_left_the_c_monitor_refuses_to_start_the_job(tmp_path, monkeypatch):
    # Not even a symlink fits: without monitor.pid a runner taking over could not tell the
    # run is monitored, so the start fails (a spawn failure) instead of a job nobody can follow.
    import asyncio

    from core.runner import spawn
    monitors.use(monkeypatch, "c")
    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=8", "tmpfs", str(full)]).returncode != 0:
        pytest.skip("tmpfs cannot be mounted here")
    try:
        art = full / "run"
        art.mkdir()
        marker = tmp_path / "ran"
        with contextlib.suppress(OSError):
            for i in range(100):
                (full / f"f{i}").touch()

        async def start() -> None:
            pool = spawn.spawn_pool()
            try:
                await spawn.start_monitored(pool, ["touch", str(marker)], cwd=None, env=dict(os.environ), art=art,
                                            cap=8192)
            finally:
                pool.shutdown()
        with pytest.raises(OSError, match="its file system is full"):
            asyncio.run(start())
        assert not marker.exists()  # the job never ran
    finally:
        subprocess.run(["umount", "-l", str(full)])
