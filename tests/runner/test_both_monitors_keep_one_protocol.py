"""The C monitor (``watchkeeper-monitor``) and the sh monitor it falls back to keep one
protocol (``core.monitor``): the same pid line, files, statuses, output cap, deadline and job
environment, so every reader works with either. Monitors alone, no runner; each test runs
under both, except where it says what only the C monitor promises."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from core import monitor
from tests.kit import monitors
from tests.kit.sweep import pid_alive, wait_for


@pytest.fixture(params=monitors.KINDS)
def kind(request, monkeypatch):
    monitors.use(monkeypatch, request.param)
    return request.param


def _start(art: Path, argv: list[str], *, cap: int = 8192, timeout: float = 0, grace: float = 0,
           env: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    monitor.prepare(art)
    proc = subprocess.Popen(monitor.argv(art, cap, argv, timeout=timeout, grace=grace), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            env=monitor.env(env if env is not None else dict(os.environ)))
    assert proc.stdout is not None
    job = int(proc.stdout.readline())
    return proc, job


def _sh(art: Path, cmd: str, **kw) -> tuple[subprocess.Popen, int]:
    return _start(art, ["sh", "-c", cmd], **kw)


def test_status_pids_and_output_are_recorded(tmp_path, kind):
    proc, job = _sh(tmp_path, "echo out; echo err >&2; exit 3")
    assert proc.wait(timeout=20) == 3
    assert monitor.exit_status(tmp_path) == 3 and monitor.monitor_pid(tmp_path) == proc.pid
    assert int((tmp_path / "job.pid").read_text().split()[0]) == job
    out, err = monitor.finish_output(tmp_path, "stdout"), monitor.finish_output(tmp_path, "stderr")
    assert (out.head, out.total, out.truncated) == (b"out\n", 4, False)
    assert (err.head, err.total) == (b"err\n", 4)
    assert not (tmp_path / "stdout.count").exists() and not (tmp_path / "stdout.ring").exists()


def test_death_by_signal_is_128_plus_the_signal(tmp_path, kind):
    proc, _ = _sh(tmp_path, "kill -TERM $$")
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    assert monitor.decode_status(monitor.exit_status(tmp_path)) == (None, signal.SIGTERM)


def test_a_program_that_cannot_run_exits_127_saying_why(tmp_path, kind):
    proc, _ = _start(tmp_path, [str(tmp_path / "no-such-program")])
    assert proc.wait(timeout=20) == 127
    assert b"no-such-program" in monitor.finish_output(tmp_path, "stderr").head


JOB = ("import os, sys\n"
       "ign = int([l for l in open('/proc/self/status') if l.startswith('SigIgn')][0].split()[1], 16)\n"
       "fds = sorted(int(f) for f in os.listdir('/proc/self/fd'))\n"
       "print(os.getpgid(0) == os.getpid(), ign & 6, os.environ.get('WATCHKEEPER_RUN_ID'),\n"
       "      os.environ.get('WATCHKEEPER_RUNNER_ID'), 'WKM_RUN' in os.environ, os.readlink('/proc/self/fd/0'),\n"
       "      fds[:3], len(fds))\n")


def test_the_job_leads_its_group_with_default_signals_its_markers_and_no_other_fds(tmp_path, kind):
    env = {**os.environ, "WATCHKEEPER_RUN_ID": "41", "WATCHKEEPER_RUNNER_ID": "r1"}
    proc, _ = _start(tmp_path, [sys.executable, "-c", JOB], env=env)
    assert proc.wait(timeout=20) == 0
    # Four fds: stdin, stdout, stderr and the listing's own.
    assert monitor.finish_output(tmp_path, "stdout").head == b"True 0 41 r1 False /dev/null [0, 1, 2] 4\n"


def test_output_over_the_cap_keeps_its_head_and_its_tail_in_order(tmp_path, kind):
    lines = b"".join(b"line %05d\n" % i for i in range(10000))  # 110000 bytes
    proc, _ = _start(tmp_path, [sys.executable, "-c", "import sys; sys.stdout.buffer.write("
                                "b''.join(b'line %05d\\n' % i for i in range(10000)))"], cap=1000)
    assert proc.wait(timeout=20) == 0
    assert monitor.over_cap(tmp_path, "stdout") and not monitor.over_cap(tmp_path, "stderr")
    out = monitor.finish_output(tmp_path, "stdout")
    assert (out.total, out.truncated) == (len(lines), True)
    assert (tmp_path / "stdout.log").read_bytes() == lines[:500] + monitor.marker(len(lines) - 1000) + lines[-500:]


def test_a_huge_printer_leaves_no_more_than_the_cap_on_disk_and_is_always_drained(tmp_path, kind):
    cap = 1 << 16
    proc, _ = _sh(tmp_path, "head -c 200000000 /dev/zero; echo end")
    assert proc.wait(timeout=60) == 0
    kept = sum(p.stat().st_size for p in tmp_path.iterdir() if p.name.startswith("stdout.") and p.is_file())
    assert kept <= cap + 64  # head + tail, and the count's one line
    out = monitor.finish_output(tmp_path, "stdout")
    assert out.total == 200000004 and out.tail.endswith(b"\0end\n")


def test_the_head_is_readable_while_the_job_runs(tmp_path, kind):
    gate = tmp_path / "gate"
    proc, _ = _sh(tmp_path, f"echo first; until [ -e {gate} ]; do sleep 0.02; done; echo second")
    try:
        assert wait_for(lambda: monitor.read_output(tmp_path, "stdout") == b"first\n", timeout=10)
        assert monitor.exit_status(tmp_path) is None and monitor.monitor_alive(tmp_path)
        # The monitor keeps the marker that tells it from the job's strays (core.runner.reaper).
        assert monitor.MARK in psutil.Process(proc.pid).environ()
    finally:
        gate.touch()
    assert proc.wait(timeout=20) == 0
    assert not monitor.monitor_alive(tmp_path)
    assert monitor.finish_output(tmp_path, "stdout").head == b"first\nsecond\n"


def test_the_deadline_ends_the_job_sigkill_after_the_grace(tmp_path, kind):
    proc, job = _sh(tmp_path, "trap '' TERM; echo start; sleep 60", timeout=0.3, grace=0.3)
    assert proc.wait(timeout=20) == 128 + signal.SIGKILL
    assert monitor.timed_out(tmp_path) and not pid_alive(job)


def test_a_job_that_ends_before_its_deadline_is_not_timed_out(tmp_path, kind):
    proc, _ = _sh(tmp_path, "exit 4", timeout=3600, grace=5)
    assert proc.wait(timeout=20) == 4
    assert not monitor.timed_out(tmp_path)


STARTER = ("import subprocess, sys\n"
           "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, start_new_session=True)\n"
           "print(p.stdout.readline().decode().strip(), flush=True)\n"
           "import time; time.sleep(60)\n")


def test_the_monitor_and_its_job_outlive_a_starter_killed_with_9(tmp_path, kind):
    gate = tmp_path / "gate"
    monitor.prepare(tmp_path)
    argv = monitor.argv(tmp_path, 8192, ["sh", "-c", f"until [ -e {gate} ]; do sleep 0.02; done; echo done; exit 6"])
    starter = subprocess.Popen([sys.executable, "-c", STARTER, *argv], stdout=subprocess.PIPE,
                               env=monitor.env(dict(os.environ)))
    assert starter.stdout is not None
    job = int(starter.stdout.readline())
    starter.kill()
    starter.wait()
    try:
        assert pid_alive(job) and monitor.monitor_alive(tmp_path)
    finally:
        gate.touch()  # a failed check must not leave the job waiting for its gate forever
    assert wait_for(lambda: monitor.exit_status(tmp_path) == 6, timeout=20)
    assert wait_for(lambda: not monitor.monitor_alive(tmp_path), timeout=20)
    assert monitor.finish_output(tmp_path, "stdout").head == b"done\n"


# -- what only the C monitor promises -------------------------------------------------------

def test_the_reported_pid_already_leads_its_group(tmp_path, monkeypatch):
    # The sh monitor reports the pid before the job's setsid; the C one makes the job's group
    # itself before it reports the pid, so a group kill at once never misses the job.
    monitors.use(monkeypatch, "c")
    proc, job = _sh(tmp_path, "sleep 60")
    os.killpg(job, signal.SIGKILL)
    assert proc.wait(timeout=20) == 128 + signal.SIGKILL


def test_the_monitor_is_found_alive_as_soon_as_its_pid_line_is_read(tmp_path, monkeypatch):
    # The C monitor makes its other files after the pid line (the runner waits for it), but
    # monitor.pid before it: a runner that crashed right after reading the pid leaves a run
    # the next runner must find still monitored, never orphan.
    monitors.use(monkeypatch, "c")
    for i in range(20):
        art = tmp_path / str(i)
        proc, job = _sh(art, "sleep 60")
        try:
            assert monitor.monitor_pid(art) == proc.pid and monitor.monitor_alive(art)
        finally:
            os.killpg(job, signal.SIGKILL)
            proc.wait(timeout=20)


def test_one_process_per_run_that_ignores_a_hangup(tmp_path, monkeypatch):
    monitors.use(monkeypatch, "c")
    gate = tmp_path / "gate"
    proc, job = _sh(tmp_path, f"until [ -e {gate} ]; do sleep 0.02; done")
    assert [p.pid for p in psutil.Process(proc.pid).children()] == [job]
    os.kill(proc.pid, signal.SIGHUP)
    gate.touch()
    assert proc.wait(timeout=20) == 0 and monitor.exit_status(tmp_path) == 0


def test_the_tail_part_is_readable_in_order_while_the_job_runs(tmp_path, monkeypatch):
    # The ring went round: what is shown while the run goes on is still the last bytes, in order.
    monitors.use(monkeypatch, "c")
    gate = tmp_path / "gate"
    proc, _ = _sh(tmp_path, f"seq 1 5000; until [ -e {gate} ]; do sleep 0.02; done", cap=1000)
    try:
        assert wait_for(lambda: monitor.read_output(tmp_path, "stdout").endswith(b"\n4999\n5000\n"), timeout=10)
        shown = monitor.read_output(tmp_path, "stdout")
        assert b"bytes omitted]\n" in shown and shown.startswith(b"1\n2\n3\n")
    finally:
        gate.touch()
    assert proc.wait(timeout=20) == 0
