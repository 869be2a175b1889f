"""Three hosts, one PostgreSQL ledger: each host a runner in its own PID, mount and UTS
namespace with its own hostname and boot id (``tests.kit.hosts``), so process ids collide
across them as across real machines.

* each slot runs once across the fleet;
* SIGKILL one host's runner mid-run: its run is orphaned by lease by another host (nothing
  is killed from there), one ``host_down`` is delivered once, and the dead runner's pid —
  the same number as a live runner's on the other hosts — never keeps anything alive;
* a PostgreSQL restart mid-load loses and duplicates nothing.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from core.ledger.connection import Ledger
from tests.kit import hosts as kit
from tests.kit.harness import wait_for

pytestmark = [pytest.mark.pg, pytest.mark.soak,
              pytest.mark.skipif(kit.available() is not None, reason=f"no namespaces: {kit.available()}")]

SETTINGS = """heartbeat = 0.5
lease = 4.0
sweep_interval = 0.5
start_timeout = 15.0
shutdown_grace = 0.5

[[notify]]
type = "command"
name = "file"
command = [{py}, "-c", "import sys, json; open({out}, 'a').write(json.dumps(json.load(sys.stdin)) + chr(10))"]
"""

JOBS = """[[job]]
name = "tick"
command = ["true"]
every = "1s"

[[job]]
name = "long"
command = ["sleep", "300"]
once = true
host = "hb"
"""


def _rows(led: Ledger, sql: str, params: tuple = ()) -> list[dict]:
    return led.rows(sql, params)


def _sent(out: Path) -> list[dict]:
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def test_three_hosts_share_the_slots_and_report_a_dead_one_once(tmp_path, pg_server):
    url = pg_server.fresh_database()
    out = tmp_path / "sent.jsonl"
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "watchkeeper.toml").write_text(SETTINGS.format(py=json.dumps(sys.executable), out=repr(str(out))))
    (specs / "jobs.toml").write_text(JOBS)
    fleet = {n: kit.Host(n, specs, url, tmp_path / f"{n}.log") for n in ("ha", "hb", "hc")}
    led = Ledger(url)
    try:
        wait_for(lambda: len({r["hostname"] for r in _rows(led, "SELECT hostname FROM runners")}) == 3, timeout=60)
        long = wait_for(lambda: next(iter(_rows(led, "SELECT * FROM runs WHERE job = 'long' AND state = 'running'")),
                                     None), timeout=60)
        assert long["host"] == "hb"
        wait_for(lambda: len(_rows(led, "SELECT id FROM runs WHERE job = 'tick' AND state = 'succeeded'")) >= 8,
                 timeout=60)

        fleet["hb"].kill_runner()

        orphaned = wait_for(lambda: next(iter(_rows(
            led, "SELECT * FROM runs WHERE id = ? AND state = 'orphaned'", (long["id"],))), None), timeout=60)
        assert orphaned["reason"] == "lease_expired"  # judged by its lease: hb's processes are out of reach
        (move,) = _rows(led, "SELECT actor FROM events WHERE run_id = ? AND to_state = 'orphaned'", (long["id"],))
        owners = {r["id"]: r for r in _rows(led, "SELECT * FROM runners")}
        assert owners[move["actor"].removeprefix("runner:")]["hostname"] in ("ha", "hc")
        # every runner is pid 2 in its namespace (pid 1 is its shell): the dead one's pid is a
        # live runner's pid on the other hosts, and it kept nothing alive
        assert len({r["pid"] for r in owners.values()}) == 1

        wait_for(lambda: [m for m in _sent(out) if m["job"] == "(host hb)" and m["event"] == "opened"], timeout=60)
        time.sleep(3)  # several heartbeats of two surviving runners: still one
        down = [m for m in _sent(out) if m["job"] == "(host hb)" and m["kind"] == "host_down"]
        assert [m["event"] for m in down] == ["opened"]
        assert "hb" in down[0]["reason"] and str(long["id"]) in down[0]["reason"] and "long" in down[0]["reason"]

        before = len(_rows(led, "SELECT id FROM runs WHERE job = 'tick'"))
        pg_server.restart()
        wait_for(lambda: len(_rows(led, "SELECT id FROM runs WHERE job = 'tick' AND state = 'succeeded'"))
                 >= before + 5, timeout=90)
    finally:
        for host in fleet.values():
            host.end()
    ticks = _rows(led, "SELECT * FROM runs WHERE job = 'tick'")
    slots = Counter(r["slot"] for r in ticks)
    assert max(slots.values()) == 1  # each slot once across the fleet
    assert {r["host"] for r in ticks if r["host"]} <= {"ha", "hb", "hc"} and len({r["host"] for r in ticks}) >= 2
    ended = [r for r in ticks if r["state"] not in ("queued", "spawned", "running", "verifying")]
    assert {r["state"] for r in ended} <= {"succeeded", "orphaned"}
    outcomes = Counter(r["run_id"] for r in _rows(led, "SELECT run_id FROM job_outcomes WHERE job = 'tick'"))
    assert set(outcomes) == {r["id"] for r in ended} and max(outcomes.values()) == 1
    sent = Counter(m["escalation_id"] for m in _sent(out) if m["event"] == "opened")
    assert max(sent.values()) == 1  # every notification sent once by the fleet
    led.close()
