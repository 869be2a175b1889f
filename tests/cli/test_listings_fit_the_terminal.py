"""On a terminal, ``runs``, ``escalations`` and ``tail`` lines fit its width (COLUMNS first):
long names are narrowed and REASON is cut with "…", so nothing wraps and every value stays under
its heading; piped (and --json) they keep the full reason."""

from __future__ import annotations

import io
import sys

import pytest
from click.testing import CliRunner

from console.cli import table
from console.cli.escalations import escalation_line, header_line, terminal_widths
from console.cli.main import cli
from core.ledger.connection import Ledger
from core.ledger.records import Escalation
from core.supervisor import supervisor
from tests.kit.supervisor import add_job, new_run, to_verifying

LONG = "the disk filled while the nightly export was writing " * 4


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "wk.db"
    with Ledger(path) as led:
        for name, owner in (("nightly-backup-of-the-orders-database", "platform-operations-oncall@example.org"),
                            ("sync", "ana")):
            add_job(led, tmp_path, name, owner=owner)
            rid = new_run(led, name)
            to_verifying(led, rid, exit_code=4, stderr=LONG + "\n")
            supervisor.settle(led, rid)
    return path


def _listing(monkeypatch, db, command, room):
    monkeypatch.setattr(table, "terminal_width", lambda: room)
    res = CliRunner().invoke(cli, [command, "--ledger", str(db)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    if command == "escalations":  # a cut reason is said on stderr, with how to see it whole
        assert ("shows one whole" in res.stderr) == (room is not None), res.stderr
    return res.stdout.splitlines()


@pytest.mark.parametrize("command", ["runs", "escalations"])
def test_on_an_80_column_terminal_every_line_fits_and_stays_under_its_heading(monkeypatch, db, command):
    header, *rows = _listing(monkeypatch, db, command, 80)
    assert len(rows) == 2 and all(len(line) <= 80 for line in [header, *rows])
    assert all(row.endswith("…") for row in rows)  # the reason, cut
    for col in (c for c in header.split()[1:] if c != "(UTC)"):
        at = header.index(f" {col}") + 1
        if col == "DURATION":  # right-aligned: each value ends where its heading does
            end = at + len(col)
            assert all(row[end - 1] != " " and row[end] == " " for row in rows), (col, rows)
        else:  # each value starts where its heading does
            assert all(row[at - 1] == " " and row[at] != " " for row in rows), (col, rows)


@pytest.mark.parametrize("command", ["runs", "escalations"])
def test_piped_the_reason_is_whole(monkeypatch, db, command):
    _header, *rows = _listing(monkeypatch, db, command, None)
    assert all(row.endswith('writing t"') for row in rows) and max(map(len, rows)) > 200  # the reason as recorded


def test_a_tail_line_fits_the_terminal_under_its_heading():
    e = Escalation(id=12345, dedup_key="j:failed", severity="critical", job="j" * 40, kind="verification_failed",
                   count=3, owner="o" * 40, state="acknowledged", updated_at=0, reason=LONG)
    widths = terminal_widths(80)
    head, line = header_line(widths, 80), escalation_line(e, widths=widths, room=80)
    assert len(line) <= 80 and len(head) <= 80 and line.endswith("…")
    assert line[head.index("REASON")] == "t" and line[head.index("STATE"):].startswith("acknowl")


def test_the_width_is_the_terminals_only_when_stdout_is_one(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert table.terminal_width() == 80
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert table.terminal_width() is None


def test_jobs_lines_fit_80_columns(monkeypatch, db):
    header, *rows = _listing(monkeypatch, db, "jobs", 80)
    rows = [row for row in rows if not row.startswith("note: ")]  # no runner is up
    assert len(rows) == 2 and all(len(line) <= 80 for line in [header, *rows])
    assert any(row.startswith("nightly-backup-of-t… ") for row in rows)


def test_escalations_at_80_columns_take_the_short_form_so_names_stay_readable(monkeypatch, db):
    header, *rows = _listing(monkeypatch, db, "escalations", 80)
    assert header.split()[:5] == ["TIME", "(UTC)", "ID", "SEV", "JOB"] and "OWNER" not in header
    assert any("crit  nightly-backup-" in row for row in rows), rows  # the job keeps 15+ characters
    wide_header, *_ = _listing(monkeypatch, db, "escalations", 140)
    assert "SEVERITY" in wide_header and "OWNER" in wide_header
