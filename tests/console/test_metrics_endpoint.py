"""`watchkeeper run --metrics` serves /metrics during a real run, and Prometheus' own parser
(prometheus_client.parser) reads it: finished runs by job and state, a run in flight, the
open escalation of the failing job, the runner's heartbeat."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.kit.runners import FAST_TOML

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
JOBS = """
[[job]]
name = "quick-ok"
command = ["true"]
every = "1s"
owner = "ana"

[[job]]
name = "always-fails"
command = ["sh", "-c", "echo 'error: disk full' >&2; exit 3"]
every = "1s"
max_attempts = 1
owner = "ana"

[[job]]
name = "long-one"
command = ["sleep", "60"]
once = true
timeout = "2m"
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def _value(families, family, name, **labels):
    return next((s.value for s in families.get(family, []) if s.name == name
                 and all(s.labels.get(k) == v for k, v in labels.items())), None)


def test_metrics_are_scraped_during_a_real_run(tmp_path):
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "watchkeeper.toml").write_text(FAST_TOML)
    (specs / "jobs.toml").write_text(JOBS)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(specs), "--ledger",
                             str(tmp_path / "wk.db"), "--quiet", "--metrics", f"127.0.0.1:{port}"],
                            cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / "runner.log", "w"))
    try:
        deadline = time.monotonic() + 25
        m: dict[str, list] = {}
        while time.monotonic() < deadline:
            try:
                m = _scrape(url)
            except OSError:
                m = {}
            if ((_value(m, "watchkeeper_runs", "watchkeeper_runs_total", job="quick-ok", state="succeeded") or 0) >= 2
                    and (_value(m, "watchkeeper_runs", "watchkeeper_runs_total", job="always-fails",
                                state="failed") or 0) >= 1
                    and _value(m, "watchkeeper_escalations_open", "watchkeeper_escalations_open",
                               severity="critical", kind="failed")
                    and _value(m, "watchkeeper_live_runs", "watchkeeper_live_runs", state="running")):
                break
            time.sleep(0.3)
        else:
            raise AssertionError(f"metrics never showed the run: {m}\n{(tmp_path / 'runner.log').read_text()}")
        assert _value(m, "watchkeeper_ledger_read_ok", "watchkeeper_ledger_read_ok") == 1
        assert _value(m, "watchkeeper_runners_running", "watchkeeper_runners_running") == 1
        assert 0 <= _value(m, "watchkeeper_runner_heartbeat_age_seconds", "watchkeeper_runner_heartbeat_age_seconds") < 30
        assert _value(m, "watchkeeper_run_duration_seconds", "watchkeeper_run_duration_seconds_count",
                      job="quick-ok") >= 2
        assert _value(m, "watchkeeper_scheduler_start_lag_seconds",
                      "watchkeeper_scheduler_start_lag_seconds_count") >= 1
        assert _value(m, "watchkeeper_escalation_oldest_open_age_seconds",
                      "watchkeeper_escalation_oldest_open_age_seconds", severity="critical") >= 0
        labels = {k for samples in m.values() for s in samples for k in s.labels}
        assert labels <= {"job", "state", "severity", "kind", "sink", "result", "le"}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
