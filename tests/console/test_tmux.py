"""The console in a real terminal (tmux, 80×24): it draws, fits, and its ages tick — two
captures 3 s apart show different ages with nothing written to the ledger in between.

Runs the real ``watchkeeper console`` in a private tmux server (its own socket), so it
never touches the developer's tmux. Skipped when tmux is not installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.runners import end_leftover_jobs

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")]


def _capture(sock: str) -> str:
    return subprocess.run(["tmux", "-L", sock, "capture-pane", "-p", "-t", "wk"], capture_output=True, text=True,
                          check=True).stdout


def _wait(sock: str, cond, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        screen = _capture(sock)
        if cond(screen):
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"console never showed the expected screen:\n{screen}")
        time.sleep(0.2)


def test_console_in_tmux_at_80x24_ticks_its_ages(tmp_path: Path):
    path = tmp_path / "wk.db"
    now = time.time()
    with Ledger(path) as db:
        db.write(lambda c: cf.add_escalation(db, "tick-job", "failed", "critical", last_seen=now - 20,
                                             reason="tick-job exited 1"))
        # first_seen is an hour before last_seen in the fixture; make it 50 s ago instead
        db.write(lambda c: c.execute("UPDATE escalations SET first_seen = ?", (now - 50,)))
    sock = f"wk-console-test-{os.getpid()}"
    exe = Path(sys.executable).parent / "watchkeeper"
    cmd = f"{exe} console --ledger {path} --read-only --refresh 0.2"
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "wk", "-x", "80", "-y", "24", cmd], check=True,
                   env={**os.environ, "TERM": "xterm-256color"})
    try:
        def drawn(screen: str) -> bool:  # rows, preview and footer all painted
            lines = screen.rstrip("\n").splitlines()
            return "tick-job" in screen and "exited 1" in screen and bool(lines) and "Help" in lines[-1]

        first = _wait(sock, drawn)
        lines = first.rstrip("\n").splitlines()
        assert len(lines) <= 24 and all(len(ln) <= 80 for ln in lines)
        assert "Escalations" in lines[1] and "Help" in lines[-1]  # view bar on top, footer at the bottom
        row = next(ln for ln in lines if "tick-job" in ln)
        age1 = re.search(r"(\d+)s", row.split("tick-job", 1)[1]).group(0)
        start = time.monotonic()
        while time.monotonic() - start < 3.0:  # the two captures are 3 s apart
            time.sleep(0.1)
        second = _capture(sock)
        row2 = next(ln for ln in second.splitlines() if "tick-job" in ln)
        age2 = re.search(r"(\d+)s", row2.split("tick-job", 1)[1]).group(0)
        assert age1 != age2, f"age did not tick: {age1!r} then {age2!r}"
        assert int(age2[:-1]) - int(age1[:-1]) in (2, 3, 4)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_up_stopped_by_a_signal_records_a_clean_stop(tmp_path: Path, sig: str):
    """``systemctl stop`` (SIGTERM) or a closed SSH session (SIGHUP) on ``up``: the console
    closes and the runner's stop is recorded with the signal's name, its running job left to
    its monitor — not a process ended mid-flight, found gone later as after a crash."""
    import signal as signals

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "slow.toml").write_text('name = "slow"\ncommand = ["sleep", "30"]\nonce = true\n')
    path = tmp_path / "wk.db"
    sock = f"wk-up-signal-{os.getpid()}-{sig}"
    exe = Path(sys.executable).parent / "watchkeeper"
    pid_file = tmp_path / "up.pid"
    # `exec` keeps the pid the shell wrote: the test signals exactly the process it started
    cmd = f"echo $$ > {pid_file}; exec {exe} up {specs} --ledger {path} --refresh 0.2"
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "wk", "-x", "80", "-y", "24", "sh", "-c", cmd],
                   check=True, env={**os.environ, "TERM": "xterm-256color"})
    try:
        _wait(sock, lambda screen: "runner up" in screen)
        with Ledger(path) as db:
            deadline = time.monotonic() + 30
            while not db.query("SELECT 1 FROM runs WHERE job = 'slow' AND state = 'running'"):
                assert time.monotonic() < deadline, "the job never started"
                time.sleep(0.1)
        up = int(pid_file.read_text())
        os.kill(up, getattr(signals, sig))
        deadline = time.monotonic() + 30
        while _alive(up):
            assert time.monotonic() < deadline, f"up did not exit after {sig}"
            time.sleep(0.1)
        with Ledger(path) as db:
            stopped = [json.loads(r["detail"]) for r in db.query("SELECT detail FROM events WHERE kind = 'runner_stopped'")]
            assert [d["stop_reason"] for d in stopped] == [sig], stopped
            assert len(stopped[0]["left_running"]) == 1
            run = db.query("SELECT state, pid FROM runs WHERE job = 'slow'")[0]
        assert run["state"] == "running" and _alive(run["pid"])  # left to its monitor
        assert end_leftover_jobs(path) >= 1 and wait_gone(run["pid"])  # found by its runner's id
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
        if path.exists():  # the job this test started, whatever happened to its runner
            end_leftover_jobs(path)


def wait_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
