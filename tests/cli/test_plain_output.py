"""Plain-text CLI output never carries escape sequences from untrusted text; spec errors in
dotted keys point at their own line."""

from __future__ import annotations

import pytest

from console.cli.escalations import escalation_line
from core.ledger.records import Escalation
from core.spec.loader import load_file


def test_tail_line_is_plain_and_greppable():
    line = escalation_line(Escalation(id=3, dedup_key="j:failed", severity="critical", job="j\x1b[2J", kind="failed",
                                      count=2, owner="research-lead@example.org", state="open", updated_at=0,
                                      reason="boom \x1b]52;c;aGVsbG8=\x07 [bold]x[/bold] \x9b31m"))
    assert "\x1b" not in line and "\x9b" not in line and "\x07" not in line
    assert " critical " in line and "research-lead@example.org" in line and "[bold]x[/bold]" in line


def test_dotted_key_error_names_its_line(tmp_path):
    p = tmp_path / "a.toml"
    p.write_text('[[job]]\nname = "ok"\ncommand = ["true"]\n\n[[job]]\nname = "bad-regex"\ncommand = ["true"]\n'
                 'expect.output = "("\n')
    errs = load_file(p).errors
    assert len(errs) == 1 and errs[0].line == 8 and errs[0].field == "expect.output"


@pytest.mark.slow
def test_run_prints_each_spec_error_once(tmp_path):
    # the CLI's own "spec error:" line, not a second copy as a log WARNING (even with --quiet)
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from core.ledger.connection import Ledger
    from tests.kit.harness import wait_for
    jobs, db = tmp_path / "jobs", tmp_path / "wk.db"
    jobs.mkdir()
    (jobs / "ok.toml").write_text('name = "ok"\ncommand = "true"\n')
    (jobs / "bad.toml").write_text('name = "bad"\ncommand = "true"\ntimeout = "soon"\n')
    wk = str(Path(sys.executable).parent / "watchkeeper")
    proc = subprocess.Popen([wk, "run", str(jobs), "--ledger", str(db), "--quiet"], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        def synced():  # the runner's first load is recorded (it has logged what it logs about it)
            if not db.exists():
                return False
            with Ledger(db) as led:
                return led.one("SELECT COUNT(*) AS n FROM escalations WHERE kind = 'spec_invalid'")["n"] > 0
        wait_for(synced, timeout=30)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert sum("timeout" in ln and "bad" in ln for ln in err.splitlines()) == 1, err
    assert "WARNING" not in err, err
