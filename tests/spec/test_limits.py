"""Spec limits an adversary found: tiny intervals, endless durations, huge or odd files,
a new file taking over a job, and the order of one job's errors."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.spec.loader import load_dir, load_file
from core.spec.model import JobSpec, parse_duration

LIMIT = "must be a finite duration of at most 10 years"


def _errors(tmp_path: Path, body: str) -> list[str]:
    f = tmp_path / "j.toml"
    f.write_text('name = "j"\ncommand = "true"\n' + body)
    res = load_file(f)
    return [str(e) for e in res.errors]


# -- every ≥ 1 s ------------------------------------------------------------------------
@pytest.mark.parametrize("every", ['"1ms"', '"999ms"', "0.5"])
def test_every_below_one_second_is_refused(tmp_path: Path, every: str):
    (err,) = _errors(tmp_path, f"every = {every}\n")
    assert "field 'every'" in err and "at least 1s" in err and ":3:" in err


def test_every_of_one_second_is_fine(tmp_path: Path):
    assert _errors(tmp_path, 'every = "1s"\n') == []


# -- finite, at most 10 years ----------------------------------------------------------
@pytest.mark.parametrize("value", ["inf", "nan", "1e308", '"inf"', '"nan"', '"99999999999999999999999999d"',
                                   '"3651d"', "315360001", "99999999999999999999999999"])
@pytest.mark.parametrize("key", ["timeout", "grace", "every", "backoff.initial", "backoff.max",
                                 "breaker.window", "breaker.cooldown", "budget.wall"])
def test_absurd_durations_are_refused(tmp_path: Path, key: str, value: str):
    errs = _errors(tmp_path, f"{key} = {value}\n")
    assert errs and all(f"field '{key}'" in e and LIMIT in e for e in errs), errs


@pytest.mark.parametrize("table", ['[[tasks]]\nname = "t"\ncommand = "x"\ntimeout = inf\n',
                                   '[[verify]]\ncommand = "x"\ntimeout = "99999999999999999999d"\n',
                                   '[expect]\nduration = ["1s", inf]\n'])
def test_nested_durations_are_refused(tmp_path: Path, table: str):
    body = 'kind = "fanout"\n' if "tasks" in table else ""
    errs = _errors(tmp_path, body + table)
    assert any(LIMIT in e for e in errs), errs


def test_ten_years_exactly_is_fine_and_inf_never_renders():
    assert parse_duration("3650d") == 315_360_000
    for bad in (float("inf"), float("nan"), "inf", 10**30, "1e308"):
        with pytest.raises(ValueError, match="finite duration of at most 10 years"):
            parse_duration(bad)
    with pytest.raises(ValidationError):
        JobSpec(name="j", command="x", every="inf")


def test_factor_and_cost_must_be_finite():
    with pytest.raises(ValidationError):
        JobSpec(name="j", command="x", backoff={"factor": float("inf")})
    with pytest.raises(ValidationError):
        JobSpec(name="j", command="x", budget={"cost": float("inf")})


# -- files: size and kind --------------------------------------------------------------
def test_huge_sparse_file_behind_a_symlink_is_refused_without_reading(tmp_path: Path):
    big = tmp_path / "elsewhere.bin"
    with open(big, "wb") as fh:
        fh.truncate(3 * 1024**3)  # sparse: no disk used
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "big.toml").symlink_to(big)
    (folder / "ok.toml").write_text('name = "ok"\ncommand = "true"\n')
    res = load_dir(folder)
    assert set(res.jobs) == {"ok"}
    (err,) = res.errors
    assert str(err) == f"{folder / 'big.toml'}: too large ({3 * 1024**3} bytes, limit 1 MiB)"


def test_just_over_one_mib_is_too_large(tmp_path: Path):
    f = tmp_path / "j.toml"
    f.write_text('name = "j"\ncommand = "true"\n' + "#" * (1024 * 1024))
    (err,) = load_file(f).errors
    assert "too large" in err.message


def test_fifo_directory_and_dangling_symlink_are_reported(tmp_path: Path):
    folder = tmp_path / "jobs"
    folder.mkdir()
    os.mkfifo(folder / "fifo.toml")
    (folder / "dir.toml").mkdir()
    (folder / "dangling.toml").symlink_to(tmp_path / "nowhere")
    (folder / ".#lock.toml").symlink_to("user@host.123")  # an editor's lock: hidden, skipped
    (folder / "ok.toml").write_text('name = "ok"\ncommand = "true"\n')
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(load_dir(folder)), daemon=True)
    t.start()
    t.join(10)
    assert done, "load_dir blocked (on the FIFO?)"
    res = done[0]
    assert set(res.jobs) == {"ok"}  # type: ignore[attr-defined]
    by_file = {Path(e.file).name: e.message for e in res.errors}  # type: ignore[attr-defined]
    assert by_file["fifo.toml"] == "not a regular file"
    assert by_file["dir.toml"] == "not a regular file"
    assert by_file["dangling.toml"].startswith("cannot read:")
    assert ".#lock.toml" not in by_file
    assert {Path(f).name for f in res.bad_files} == {"fifo.toml", "dir.toml", "dangling.toml"}  # type: ignore[attr-defined]


# -- duplicates: the current owner wins ------------------------------------------------
def _two_files(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "b.toml").write_text('name = "x"\ncommand = "echo owner"\n')
    (folder / "a.toml").write_text('name = "x"\ncommand = "echo intruder"\n')
    return folder / "a.toml", folder / "b.toml"


def test_without_prefer_first_file_wins(tmp_path: Path):
    a, b = _two_files(tmp_path)
    res = load_dir(a.parent)
    assert res.jobs["x"].source == str(a)
    (err,) = res.errors
    assert err.file == str(b) and "duplicate job name" in err.message


def test_prefer_keeps_the_current_owner(tmp_path: Path):
    a, b = _two_files(tmp_path)
    res = load_dir(a.parent, prefer={"x": str(b)})
    assert res.jobs["x"].source == str(b) and res.jobs["x"].spec.command == "echo owner"
    (err,) = res.errors
    assert err.file == str(a) and err.field == "name" and f"already defined in {b}:1" in err.message
    assert res.bad_files == {str(a)}


def test_prefer_of_a_file_with_errors_blocks_the_intruder(tmp_path: Path):
    a, b = _two_files(tmp_path)
    b.write_text('name = "x"\ncommand = "echo owner"\ntimeout = "soon"\n')
    res = load_dir(a.parent, prefer={"x": str(b)})
    assert "x" not in res.jobs
    assert any(e.file == str(a) and "owned by" in e.message for e in res.errors)
    assert str(b) in res.bad_files


def test_prefer_of_a_file_that_dropped_the_job_lets_the_other_win(tmp_path: Path):
    a, b = _two_files(tmp_path)
    b.write_text('name = "y"\ncommand = "true"\n')
    res = load_dir(a.parent, prefer={"x": str(b)})
    assert res.jobs["x"].source == str(a) and not res.errors


# -- one job's errors in line order ----------------------------------------------------
def test_errors_of_one_job_come_in_line_order(tmp_path: Path):
    f = tmp_path / "j.toml"
    f.write_text('name = "j"\nowner = ""\ncommand = "true"\ntimeout = "soon"\nmax_attempts = 0\n'
                 'cwd = ""\nbogus = 1\n')
    res = load_file(f)
    lines = [e.line for e in res.errors]
    assert len(lines) >= 4 and lines == sorted(lines), [str(e) for e in res.errors]
