"""Nothing of a run outlives it, through a real runner (a child subreaper in its own process):
a process that leaves the run's group while its output drains, one that wipes its
environment before leaving, and a background process left in the group are all ended when
the run ends and recorded in its outcome; abandoning a run during ``verifying`` stops its
verify command."""

from __future__ import annotations

import json
import signal
import sys
import uuid

import psutil
import pytest

from core import actions
from tests.kit.runners import Runners
from tests.kit.sweep import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreaper is Linux")


@pytest.fixture
def rig(tmp_path):
    r = Runners(tmp_path)
    yield r
    r.close(kill_leftovers=False)


def sleepers(arg: str) -> list[psutil.Process]:
    """Live ``sleep <arg>`` processes (arg is unique to the test)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if p.info["cmdline"] == ["sleep", arg] and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


@pytest.fixture
def tag():
    """A unique fractional suffix for sleep arguments; whatever survives is ended by pid."""
    t = f"{uuid.uuid4().int % 10**6:06d}"
    yield t
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if cmd[:1] == ["sleep"] and len(cmd) == 2 and cmd[1].endswith("." + t):
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass


def findings(rig: Runners, run_id: int) -> dict[str, str]:
    (out,) = rig.query("SELECT handoff_findings FROM job_outcomes WHERE run_id = ?", (run_id,))
    return {f["code"]: f["message"] for f in json.loads(out["handoff_findings"] or "[]")}


@pytest.mark.slow
def test_what_leaves_the_group_late_or_without_markers_or_stays_in_it_is_ended_and_recorded(rig, tag):
    late, wiped, bg = f"3040.{tag}", f"2001.{tag}", f"3041.{tag}"
    rig.write(
        f'[[job]]\nname = "late-escape"\nonce = true\n'
        f'command = ["sh", "-c", "(sleep 0.5; exec setsid sleep {late}) & echo started; exit 0"]\n'
        f'[[job]]\nname = "wiped"\nonce = true\n'
        f'command = ["sh", "-c", "env -i setsid sleep {wiped} & echo started; exit 0"]\n'
        f'[[job]]\nname = "background"\nonce = true\n'
        f'command = ["sh", "-c", "sleep {bg} & echo started; exit 0"]\n')
    rig.start()
    for job in ("late-escape", "wiped", "background"):
        assert wait_for(lambda job=job: rig.query(
            "SELECT 1 FROM runs WHERE job = ? AND state NOT IN ('queued','spawned','running','verifying')", (job,)),
            timeout=30), job
    by_job = {r["job"]: r for r in rig.query("SELECT * FROM runs")}
    # Left the group half a second after the job exited, while its output drained.
    f = findings(rig, by_job["late-escape"]["id"])
    assert f"sleep {late}" in f.get("escaped_processes", ""), f
    # Left the group with its environment wiped: no markers, but adopted by the runner. Runs
    # ending together cannot tell whose it was; one of them records and ends it.
    escaped = [findings(rig, r["id"]).get("escaped_processes", "") for r in by_job.values()]
    assert sum(f"sleep {wiped}" in e for e in escaped) == 1, escaped
    # Stayed in the group: ended by the group kill, and said so.
    f = findings(rig, by_job["background"]["id"])
    assert f"sleep {bg}" in f.get("left_in_group", ""), f
    assert sleepers(late) == [] and sleepers(wiped) == [] and sleepers(bg) == []
    # Escapes are warnings; a process left in the group is recorded only.
    assert wait_for(lambda: rig.query(
        "SELECT 1 FROM escalations WHERE kind = 'escaped_processes' AND job = 'late-escape'"))
    assert by_job["background"]["state"] == "succeeded"


@pytest.mark.slow
def test_abandoning_a_run_while_it_verifies_stops_its_verify_command(rig, tag):
    arg = f"25.{tag}"
    rig.write(f'name = "checked"\nonce = true\ncommand = ["true"]\n'
              f'verify = [{{ command = "sleep {arg}", timeout = "30s" }}]\n')
    rig.start()
    assert wait_for(lambda: sleepers(arg), timeout=20)
    (run,) = rig.runs("checked")
    assert run["state"] == "verifying"
    res = actions.abandon(rig.led, run["id"], "tester")
    assert res.ok and "verify command still running is stopped by the runner" in res.message, res.message
    assert wait_for(lambda: not sleepers(arg), timeout=10), "the verify command ran on after the abandon"
    assert rig.runs("checked")[0]["state"] == "abandoned"


@pytest.mark.slow
def test_a_timeout_whose_sigterm_is_ignored_says_the_timeout_and_the_grace(rig):
    rig.write('name = "stubborn"\nonce = true\ntimeout = "1s"\ngrace = "1s"\n'
              'command = ["sh", "-c", "trap \'\' TERM; while :; do sleep 0.1; done"]\n')
    rig.start()
    assert wait_for(lambda: rig.query(
        "SELECT 1 FROM job_outcomes o JOIN runs r ON r.id = o.run_id WHERE r.job = 'stubborn'"
        " AND o.verdict_reason IS NOT NULL"), timeout=30)
    (row,) = rig.query("SELECT r.state, r.reason_code, r.reason, o.verdict_reason FROM runs r JOIN job_outcomes o"
                       " ON o.run_id = r.id WHERE r.job = 'stubborn'")
    assert (row["state"], row["reason_code"]) == ("timed_out", "timeout")
    assert row["reason"] == "timed out after 1s; SIGTERM ignored, killed 1s later"
    assert "timed out after 1s; SIGTERM ignored, killed 1s later" in row["verdict_reason"]
    assert "after 2s" not in row["verdict_reason"]
