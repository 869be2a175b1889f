"""``watchkeeper prune`` explains itself: a prune that removes nothing says why, a size goal it
cannot meet says by how much, artifact folders already gone are counted and named, and
retention is on by default (``check`` says so) unless switched off."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from tests.kit.runs import add_run

DAY = 86400.0


def _runs(db: Path, job: str, n: int, *, age_days: float, art: Path | None = None) -> list[int]:
    at = time.time() - age_days * DAY
    ids: list[int] = []

    def tx(c):
        for _ in range(n):
            lineage = uuid.uuid4().hex
            ids.append(add_run(c, job, "succeeded", lineage=lineage, slot=lineage, trigger="schedule", at=at,
                               ended_at=at))
    with Ledger(db) as led:
        led.write(tx)
    if art is not None:
        for rid in ids:  # the runner's default folder: <artifacts>/<run id>
            (art / str(rid)).mkdir(parents=True)
            (art / str(rid) / "stdout.log").write_bytes(b"x" * 1000)
    return ids


def _prune(*args: str):
    res = CliRunner().invoke(cli, ["prune", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res


def test_nothing_past_the_default_retention_says_so(tmp_path: Path):
    db = tmp_path / "wk.db"
    _runs(db, "backup", 5, age_days=1)
    res = _prune("--ledger", str(db), "--dry-run")
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[:2] == [
        "would remove 0 run(s) (+0 sub-task runs), 0 outcomes, 0 events, 0 resolved escalations, 0 notifications,"
        " 0 artifact folders",
        "nothing is past retention: no run ended more than 90d ago"]


def test_keep_per_job_keeping_everything_is_named(tmp_path: Path):
    db = tmp_path / "wk.db"
    _runs(db, "backup", 10, age_days=40)
    _runs(db, "report", 3, age_days=40)
    res = _prune("--ledger", str(db), "--dry-run", "--max-age", "30d")
    assert res.exit_code == 0, res.output
    assert "would remove 0 run(s)" in res.stdout
    # The newest run of all stays too: its number must never be handed out again.
    assert ("kept 13 run(s) past retention (ended more than 30d ago): 13 among their job's newest keep_per_job=60"
            in res.stdout.splitlines())


def test_a_size_goal_that_cannot_be_met_says_by_how_much(tmp_path: Path):
    db = tmp_path / "wk.db"
    art = tmp_path / "wk-artifacts"
    _runs(db, "backup", 4, age_days=1, art=art)
    res = _prune("--ledger", str(db), "--max-size", "1KiB")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith("removed 0 run(s)")
    assert ("kept 4 run(s) past retention (ended more than 90d ago, or beyond max_size 1.0 KiB): 4 among their"
            " job's newest keep_per_job=60") in lines
    assert any(ln.startswith("max_size 1.0 KiB cannot be met: ledger and artifacts are ") and ln.endswith(" over")
               for ln in lines), lines


def test_artifact_folders_not_found_are_counted_and_named(tmp_path: Path):
    db = tmp_path / "wk.db"
    art = tmp_path / "wk-artifacts"
    ids = _runs(db, "backup", 3, age_days=40, art=art)
    _runs(db, "backup", 1, age_days=0)  # the newest run (kept: it holds the highest id)
    for rid in ids[:2]:
        for f in (art / str(rid)).iterdir():
            f.unlink()
        (art / str(rid)).rmdir()
    for dry in (["--dry-run"], []):
        res = _prune("--ledger", str(db), "--max-age", "30d", "--keep-per-job", "0", *dry)
        assert res.exit_code == 0, res.output
        assert res.stdout.splitlines()[0].endswith(", 1 artifact folders")
        assert f"2 artifact folder(s) not found: {art / str(ids[0])}, {art / str(ids[1])}" in res.stdout.splitlines()


def test_retention_is_on_by_default_and_check_says_so_unless_switched_off(tmp_path: Path):
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "a.toml").write_text('[[job]]\nname = "a"\ncommand = "true"\nevery = "1h"\n')
    res = CliRunner().invoke(cli, ["check", str(specs)])
    assert res.exit_code == 0, res.output
    assert ("retention: on — runs ended more than 90d ago are pruned every 24h, keeping each job's newest 60;"
            " [retention] enabled = false keeps everything") in res.stdout.splitlines()
    (specs / "watchkeeper.toml").write_text("[retention]\nenabled = false\n")
    res = CliRunner().invoke(cli, ["check", str(specs)])
    assert res.exit_code == 0, res.output
    assert any(ln.startswith("retention: off — every run is kept") for ln in res.stdout.splitlines())
    db = tmp_path / "wk.db"
    _runs(db, "a", 3, age_days=400)
    res = _prune(str(specs), "--ledger", str(db))
    assert res.exit_code == 3 and "retention is off" in res.stderr
    res = _prune(str(specs), "--ledger", str(db), "--max-age", "30d", "--keep-per-job", "0")  # flags still apply
    assert res.exit_code == 0 and res.stdout.startswith("removed 2 run(s)"), res.output
