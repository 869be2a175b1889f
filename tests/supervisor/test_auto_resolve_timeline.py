"""Auto-resolve respects the timeline, through a real runner: with concurrency 2, a success
that started before a failure ended never resolves that failure's escalation; a success that
started after it does."""

from __future__ import annotations

import json
import sys

import pytest

from core.ledger.connection import Ledger
from core.ledger.runs import trigger
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs

PY = sys.executable


@pytest.mark.slow
def test_overlapping_runs_never_resolve_each_others_escalations(tmp_path):
    seen, flag = tmp_path / "seen", tmp_path / "go"
    # 1st run: waits for the flag, then succeeds; 2nd: fails at once; later ones succeed.
    code = (f"import os, sys, time\nd = {str(seen)!r}\nos.makedirs(d, exist_ok=True)\nn = len(os.listdir(d))\n"
            "open(os.path.join(d, os.environ['WATCHKEEPER_RUN_ID']), 'w').close()\n"
            f"if n == 0:\n    while not os.path.exists({str(flag)!r}):\n        time.sleep(0.05)\n    sys.exit(0)\n"
            "sys.exit(1 if n == 1 else 0)\n")
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "pair"\ncommand = [{json.dumps(PY)}, "-c", {json.dumps(code)}]\n'
                       'concurrency = 2\ntimeout = "60s"\n')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM jobs WHERE name = 'pair'"))
        with Ledger(s.ledger) as led:
            slow = trigger(led, "pair", actor="operator:test")
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM runs WHERE id = ? AND state = 'running'", (slow,)))
        with Ledger(s.ledger) as led:
            failing = trigger(led, "pair", actor="operator:test")
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM escalations WHERE job = 'pair' AND latest_run_id = ?",
                               (failing,)))
        flag.touch()
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM job_outcomes WHERE run_id = ? AND judged_by IS NOT NULL",
                               (slow,)))
        (esc,) = query(s.ledger, "SELECT * FROM escalations WHERE job = 'pair'")
        assert esc["state"] == "open", "a run that overlapped the failure resolved it"
        with Ledger(s.ledger) as led:
            later = trigger(led, "pair", actor="operator:test")
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM escalations WHERE job = 'pair' AND state = 'resolved'"))
    (ev,) = query(s.ledger, "SELECT run_id FROM events WHERE kind = 'escalation_resolved'")
    assert ev["run_id"] == later
