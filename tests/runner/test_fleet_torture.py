"""The torture workload on three hosts sharing one PostgreSQL ledger (``bench.fleet_torture``):
mixed runs while one host's runner is SIGKILLed mid-run (its whole namespace goes with it, as
a crashed machine) and the host comes back as a new host life, twice. Afterwards the ledger's
invariants hold, each slot ran once across the fleet, no run is stuck, ``host_down`` was
delivered once per kill and recovered once the host was back, and every outbox row was
delivered once (a retry after a failed attempt counted apart)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import hosts as kit
from tests.kit import postgres

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.pg, pytest.mark.soak,
              pytest.mark.skipif(kit.available() is not None, reason=f"no namespaces: {kit.available()}"),
              pytest.mark.skipif(postgres.available() is not None, reason=f"no PostgreSQL: {postgres.available()}")]


def test_three_hosts_through_two_host_crashes_keep_the_ledger_whole():
    proc = subprocess.run([sys.executable, "-m", "bench.fleet_torture", "--hosts", "3", "--kills", "2",
                           "--seconds", "60", "--seed", "7", "--json"], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    r = json.loads(proc.stdout)
    print(json.dumps({k: v for k, v in r.items() if k != "killed"}))  # the figures, with -s
    assert r["kills"] == 2 and r["hosts"] == 3
    assert len(r["runs_by_host"].keys() - {"-"}) == 3  # every host ran something
    assert r["orphaned_by_lease"] >= 2  # what each crash found mid-run was settled by another host
    assert r["violations"] == [], r["violations"]
