"""Hostile job output and hostile handoffs, end to end through the real runner.

Output: ANSI/OSC escapes, Rich markup, invalid UTF-8 and a single 10 MB line with no newline
are stored in the artifacts files byte for byte up to the cap (head + tail), the ledger's
heads/tails are decoded with replacement, ``watchkeeper show`` prints control characters
escaped, and the runner goes on running other jobs.

Handoffs: each hostile handoff (bad bytes, wrong shapes, odd file types, paths outside the
run's folder, symlinks) becomes a recorded finding or a failed verification check.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.harness import RunnerThread, fast_settings, query, terminal_runs, wait_for, write_specs

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
CAP = 1024 * 1024

PREFIX = (b"\x1b[31mRED\x1b[0m [bold]markup[/bold] [link=http://evil.example]click[/link] \xff\xfe bad utf8 "
          b"\x1b]52;c;Zm9vYmFy\x07 osc52 \x1b[2J\x9b31m c1 \x00 nul\n")
SUFFIX = b" \x1b[?1049h TAIL-END \xc3\x28"
BIG = PREFIX + b"A" * (10 * 1024 * 1024) + SUFFIX  # one 10 MB line, no newline at the end
STDERR = b"err \xff\xfe \x1b[5m blink [red]x[/red]"

CHATTY = (f"import sys\nsys.stdout.buffer.write({BIG[:len(PREFIX)]!r} + b'A' * {10 * 1024 * 1024} + {SUFFIX!r})\n"
          f"sys.stdout.flush()\nsys.stderr.buffer.write({STDERR!r})\n")


def _job(name: str, code: str, **extra: str) -> str:
    lines = ["[[job]]", f'name = "{name}"', f"command = [{json.dumps(PY)}, \"-c\", {json.dumps(code)}]",
             'timeout = "60s"']
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n\n"


def _trigger_all(db: Path, jobs: list[str]) -> dict[str, int]:
    from core.ledger.connection import Ledger
    from core.ledger.runs import trigger
    with Ledger(db) as led:
        return {j: trigger(led, j, actor="operator:test") for j in jobs}


def _wait_terminal(db: Path, ids: dict[str, int], timeout: float = 60) -> dict[str, dict]:
    def done():
        rows = {r["id"]: r for r in terminal_runs(db)}
        return all(i in rows for i in ids.values()) and rows
    rows = wait_for(done, timeout=timeout, every=0.1)
    return {job: rows[i] for job, i in ids.items()}


def _outcome(db: Path, run_id: int) -> dict:
    return query(db, "SELECT * FROM job_outcomes WHERE run_id = ?", (run_id,))[0]


@pytest.mark.slow
def test_hostile_output_is_stored_literally_and_shown_escaped(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, _job("hostile", CHATTY) + _job("after", "print('still here')"))
    s = fast_settings(tmp_path, output_cap=CAP)
    with RunnerThread(specs, s) as rt:
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM jobs WHERE name = 'after'"))
        ids = _trigger_all(s.ledger, ["hostile"])
        first = _wait_terminal(s.ledger, ids)["hostile"]
        after = _wait_terminal(s.ledger, _trigger_all(s.ledger, ["after"]))["after"]
    assert rt.error is None
    assert first["state"] == "succeeded" and first["exit_code"] == 0, first
    assert after["state"] == "succeeded"  # the runner was unaffected

    art = Path(first["artifacts_dir"])
    data = (art / "stdout.log").read_bytes()
    head, tail = CAP // 2, CAP - CAP // 2
    assert data[:head] == BIG[:head]  # byte for byte, escapes and invalid UTF-8 included
    assert data.endswith(BIG[-tail:])
    assert b"[watchkeeper: " in data and len(data) < CAP + 200
    assert (art / "stderr.log").read_bytes() == STDERR

    o = _outcome(s.ledger, first["id"])
    assert o["stdout_bytes"] == len(BIG) and o["output_truncated"] == 1
    assert o["stdout_head"] == BIG[:4096].decode("utf-8", "replace")
    assert o["stdout_tail"] == BIG[-4096:].decode("utf-8", "replace")
    assert o["stderr_head"] == STDERR.decode("utf-8", "replace")

    shown = subprocess.run([PY, "-m", "console.cli", "show", str(first["id"]), "--ledger", str(s.ledger)],
                           capture_output=True, timeout=60, cwd=ROOT, env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
    assert shown.returncode == 0, shown.stderr[-2000:]
    out = shown.stdout
    out.decode("utf-8")  # valid UTF-8: invalid input bytes arrive as U+FFFD
    for raw in (b"\x1b", b"\x07", b"\x00", "\x9b".encode()):
        assert raw not in out, raw
    assert b"\\x1b[31mRED" in out and b"\\x1b]52;c;Zm9vYmFy\\x07" in out
    assert b"[bold]markup[/bold]" in out and b"[link=http://evil.example]click[/link]" in out
    assert "\ufffd".encode() in out and b"TAIL-END" in out


HANDOFF = "import json, os\nh = os.environ['WATCHKEEPER_HANDOFF']\n"

# name -> (worker code, expected handoff finding code or None, expected failed check text or None)
HOSTILE_HANDOFFS = {
    "invalid-json": ("open(h, 'w').write('{not json')", "invalid_json", None),
    "truncated": ("open(h, 'w').write('{\"status\": \"succ')", "invalid_json", None),
    "empty": ("open(h, 'w').write('')", "empty", None),
    "nul-bytes": ("open(h, 'wb').write(b'{\"status\": \"success\"\\x00}')", "nul_bytes", None),
    "invalid-utf8": ("open(h, 'wb').write(b'{\"status\": \"\\xff\\xfe\"}')", "invalid_utf8", None),
    "array": ("open(h, 'w').write('[1, 2, 3]')", "schema", None),
    "wrong-types": ("json.dump({'status': 'success', 'files_changed': 'a.txt', 'steps_used': 'many'}, open(h, 'w'))",
                    "schema", None),
    "bad-confidence": ("json.dump({'status': 'success', 'confidence': 7}, open(h, 'w'))", "schema", None),
    "deeply-nested": ("open(h, 'w').write('{\"status\": \"success\", \"result\": ' + '[' * 5000 + ']' * 5000 + '}')",
                      "too_deep", None),
    "fifty-mb": ("f = open(h, 'wb'); f.write(b'{\"status\": \"success\", \"notes\": \"'); f.truncate(50 * 2**20)",
                 "oversized", None),
    "symlink-handoff": ("os.symlink('/etc/hostname', h)", "symlink", None),
    "fifo-handoff": ("os.mkfifo(h)", "not_a_file", None),
    "dir-handoff": ("os.mkdir(h)", None, None),
    "outside-absolute": ("json.dump({'status': 'success', 'files_changed': ['/etc/passwd']}, open(h, 'w'))",
                         None, "outside the allowed roots"),
    "outside-dotdot": ("json.dump({'status': 'success', 'files_changed': ['../../../../etc/hostname']}, open(h, 'w'))",
                       None, "outside the allowed roots"),
    "symlink-claim": ("os.path.lexists('link.txt') or os.symlink('/etc/hostname', 'link.txt')\n"
                      "json.dump({'status': 'success', 'files_changed': ['link.txt']}, open(h, 'w'))",
                      None, "is a symlink"),
    "nul-path": ("json.dump({'status': 'success', 'files_changed': ['a\\x00b']}, open(h, 'w'))", None, "not a path"),
    "missing-artifact": ("json.dump({'status': 'success', 'artifacts': ['never-written.bin']}, open(h, 'w'))",
                         None, "does not exist"),
}


@pytest.fixture(scope="module")
def hostile_handoff_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("handoffs")
    specs = tmp / "jobs"
    write_specs(specs, "".join(_job(n, HANDOFF + code) for n, (code, _, _) in HOSTILE_HANDOFFS.items())
                + _job("plain-after", "print('fine')"))
    s = fast_settings(tmp)
    with RunnerThread(specs, s) as rt:
        wait_for(lambda: len(query(s.ledger, "SELECT name FROM jobs")) == len(HOSTILE_HANDOFFS) + 1)
        runs = _wait_terminal(s.ledger, _trigger_all(s.ledger, list(HOSTILE_HANDOFFS)), timeout=90)
        after = _wait_terminal(s.ledger, _trigger_all(s.ledger, ["plain-after"]))["plain-after"]
    assert rt.error is None
    return s.ledger, runs, after


def test_runner_unaffected_by_hostile_handoffs(hostile_handoff_runs):
    _, runs, after = hostile_handoff_runs
    assert after["state"] == "succeeded"
    assert len(runs) >= 15


@pytest.mark.parametrize("name", sorted(HOSTILE_HANDOFFS))
def test_hostile_handoff_is_a_recorded_finding(hostile_handoff_runs, name):
    db, runs, _ = hostile_handoff_runs
    code, finding, check_text = HOSTILE_HANDOFFS[name]
    run = runs[name]
    o = _outcome(db, run["id"])
    findings = json.loads(o["handoff_findings"] or "[]")
    verification = json.loads(o["verification"] or "{}")
    # A worker exited 0 with bad evidence: never a success, always a reason on record.
    assert run["state"] == "failed" and run["reason"] == "verification_failed", (run["state"], run["reason"])
    assert verification.get("ok") is False
    if finding is not None:
        assert o["handoff"] is None
        assert finding in [f["code"] for f in findings], findings
    elif check_text is None:
        assert o["handoff"] is None and findings  # some finding, whatever its code
    if check_text is not None:
        details = " | ".join(c["detail"] for c in verification["checks"] if not c["ok"])
        assert check_text in details, details
    if name == "fifty-mb":
        assert len(o["handoff_raw"] or "") <= 64 * 1024
