"""A runner's heartbeat is its own small transaction on its own connection, never queued
behind the writer's group commits: while the writer thread is stuck in a long transaction
(on PostgreSQL, a group that serialization conflicts keep running again), the heartbeat and
the leases of the runner's runs still move, so other hosts never take it for down."""

from __future__ import annotations

import threading
import time

import pytest

from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs


@pytest.mark.pg
@pytest.mark.slow
def test_the_heartbeat_goes_on_while_the_writer_is_stuck(tmp_path, pg_server):
    url = pg_server.fresh_database()
    specs = tmp_path / "jobs"
    write_specs(specs, 'name = "long"\ncommand = ["sleep", "30"]\nonce = true\n')
    s = fast_settings(tmp_path, ledger=url)
    with RunnerThread(specs, s) as rt:
        wait_for(lambda: query(url, "SELECT 1 FROM runs WHERE job = 'long' AND state = 'running'"))
        release = threading.Event()
        stuck = rt.runner.writer.submit(lambda conn: release.wait(30))  # the writer's transaction hangs
        try:
            time.sleep(s.heartbeat)  # the writer has taken it up
            beat = query(url, "SELECT heartbeat_at FROM runners")[0]["heartbeat_at"]
            lease = query(url, "SELECT lease_until FROM runs WHERE job = 'long'")[0]["lease_until"]
            wait_for(lambda: query(url, "SELECT heartbeat_at FROM runners")[0]["heartbeat_at"] > beat + s.heartbeat,
                     timeout=max(10, 6 * s.heartbeat))
            assert query(url, "SELECT lease_until FROM runs WHERE job = 'long'")[0]["lease_until"] > lease
        finally:
            release.set()
            stuck.result(10)
