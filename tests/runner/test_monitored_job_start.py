"""A job started under the per-run sh monitor (``core.monitor.SCRIPT``): the job's pid is reported at
once, the job runs in a session of its own with SIGINT and SIGQUIT at their defaults (not
ignored as a shell's background job's are), carries its run markers and not the monitor's,
and its exit status and output are recorded; through the background start (GNU ``env
--default-signal``) and through the foreground fallback used where that ``env`` is missing."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from core import monitor
from core.processes import restore_job_signals
from core.runner import spawn
from tests.kit import monitors

JOB = ("import os, sys\n"
       "ign = int([l for l in open('/proc/self/status') if l.startswith('SigIgn')][0].split()[1], 16)\n"
       "print(os.getsid(0) == os.getpid(), ign & 6, os.environ.get('WATCHKEEPER_RUN_ID'), 'WKM_RUN' in os.environ)\n"
       "print('oops', file=sys.stderr)\n"
       "sys.exit(3)\n")


@pytest.fixture
def pool():
    p = spawn.spawn_pool()
    yield p
    p.shutdown(wait=True)


@pytest.fixture
def started_in_the_background():
    """This process as a non-interactive shell's background job starts it (``watchkeeper run
    &`` in a script, or a CI step run that way): SIGINT and SIGQUIT ignored. Then the CLI's
    ``restore_job_signals`` runs, as ``main`` does. Put back as they were after the test."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGQUIT)}
    for sig in saved:
        signal.signal(sig, signal.SIG_IGN)
    restore_job_signals()
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_restoring_job_signals_undoes_an_inherited_ignore_and_keeps_a_handler():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGQUIT)}
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_IGN)
        restore_job_signals()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGQUIT) == signal.SIG_DFL

        def mine(*_):
            return None
        signal.signal(signal.SIGQUIT, mine)
        restore_job_signals()
        assert signal.getsignal(signal.SIGQUIT) is mine
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("background", [True, False], ids=["background-env", "foreground-fallback"])
async def test_a_job_under_its_monitor_is_its_own_session_with_default_signals(monkeypatch, tmp_path, background,
                                                                               pool, started_in_the_background):
    monitors.use(monkeypatch, "sh")  # the sh monitor's two ways (the C one: test_both_monitors_keep_one_protocol)
    if background and not monitor.background_env():
        pytest.skip("no env with --default-signal on this host")
    if not background:
        monkeypatch.setattr(monitor, "background_env", lambda: "")
    env = {**os.environ, "WATCHKEEPER_RUN_ID": "41", "WATCHKEEPER_RUNNER_ID": "r1"}
    mon = await spawn.start_monitored(pool, [sys.executable, "-c", JOB], cwd=None, env=env, art=tmp_path, cap=1 << 16)
    assert mon.monitor is not None and mon.pid != mon.monitor
    await mon.job_exit()
    assert await mon.status() == 3
    assert await mon.drained(10)
    assert monitor.finish_output(tmp_path, "stdout").head == b"True 0 41 False\n"
    assert monitor.finish_output(tmp_path, "stderr").head == b"oops\n"


async def test_a_run_lost_while_spawning_is_killed_before_it_has_a_session(tmp_path, pool):
    # The pid comes before the job's setsid (which waits for its output FIFOs): a kill at
    # that moment still ends the job.
    mon = await spawn.start_monitored(pool, ["sleep", "60"], cwd=None, env=dict(os.environ), art=tmp_path, cap=1 << 16)
    mon.kill()
    await mon.job_exit()
    assert monitor.decode_status(await mon.status()) == (None, 9)
    assert await mon.drained(10)
