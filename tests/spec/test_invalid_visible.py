"""A spec file that does not parse or validate is visible: held in ``invalid_specs``, listed
by ``jobs`` / ``jobs --json`` with its error (file:line), and one ``spec_invalid`` escalation
per job (or file) that resolves once the file is fixed or removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from core.ledger.jobs import sync_jobs
from core.ledger.reads import invalid_specs
from core.spec.loader import load_dir


@pytest.fixture
def ledger(tmp_path: Path):
    with Ledger(tmp_path / "ledger.db") as led:
        yield led


def _write(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(body)
    return path


def escalations(ledger: Ledger) -> list[dict]:
    return [dict(r) for r in ledger.query("SELECT job, kind, state, severity, count, reason, owner, resolved_by"
                                          " FROM escalations WHERE kind = 'spec_invalid' ORDER BY id")]


def test_a_job_that_never_parsed_is_listed_and_escalated_until_fixed(tmp_path, ledger):
    specs = tmp_path / "jobs"
    _write(specs, "good", 'name = "good"\ncommand = "true"\nevery = "1m"\n')
    bad = _write(specs, "bad", 'name = "bad"\ncommand = "true"\nevery = "1m"\ntimeout = "-5s"\nowner = "ana"\n')
    rep = sync_jobs(ledger, load_dir(specs), actor="runner:r1", owner="ops")
    assert rep.invalid_opened == ["bad"]
    [row] = invalid_specs(ledger)
    assert (row.source, row.job, row.line, row.field, row.loaded) == (str(bad), "bad", 4, "timeout",
                                                                                      False)
    assert row.text.startswith(f"{bad}:4: job 'bad': field 'timeout'")
    [esc] = escalations(ledger)
    assert (esc["job"], esc["state"], esc["severity"], esc["owner"]) == ("bad", "open", "warning", "ops")
    assert f"{bad}:4" in esc["reason"]

    # Reloading the same broken file (a restart, another edit elsewhere) counts nothing new.
    sync_jobs(ledger, load_dir(specs))
    assert escalations(ledger)[0]["count"] == 1

    _write(specs, "bad", 'name = "bad"\ncommand = "true"\nevery = "1m"\ntimeout = "5s"\n')
    rep = sync_jobs(ledger, load_dir(specs), actor="runner:r1")
    assert rep.invalid_resolved == ["bad"] and invalid_specs(ledger) == []
    [esc] = escalations(ledger)
    assert (esc["state"], esc["resolved_by"]) == ("resolved", "runner:r1")


def test_an_edit_breaking_a_loaded_job_escalates_with_its_owner_and_says_the_old_spec_runs(tmp_path, ledger):
    specs = tmp_path / "jobs"
    _write(specs, "a", 'name = "a"\ncommand = "true"\nowner = "bea"\n')
    sync_jobs(ledger, load_dir(specs), owner="ops")
    _write(specs, "a", 'name = "a"\ncommand = "true"\nowner = "bea"\ntimeout = 0\n')
    sync_jobs(ledger, load_dir(specs), owner="ops")
    [row] = invalid_specs(ledger)
    assert row.loaded is True and invalid_specs(ledger, never_loaded=True) == []
    [esc] = escalations(ledger)
    assert esc["owner"] == "bea" and "last good spec still runs" in esc["reason"]
    # A different error in the same place is a repeat on the same escalation.
    _write(specs, "a", 'name = "a"\ncommand = "true"\nowner = "bea"\ntimeout = "x"\n')
    sync_jobs(ledger, load_dir(specs))
    [esc] = escalations(ledger)
    assert esc["count"] == 2 and esc["state"] == "open"


def test_a_syntax_error_without_a_name_is_about_the_file_and_removing_it_resolves(tmp_path, ledger):
    specs = tmp_path / "jobs"
    broken = _write(specs, "broken", 'command = "true\n')
    sync_jobs(ledger, load_dir(specs))
    [esc] = escalations(ledger)
    assert esc["job"] == str(broken)
    broken.unlink()
    rep = sync_jobs(ledger, load_dir(specs))
    assert rep.invalid_resolved == [str(broken)]
    assert escalations(ledger)[0]["state"] == "resolved"


def test_jobs_cli_lists_invalid_specs_with_file_and_line(tmp_path):
    specs = tmp_path / "jobs"
    db = tmp_path / "ledger.db"
    _write(specs, "ok", 'name = "ok"\ncommand = "true"\nevery = "1m"\n')
    bad = _write(specs, "bad", 'name = "bad"\ncommand = "true"\nschedule = "61 * * * *"\n')
    with Ledger(db) as ledger:
        sync_jobs(ledger, load_dir(specs))
        _write(specs, "ok", 'name = "ok"\ncommand = "true"\nevery = "-1m"\n')
        sync_jobs(ledger, load_dir(specs))
    out = CliRunner().invoke(cli, ["jobs", "--ledger", str(db)])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("bad "))
    assert "invalid" in lines[at] and f"never loaded): {bad}:3: job 'bad'" in lines[at + 1]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("ok "))
    assert "last good spec still runs" in lines[at + 1] and "ok.toml:3" in lines[at + 1]

    rows = [json.loads(x) for x in CliRunner().invoke(cli, ["jobs", "--ledger", str(db), "--json"]).stdout.splitlines()]
    by = {r["name"]: r for r in rows}
    assert by["bad"]["loaded"] is False and by["bad"]["spec_error"].startswith(f"{bad}:3:")
    assert (by["bad"]["source"], by["bad"]["line"]) == (str(bad), 3)
    assert by["ok"]["loaded"] is True and "ok.toml:3" in by["ok"]["spec_error"]
