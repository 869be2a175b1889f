"""Plain-text CLI output never carries escape sequences from untrusted text; spec errors in
dotted keys point at their own line."""

from __future__ import annotations

from console.cli.escalations import escalation_line
from core.spec.model import load_file


def test_tail_line_is_plain_and_greppable():
    line = escalation_line({"id": 3, "severity": "critical", "job": "j\x1b[2J", "kind": "failed", "count": 2,
                            "owner": "research-lead@example.org", "state": "open", "updated_at": 0,
                            "reason": "boom \x1b]52;c;aGVsbG8=\x07 [bold]x[/bold] \x9b31m"})
    assert "\x1b" not in line and "\x9b" not in line and "\x07" not in line
    assert " critical " in line and "research-lead@example.org" in line and "[bold]x[/bold]" in line


def test_dotted_key_error_names_its_line(tmp_path):
    p = tmp_path / "a.toml"
    p.write_text('[[job]]\nname = "ok"\ncommand = ["true"]\n\n[[job]]\nname = "bad-regex"\ncommand = ["true"]\n'
                 'expect.output = "("\n')
    errs = load_file(p).errors
    assert len(errs) == 1 and errs[0].line == 8 and errs[0].field == "expect.output"
