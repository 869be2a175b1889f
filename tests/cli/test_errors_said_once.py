"""Failures read alike and once: ``ack`` of an unknown escalation says ``error: no escalation
N`` (exit 2) like every other command, and an ``exec`` whose program cannot start says its
error once, not twice."""

from __future__ import annotations

from core.ledger.connection import Ledger
from tests.kit.cli import wk


def test_ack_of_an_unknown_escalation_is_an_error_line(tmp_path):
    db = tmp_path / "wk.db"
    Ledger(db).close()
    for verb in ("ack", "resolve"):
        res = wk(verb, "9999", "--ledger", str(db), cwd=tmp_path)
        assert (res.returncode, res.stdout, res.stderr) == (2, "", "error: no escalation 9999\n")


def test_exec_of_a_missing_program_says_its_error_once(tmp_path):
    res = wk("exec", "--job", "gone", "--ledger", str(tmp_path / "wk.db"), "--", str(tmp_path / "no-such-prog"),
             cwd=tmp_path)
    assert res.returncode == 127
    assert res.stderr.count("could not start: no such command") == 1, res.stderr
    assert res.stderr.startswith("watchkeeper: gone run 1 failed (could not start: no such command ")
