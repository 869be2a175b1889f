"""The runner as a child subreaper: processes a run started that left its process group
(setsid, double fork) are re-parented to the runner, found among its descendants by the
run's environment markers, ended and reaped — in a separate process, so the test session
itself never becomes a subreaper."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, subprocess, sys, time
from core.runner.reaper import Reaper
r = Reaper("runner-x")
sub = r.start()
env = dict(os.environ, WATCHKEEPER_RUN_ID="7", WATCHKEEPER_RUNNER_ID="runner-x")
other = dict(os.environ, WATCHKEEPER_RUN_ID="8", WATCHKEEPER_RUNNER_ID="runner-x")
# The job: a setsid'ed daemon and a double-forked one, then the leader exits at once.
leader = subprocess.Popen(["sh", "-c", "setsid sleep 60 & (sleep 60 &) ; exit 0"], env=env, start_new_session=True)
leader.wait()
bystander = subprocess.Popen(["sleep", "60"], env=other, start_new_session=True)  # another run's
time.sleep(0.3)
mine = [p.pid for p in r.leftovers(7)]
found, sig = r.end_run(7, grace=1.0)
alive = [pid for pid in mine if os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z"]
zombies = [pid for pid in mine if os.path.exists(f"/proc/{pid}")]
print(json.dumps({"subreaper": sub, "found": found, "mine": mine, "alive": alive, "zombies": zombies,
                  "bystander_alive": bystander.poll() is None}))
bystander.kill(); bystander.wait()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreaper is Linux")
def test_escaped_processes_are_adopted_found_ended_and_reaped():
    res = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert r["subreaper"] is True
    assert len(r["mine"]) == 2 and sorted(f["pid"] for f in r["found"]) == sorted(r["mine"])
    assert all("sleep" in f["cmd"] for f in r["found"])
    assert r["alive"] == [] and r["zombies"] == []  # ended and reaped, no zombie left behind
    assert r["bystander_alive"]  # another run's process is never touched
    for pid in r["mine"]:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


STRAYS = r"""
import json, os, subprocess, time
from core.runner.reaper import Reaper
r = Reaper("runner-x")
r.start()
subprocess.Popen(["sh", "-c", "(sleep 0.2 &) ; exit 0"], start_new_session=True).wait()
time.sleep(0.6)  # the adopted grandchild has exited: a zombie of ours nobody waits for
first = r.reap_strays()   # seen once: left alone (a waiter may be about to collect it)
second = r.reap_strays()  # still a zombie: nobody else will, so we do
left = [l for l in os.popen("ps -o pid=,stat= --ppid %d" % os.getpid()).read().splitlines() if "Z" in l]
print(json.dumps({"first": first, "second": second, "zombies_left": left}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreaper is Linux")
def test_adopted_orphans_that_exit_are_reaped_not_left_as_zombies():
    res = subprocess.run([sys.executable, "-c", STRAYS], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert r["first"] == 0 and r["second"] == 1 and r["zombies_left"] == []


def test_runs_ending_together_share_one_look_taken_after_they_asked():
    import asyncio

    from core.runner.reaper import Reaper
    from core.runner.strays import TreeScans

    class Counting(Reaper):
        def __init__(self) -> None:
            super().__init__("runner-under-test")
            self.calls = 0

        def tree_by_run(self):
            self.calls += 1
            return {"7": [], "calls": self.calls}

    async def main() -> tuple[list, int]:
        scans = TreeScans(Counting())
        first = asyncio.ensure_future(scans.after_now())
        await asyncio.sleep(0)  # the first look is under way
        rest = [asyncio.ensure_future(scans.after_now()) for _ in range(5)]
        got = await asyncio.gather(first, *rest)
        return [g["calls"] for g in got], scans.looks

    calls, looks = asyncio.run(main())
    # The five that asked while the first look ran share the second one, never the first.
    assert calls == [1, 2, 2, 2, 2, 2] and looks == 2
