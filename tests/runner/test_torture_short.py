"""The short torture run (the long one is `make torture`): mixed runs while the runner is
SIGKILLed or stopped cleanly and restarted, the write lock is held by another process and the artifacts folder
is tiny. Afterwards doctor is clean, nothing is lost and no job process survives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# Soak: 45 s on an idle 2-core machine (over a third of the 120-s timeout); `make torture` is
# the long version. Open defect: 5 late_result escalations after abandons (closing note).
@pytest.mark.soak
def test_short_torture_leaves_a_clean_ledger_and_no_processes():
    proc = subprocess.run([sys.executable, "-m", "bench.torture", "--runs", "60", "--kills", "4", "--seconds", "40",
                           "--seed", "7", "--json"], capture_output=True, text=True, timeout=110, cwd=ROOT)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    r = json.loads(proc.stdout)
    assert r["kills_survived"] + r["clean_stops"] >= 4 and r["clean_stops"] >= 2
    # Clean stops (SIGTERM, restart) leave runs going under their monitors; the next runner
    # re-attaches them; nothing is settled as interrupted and nothing pages critical for it.
    assert r["critical_from_clean_stops"] == 0 and r["interrupted_runs"] == 0
    # Runs that ended while no runner was alive are recorded as they ended, never orphaned.
    assert "orphaned" not in r["completed_while_no_runner_by_state"]
    assert r["queued_by_torture"] >= 60 and r["runs"] >= 60
    assert r["violations"] == 0, r["violation_list"]
    assert r["doctor_ok"]
    assert r["pruned_runs"] > 0 and r["doctor_ok_after_prune"]  # prune keeps the ledger valid
    assert r["leaked_processes"] == 0, r["leaked"]
    assert sum(r["by_state"].values()) == r["runs"]  # every run is in some terminal state
    assert proc.returncode == 0
