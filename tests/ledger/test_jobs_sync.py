"""sync_jobs: the jobs table mirrors the spec folder; bad edits keep the last good spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.ledger.connection import Ledger
from core.ledger.jobs import load_job_rows, load_jobs, recent_spec_errors, sync_jobs
from core.spec.loader import load_dir
from core.spec.model import spec_from_json


@pytest.fixture
def ledger(tmp_path: Path):
    with Ledger(tmp_path / "ledger.db") as led:
        yield led


def _events(ledger: Ledger, kind: str) -> list:
    return ledger.query("SELECT * FROM events WHERE kind=? ORDER BY id", (kind,))


def _write(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(body)
    return path


def test_new_changed_unchanged(tmp_path: Path, ledger: Ledger):
    specs = tmp_path / "jobs"
    _write(specs, "a", 'name = "a"\ncommand = "true"\nevery = "30s"\nowner = "ana"\nintent = "it works"\n')
    rep = sync_jobs(ledger, load_dir(specs), now=100.0)
    assert rep.added == ["a"]
    row = ledger.one("SELECT * FROM jobs WHERE name='a'")
    assert (row["owner"], row["intent"], row["schedule_text"], row["enabled"], row["updated_at"]) == \
        ("ana", "it works", "every 30s", 1, 100.0)
    assert row["source"].endswith("a.toml") and row["source_line"] == 1
    assert spec_from_json(row["spec"]).every == 30.0
    assert sync_jobs(ledger, load_dir(specs)).unchanged == ["a"]
    _write(specs, "a", 'name = "a"\ncommand = "true"\nevery = "1m"\n')
    rep = sync_jobs(ledger, load_dir(specs))
    assert rep.changed == ["a"]
    assert load_jobs(ledger)["a"].every == 60.0
    assert [e["job"] for e in _events(ledger, "spec_loaded")] == ["a"]
    assert len(_events(ledger, "spec_changed")) == 1


def test_invalid_edit_keeps_last_good_spec_and_records_error(tmp_path: Path, ledger: Ledger):
    specs = tmp_path / "jobs"
    path = _write(specs, "a", 'name = "a"\ncommand = "true"\ntimeout = "10s"\n')
    sync_jobs(ledger, load_dir(specs))
    _write(specs, "a", 'name = "a"\ncommand = "true"\ntimeout = "-10s"\n')
    rep = sync_jobs(ledger, load_dir(specs))
    assert rep.kept == ["a"] and rep.removed == []
    assert load_jobs(ledger)["a"].timeout == 10.0
    row = ledger.one("SELECT enabled, last_error FROM jobs WHERE name='a'")
    assert row["enabled"] == 1 and "field 'timeout'" in row["last_error"]
    (err,) = _events(ledger, "spec_error")
    detail = json.loads(err["detail"])
    assert detail["file"] == str(path) and detail["field"] == "timeout" and detail["line"] == 3
    assert err["job"] == "a"
    # the fix clears last_error
    _write(specs, "a", 'name = "a"\ncommand = "true"\ntimeout = "20s"\n')
    sync_jobs(ledger, load_dir(specs))
    assert ledger.one("SELECT last_error FROM jobs WHERE name='a'")["last_error"] is None
    assert load_jobs(ledger)["a"].timeout == 20.0


def test_syntax_error_keeps_every_job_of_the_file(tmp_path: Path, ledger: Ledger):
    specs = tmp_path / "jobs"
    _write(specs, "pair", '[[job]]\nname = "x"\ncommand = "true"\n[[job]]\nname = "y"\ncommand = "true"\n')
    sync_jobs(ledger, load_dir(specs))
    _write(specs, "pair", '[[job]]\nname = "x"\ncommand = "true\n')
    rep = sync_jobs(ledger, load_dir(specs))
    assert sorted(rep.kept) == ["x", "y"]
    assert set(load_jobs(ledger)) == {"x", "y"}


def test_removed_file_and_removed_job_are_disabled_not_deleted(tmp_path: Path, ledger: Ledger):
    specs = tmp_path / "jobs"
    gone = _write(specs, "gone", 'name = "gone"\ncommand = "true"\n')
    _write(specs, "pair", '[[job]]\nname = "x"\ncommand = "true"\n[[job]]\nname = "y"\ncommand = "true"\n')
    sync_jobs(ledger, load_dir(specs))
    gone.unlink()
    _write(specs, "pair", '[[job]]\nname = "x"\ncommand = "true"\n')
    rep = sync_jobs(ledger, load_dir(specs))
    assert sorted(rep.removed) == ["gone", "y"]
    assert set(load_jobs(ledger)) == {"x"}
    assert ledger.one("SELECT COUNT(*) AS n FROM jobs")["n"] == 3
    reasons = {e["job"]: e["reason"] for e in _events(ledger, "spec_removed")}
    assert reasons == {"gone": "file removed", "y": "job removed from file"}
    # coming back re-enables it
    _write(specs, "gone", 'name = "gone"\ncommand = "true"\n')
    assert sync_jobs(ledger, load_dir(specs)).changed == ["gone"]
    assert "gone" in load_jobs(ledger)


def test_recent_spec_errors_newest_first(tmp_path: Path, ledger: Ledger):
    specs = tmp_path / "jobs"
    _write(specs, "a", 'name = "a"\ncommand = 1\n')
    sync_jobs(ledger, load_dir(specs), now=1.0)
    _write(specs, "a", 'name = "a"\ncommand = "true"\ntimeout = 0\n')
    sync_jobs(ledger, load_dir(specs), now=2.0)
    errs = recent_spec_errors(ledger)
    assert [e.field for e in errs] == ["timeout", "command"]
    assert errs[0].at == 2.0 and errs[0].text.endswith("Input should be greater than 0")
    assert len(recent_spec_errors(ledger, limit=1)) == 1


def test_load_job_rows_gives_source_for_cwd(tmp_path: Path, ledger: Ledger):
    specs = tmp_path / "jobs"
    _write(specs, "a", 'name = "a"\ncommand = "true"\ncwd = "work"\n')
    sync_jobs(ledger, load_dir(specs))
    from core.spec.loader import resolve_cwd
    assert resolve_cwd(load_job_rows(ledger)["a"]) == str((specs / "work").resolve())
