"""`watchkeeper logs RUN_ID -f` follows a running job's output live (each line shows while
the job still runs, waiting on the next), then prints the run's verdict line; escape
sequences in the output are shown escaped."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kit.sweep import wait_for

WK = str(Path(sys.executable).parent / "watchkeeper")


class Follower:
    """``watchkeeper logs -f`` as a subprocess, read line by line without blocking."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([WK, "logs", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.buf = b""

    def until(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} never shown; got {self.buf!r}"
            if self.sel.select(timeout=left):
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                self.buf += chunk
        assert text.encode() in self.buf, self.buf
        return self.buf.decode()


@pytest.mark.slow
def test_logs_follow_shows_each_line_while_the_job_runs_then_the_verdict(rig, tmp_path):
    gates = [tmp_path / f"gate{i}" for i in range(3)]
    steps = "; ".join(f"printf 'tick {i}\\\\033[2J\\\\n'; until [ -e {g} ]; do sleep 0.05; done" for i, g in enumerate(gates))
    rig.write(f'name = "chatty"\nonce = true\ncommand = ["sh", "-c", "{steps}; exit 3"]\n')
    rig.start()
    assert wait_for(lambda: rig.query("SELECT 1 FROM runs WHERE state = 'running'"), timeout=60)
    run_id = rig.query("SELECT id FROM runs")[0]["id"]
    f = Follower(str(run_id), "-f", "--ledger", str(rig.db))
    try:
        for i, gate in enumerate(gates):
            shown = f.until(f"tick {i}")  # shown while the job waits for this gate: live
            assert rig.query("SELECT state FROM runs")[0]["state"] == "running"
            gate.touch()
        out = f.until("failed")
        assert f.proc.wait(timeout=30) == 0
    finally:
        if f.proc.poll() is None:
            f.proc.kill()
    assert "\x1b" not in out and "\\x1b[2J" in shown  # escaped, never obeyed
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"run {run_id}:") and "exit 3" in last


def test_logs_of_a_missing_run_is_one_line(tmp_path):
    from core.ledger.connection import Ledger

    Ledger(tmp_path / "wk.db").close()
    res = subprocess.run([WK, "logs", "99", "--ledger", str(tmp_path / "wk.db")], capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.strip() == "error: no run 99 (see `watchkeeper runs`)"


def test_logs_of_a_run_that_wrote_only_stderr_says_where_its_output_is(tmp_path):
    db = str(tmp_path / "wk.db")
    subprocess.run([WK, "exec", "--job", "quiet", "--ledger", db, "--output", "never", "--", "sh", "-c",
                    "echo 'only on stderr' >&2"], cwd=tmp_path, capture_output=True, timeout=60, check=True)
    res = subprocess.run([WK, "logs", "1", "--ledger", db], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout == ""
    assert res.stderr.strip() == "[watchkeeper: run 1 wrote nothing to stdout; 15 byte(s) on stderr (--stderr)]"
    err = subprocess.run([WK, "logs", "1", "--stderr", "--ledger", db], capture_output=True, text=True, timeout=60)
    assert err.stdout == "only on stderr\n" and err.stderr == ""
