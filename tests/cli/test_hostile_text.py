"""Untrusted text stays text in every CLI output: ESC (CSI and OSC sequences), BEL, C1 and
bidi controls supplied by a job (its output, its handoff's error and notes, the reason it
leads to) or by a spec (owner, intent, tags, a bad value) are printed escaped by
``runs``, ``jobs``, ``escalations``, ``tail``, ``report``, ``show`` and ``check``.

The job runs through a real runner, so the hostile text reaches the ledger the way it does
in production."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger import lifecycle
from core.ledger.connection import Ledger
from core.vocabulary import EndReason
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs
from tests.kit.sweep import add_run

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
# ESC + CSI colour, OSC 0 (retitle) ended by BEL, C1 CSI, bidi override and isolate.
HOSTILE = "\x1b[31mRED\x1b]0;PWNED\x07 \x9b2J \u202eevil\u2066iso\u2069"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u2069")


def toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string (\u escapes included)


def assert_clean(text: str, where: str) -> None:
    found = [repr(c) for c in RAW if c in text]
    assert not found, f"{where}: raw {', '.join(found)} in output:\n{text!r}"


@pytest.fixture(scope="module")
def hostile_ledger(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    specs = tmp / "jobs"
    code = ("import json, os, sys\n"
            f"h = {HOSTILE!r}\n"
            "print('out ' + h); print('err ' + h, file=sys.stderr)\n"
            "json.dump({'status': 'failed', 'error': 'worker says ' + h, 'notes': h, 'confidence': 0.5},"
            " open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))\n"
            "sys.exit(3)\n")
    write_specs(specs, f"""
name = "hostile"
command = [{toml_str(PY)}, "-c", {toml_str(code)}]
once = true
owner = {toml_str("ana" + HOSTILE)}
intent = {toml_str("intent " + HOSTILE)}
tags = [{toml_str("tag" + HOSTILE)}]
""")
    s = fast_settings(tmp)
    with RunnerThread(specs, s):
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM escalations WHERE job = 'hostile'"), timeout=30)
    run_id = query(s.ledger, "SELECT id FROM runs WHERE job = 'hostile'")[0]["id"]
    # A run whose only reason is worker-supplied text (no verdict yet): what `runs` printed raw.
    with Ledger(s.ledger) as led:
        other = add_run(led, "hostile", state="verifying")
        assert lifecycle.transition(led, other, 1, "verifying", "failed", reason_code=EndReason.EXIT_CODE, actor="test", reason="handoff: " + HOSTILE)
    # A spec folder whose errors carry hostile text, for `check`.
    bad = tmp / "bad"
    write_specs(bad, f'name = "fine"\ncommand = ["true"]\ntimeout = {toml_str("5" + HOSTILE)}\n'
                     f'owner = {toml_str(HOSTILE)}\n')
    write_specs(bad, f'name = "ok"\ncommand = ["true"]\nintent = {toml_str(HOSTILE)}\n', name="ok.toml")
    return s.ledger, run_id, specs, bad


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["runs"], ["runs", "--state", "failed"], ["jobs"], ["escalations"], ["escalations", "--state", "all"],
    ["report"], ["show", "{run}"], ["status"], ["escalations", "{esc}"],
])
def test_ledger_commands_escape_untrusted_text(hostile_ledger, argv):
    db, run_id, _, _ = hostile_ledger
    esc = query(db, "SELECT id FROM escalations WHERE job = 'hostile' ORDER BY id")[0]["id"]
    args = [a.replace("{run}", str(run_id)).replace("{esc}", str(esc)) for a in argv]
    res = CliRunner().invoke(cli, [*args, "--ledger", str(db)])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.output.strip(), res.output
    assert_clean(res.output, " ".join(argv))
    if argv[0] in ("runs", "show", "escalations"):
        # Shown, escaped: the operator still sees what was there.
        assert "\\x1b" in res.output or "\\u001b" in res.output


@pytest.mark.slow
def test_check_escapes_untrusted_text(hostile_ledger):
    _, _, specs, bad = hostile_ledger
    for folder in (specs, bad):
        res = CliRunner().invoke(cli, ["check", str(folder)])
        assert_clean(res.output, f"check {folder.name}")
    assert "\\x1b" in CliRunner().invoke(cli, ["check", str(bad)]).output


@pytest.mark.slow
def test_tail_escapes_untrusted_text(hostile_ledger):
    db, _, _, _ = hostile_ledger
    proc = subprocess.Popen([PY, "-m", "console.cli", "tail", "--since", "1h", "--ledger", str(db)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "NO_COLOR": "1"})
    try:
        line = proc.stdout.readline().decode("utf-8", "replace")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    assert "hostile" in line
    assert_clean(line, "tail")


def test_json_outputs_escape_controls(hostile_ledger):
    db, run_id, _, _ = hostile_ledger
    esc = query(db, "SELECT id FROM escalations WHERE job = 'hostile' ORDER BY id")[0]["id"]
    for argv in (["runs", "--json"], ["show", str(run_id), "--json"], ["escalations", "--json"], ["jobs", "--json"],
                 ["escalations", str(esc), "--json"]):
        res = CliRunner().invoke(cli, [*argv, "--ledger", str(db)])
        assert_clean(res.output, " ".join(argv))
