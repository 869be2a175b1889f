"""CLI tables a person reads: ``escalations`` (and ``tail`` on a terminal) start with a
heading and keep every column under it however long an owner or job is; ``show`` gives the
verdict as a sentence and the verification and handoff as key: value lines."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time

import pytest

from core.ledger.connection import Ledger
from core.supervisor import supervisor
from tests.kit.cli import WK, wk
from tests.kit.supervisor import add_job, new_run, to_verifying

LONG_OWNER = "platform-operations-oncall-rotation@example.org"

def _ledger(tmp_path):
    db = tmp_path / "wk.db"
    with Ledger(db) as led:
        for name, owner in (("nightly-backup-of-the-orders-database", LONG_OWNER), ("sync", "ana")):
            add_job(led, tmp_path, name, owner=owner)
            rid = new_run(led, name)
            to_verifying(led, rid, exit_code=4, stderr="boom\n")
            supervisor.settle(led, rid)
    return db

def _aligned(header: str, rows: list[str]) -> None:
    # The columns the heading has (a narrow terminal's short form has SEV and N, no OWNER).
    for col in [c for c in header.split() if c not in ("TIME", "(UTC)", "ID")]:
        at = header.index(f" {col}") + 1
        for row in rows:
            assert row[at - 1] == " " and row[at] != " ", (col, row)  # each value starts under its heading

def test_escalations_have_a_heading_and_a_long_owner_keeps_the_columns(tmp_path):
    db = _ledger(tmp_path)
    res = wk("escalations", "--ledger", str(db), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    header, *rows = res.stdout.splitlines()
    assert header.split() == ["TIME", "(UTC)", "ID", "SEVERITY", "JOB", "KIND", "COUNT", "OWNER", "STATE", "REASON"]
    assert len(rows) == 2 and any("platform-operations-oncal…" in r for r in rows)
    _aligned(header, rows)

@pytest.mark.slow
def test_tail_on_a_terminal_starts_with_the_heading_and_keeps_the_columns(tmp_path):
    db = _ledger(tmp_path)
    main, sub = pty.openpty()
    proc = subprocess.Popen([WK, "tail", "--since", "1h", "--ledger", str(db)], stdout=sub, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, start_new_session=True, cwd=tmp_path,
                            env={**os.environ, "NO_COLOR": "1"})
    os.close(sub)
    out = b""
    try:
        deadline = time.monotonic() + 30
        while out.count(b"\n") < 3 and time.monotonic() < deadline:
            if select.select([main], [], [], 0.5)[0]:
                out += os.read(main, 65536)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        os.close(main)
    header, *rows = out.decode().replace("\r", "").splitlines()[:3]
    assert header.startswith("TIME (UTC)") and len(rows) == 2
    _aligned(header, rows)

def test_show_says_the_verdict_and_lists_verification_and_handoff_fields(tmp_path):
    db = tmp_path / "wk.db"
    (tmp_path / "out.txt").write_text("report\n")
    with Ledger(db) as led:
        add_job(led, tmp_path, "report", verify=["test -s out.txt"], cwd=str(tmp_path))
        rid = new_run(led, "report")
        to_verifying(led, rid, exit_code=0, handoff={"status": "success", "result": {"rows": 41},
                                                     "confidence": 0.9, "files_changed": ["out.txt"]})
        supervisor.settle(led, rid)
    res = wk("show", str(rid), "--ledger", str(db), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    verdict = next(ln for ln in lines if ln.startswith("verdict: "))
    assert verdict.startswith("verdict: noted, not escalated (first_success, info): first-ever success of report")
    at = lines.index(next(ln for ln in lines if ln.startswith("verification: ")))
    assert lines[at].startswith("verification: passed, ")
    assert "  ok    file_changed out.txt: 7 bytes" in lines
    assert any(ln.startswith("  ok    verify_command: test -s out.txt") for ln in lines)
    handoff = lines.index("handoff:")
    assert lines[handoff + 1:handoff + 4] == ["  status: success", '  result: {"rows": 41}', "  confidence: 0.9"]
    assert "  files_changed: 1: out.txt" in lines
    assert not any(ln.startswith(("verification: {", "handoff: {")) for ln in lines)  # no one-line JSON


def test_fold_counts_terminal_columns_and_breaks_at_words():
    from rich.cells import cell_len

    from console.cli.table import fold
    wide = "paused: q1 by ana 2m ago (データベースの移行中のため一時停止しています。明日の朝に再開する予定です。)"
    lines = fold(wide, 60)
    assert all(cell_len(ln) <= 60 for ln in lines) and len(lines) > 1
    assert all(ln.startswith("    ") for ln in lines[1:])
    assert "".join(ln.strip() for ln in lines).replace(" ", "") == wide.replace(" ", "")
    assert fold("  runner r1  alive  host:1  last heartbeat 2s ago", 80) == ["  runner r1  alive  host:1  last heartbeat 2s ago"]
    assert fold("  a-long-host-name.example.internal:123  last heartbeat 2s ago, lease 30s", 40) == [
        "  a-long-host-name.example.internal:123", "      last heartbeat 2s ago, lease 30s"]
