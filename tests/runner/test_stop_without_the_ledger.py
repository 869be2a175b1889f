"""A runner told to stop while its PostgreSQL ledger does not answer still stops: it waits
``shutdown_grace`` (at least ``STOP_LEDGER_WAIT_S``) for the ledger, then ends, saying that
the stop is not recorded (it used to retry the last heartbeat forever and never exit)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from core.ledger.connection import Ledger
from core.ledger.dialect import close_pools
from tests.kit.runners import FAST_TOML, PY, ROOT
from tests.kit.sweep import wait_for

pytestmark = pytest.mark.slow


def test_a_stop_ends_while_the_ledger_is_down_and_says_it_is_unrecorded(pg_server, tmp_path):
    url = pg_server.fresh_database()
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "watchkeeper.toml").write_text(FAST_TOML)
    (specs / "jobs.toml").write_text('[[job]]\nname = "tick"\ncommand = ["true"]\nevery = "1s"\n')
    log = tmp_path / "runner.log"
    # PYTHONFAULTHANDLER: a runner that does not exit is sent SIGABRT below, and its log then
    # shows where each of its threads waits.
    proc = subprocess.Popen([PY, "-m", "console.cli", "run", str(specs), "--ledger", url, "--quiet"], cwd=ROOT,
                            start_new_session=True, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    try:
        with Ledger(url) as led:
            wait_for(lambda: led.scalar("SELECT COUNT(*) FROM runs WHERE state = 'succeeded'") >= 1, timeout=60)
        close_pools()
        pg_server.stop_only()
        try:
            proc.send_signal(signal.SIGTERM)
            began = time.monotonic()
            try:
                proc.wait(timeout=90)  # shutdown_grace 0.5 s → 5 s for the ledger, plus a pool wait
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGABRT)
                proc.wait(timeout=10)
                pytest.fail(f"the runner did not exit within 90 s of its stop:\n{log.read_text()}")
            took = time.monotonic() - began
        finally:
            pg_server.start_only()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = log.read_text()
    assert proc.returncode == 0 and took < 60, (took, said)
    assert "did not answer" in said and "this stop is not recorded" in said, said
    assert "Traceback" not in said, said
    assert "runner stopped (SIGTERM), not recorded in the ledger" in said, said
    pg_server.drop_database(url)
