"""Circuit breaker: trips after N final failures in the window, skips are recorded, a
half-open trial closes it, and the state survives a restart."""

from __future__ import annotations

import sys

import pytest

from core.ledger import breaker
from core.ledger.connection import Ledger
from core.ledger.jobs import sync_jobs
from core.spec.loader import load_dir
from core.supervisor.policy.breaker import BREAKER
from tests.kit.harness import RunnerThread, fast_settings, query, terminal_runs, wait_for, write_specs
from tests.kit.runs import add_run

PY = sys.executable


@pytest.mark.slow
def test_breaker_trips_skips_and_half_open_trial_closes(tmp_path):
    count = tmp_path / "count"
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "partner"
command = ["{PY}", "-c", "import os, sys; p = r'{count}'; n = int(open(p).read()) if os.path.exists(p) else 0; open(p, 'w').write(str(n + 1)); sys.exit(1 if n < 3 else 0)"]
every = "1s"
[breaker]
failures = 3
window = "1m"
cooldown = "3s"
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM events WHERE kind = 'breaker_open'"), timeout=20)
        opened = query(s.ledger, "SELECT breaker_state, breaker_until FROM jobs WHERE name = 'partner'")[0]
        assert opened["breaker_state"] == "open"
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM events WHERE kind = 'breaker_closed'"), timeout=20)
    kinds = [e["kind"] for e in query(s.ledger, "SELECT kind FROM events WHERE kind LIKE 'breaker_%' OR"
                                              " kind = 'skipped_breaker_open' ORDER BY id")]
    assert kinds[0] == "breaker_open"
    assert kinds.count("skipped_breaker_open") >= 1
    assert kinds.index("breaker_half_open") < kinds.index("breaker_closed")
    runs = terminal_runs(s.ledger, "partner")
    # no run started while the breaker was open
    opened_at = query(s.ledger, "SELECT at FROM events WHERE kind = 'breaker_open'")[0]["at"]
    half = query(s.ledger, "SELECT at FROM events WHERE kind = 'breaker_half_open'")[0]["at"]
    assert not [r for r in runs if r["started_at"] and opened_at < r["started_at"] < half - 0.01]
    esc = query(s.ledger, "SELECT * FROM escalations WHERE kind = 'circuit_open'")
    assert len(esc) == 1 and esc[0]["state"] == "resolved"


@pytest.mark.slow
def test_breaker_state_survives_restart(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "down"\ncommand = ["{PY}", "-c", "raise SystemExit(1)"]\nevery = "1s"\n'
                       '[breaker]\nfailures = 2\nwindow = "1m"\ncooldown = "1h"\n')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM jobs WHERE breaker_state = 'open'"), timeout=20)
    n_runs = len(terminal_runs(s.ledger, "down"))
    with RunnerThread(specs, s):
        wait_for(lambda: len(query(s.ledger, "SELECT 1 FROM events WHERE kind = 'skipped_breaker_open'")) >= 3,
                 timeout=20)
    assert len(terminal_runs(s.ledger, "down")) == n_runs
    assert query(s.ledger, "SELECT breaker_state FROM jobs")[0]["breaker_state"] == "open"


def test_retried_transient_failures_do_not_trip(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "j"\ncommand = ["{PY}", "-c", "pass"]\nevery = "1m"\nmax_attempts = 3\n')
    with Ledger(tmp_path / "wk.db") as led:
        res = load_dir(specs)
        sync_jobs(led, res)
        spec = res.jobs["j"].spec

        def seed(conn):
            for attempt in (1, 2):
                add_run(conn, "j", "failed", lineage="L", attempt=attempt, slot="s", trigger="schedule", ended_at=1e12)
            add_run(conn, "j", "queued", lineage="L", attempt=3, slot="s", trigger="retry")
        led.write(seed)
        rid = led.one("SELECT id FROM runs WHERE attempt = 2")[0]
        assert led.write(lambda c: breaker.record(c, spec, rid, "failed", actor="t", words=BREAKER, now=1e12)) is None
        assert breaker.recent_failures(led.conn, "j", 60, 1e12) == 0


def test_breaker_reason_says_how_each_run_failed_and_keeps_them_after_a_failed_trial(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "j"\ncommand = ["{PY}", "-c", "pass"]\nevery = "1m"\n'
                       '[breaker]\nfailures = 2\nwindow = "1h"\ncooldown = "10m"\n')
    with Ledger(tmp_path / "wk.db") as led:
        res = load_dir(specs)
        sync_jobs(led, res)
        spec = res.jobs["j"].spec
        ver = '{"ok": false, "checks": [{"name": "expect_file", "ok": false, "detail": "out/report.csv is missing"}]}'

        def failed_run(at: float, exit_code: int, verification: str | None, stderr: str = "") -> int:
            def tx(conn):
                return add_run(conn, "j", "failed", lineage=f"L{at}", slot=f"s{at}", trigger="schedule", ended_at=at,
                               end={"exit_code": exit_code},
                               outcome={"exit_code": exit_code, "stderr_head": stderr, "verification": verification})
            rid = led.write(tx)
            led.write(lambda c: breaker.record(c, spec, rid, "failed", actor="t", words=BREAKER, now=at))
            return rid

        t = 1e9
        a = failed_run(t, 0, ver)
        b = failed_run(t + 1, 1, None, "ERROR: disk full")
        esc = led.one("SELECT reason FROM escalations WHERE kind = 'circuit_open'")["reason"]
        assert f"run {a} failed verification (expect_file: out/report.csv is missing; exit 0)" in esc, esc
        assert f"run {b} failed (exit 1: ERROR: disk full)" in esc, esc
        assert led.write(lambda c: breaker.admit(c, spec, "s2", actor="t", now=t + 3600))  # half-open trial
        trial = failed_run(t + 3601, 0, ver)
        esc = led.one("SELECT reason FROM escalations WHERE kind = 'circuit_open'")["reason"]
        assert esc.startswith(f"half-open trial run {trial} failed verification (expect_file"), esc
        assert f"first opened after run {b} failed (exit 1: ERROR: disk full), run {a} failed verification" in esc, esc
