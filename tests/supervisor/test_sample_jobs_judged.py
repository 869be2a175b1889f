"""The sample jobs through real runs: workers that succeed at the wrong thing are escalated with
their evidence once they have a history; the routine sample jobs stay silent over 100 runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.actions import trigger_job
from core.ledger.connection import Ledger
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for

SAMPLES = Path(__file__).resolve().parents[2] / "sample_jobs"


def _copy(tmp: Path, *specs: str) -> Path:
    folder = tmp / "jobs"
    shutil.copytree(SAMPLES / "bin", folder / "bin")
    for name in specs:
        shutil.copy(SAMPLES / name, folder / name)
    return folder


def _run_each(db: Path, jobs: list[str], n: int, timeout: float) -> None:
    """Queue manual runs until every job has at least ``n`` judged top-level outcomes."""
    wait_for(lambda: len(query(db, "SELECT name FROM jobs WHERE enabled = 1")) >= len(jobs), timeout=20)
    with Ledger(db) as led:
        for job in jobs:
            for _ in range(n):
                assert trigger_job(led, job, "test").ok

    def done() -> bool:
        rows = query(db, "SELECT job, COUNT(*) AS n FROM job_outcomes WHERE judged_by IS NOT NULL GROUP BY job")
        got = {r["job"]: r["n"] for r in rows}
        return all(got.get(j, 0) >= n for j in jobs)
    wait_for(done, timeout=timeout, every=0.2)


@pytest.mark.slow
def test_wrong_thing_workers_are_escalated_with_their_evidence(tmp_path):
    folder = _copy(tmp_path, "wrong_thing.toml")
    settings = fast_settings(tmp_path)
    db = Path(settings.ledger)
    jobs = ["orders-export", "weekly-digest", "partner-sync"]
    with RunnerThread(folder, settings):
        _run_each(db, jobs, 8, timeout=120)
    esc = {e["kind"]: e for e in query(db, "SELECT * FROM escalations")}
    assert set(esc) >= {"zero_work", "empty_file", "partial_content"}, esc.keys()
    assert esc["zero_work"]["job"] == "orders-export"
    assert '"exported 0 rows to out/orders.csv"' in esc["zero_work"]["reason"]
    assert "usually" in esc["zero_work"]["reason"] and "successes" in esc["zero_work"]["reason"]
    assert esc["empty_file"]["job"] == "weekly-digest"
    assert "out/digest.html is empty (0 bytes)" in esc["empty_file"]["reason"]
    assert esc["partial_content"]["job"] == "partner-sync"
    assert "its handoff says success while its own content says result.failed = 2 of 6" in \
        esc["partial_content"]["reason"]
    # nothing else about them: the good runs around the wrong one were silent
    assert set(esc) == {"zero_work", "empty_file", "partial_content"}, esc.keys()


def _routine_stays_silent(tmp_path: Path, runs: int, timeout: float) -> None:
    folder = _copy(tmp_path, "routine.toml", "report.toml", "agent.toml")
    settings = fast_settings(tmp_path)
    db = Path(settings.ledger)
    jobs = ["disk-report", "nightly-report", "agent-triage"]
    with RunnerThread(folder, settings):
        _run_each(db, jobs, runs, timeout=timeout)
    assert query(db, "SELECT job, kind, reason FROM escalations") == []
    kinds = {(r["job"], r["verdict_kind"]) for r in query(db, "SELECT job, verdict_kind FROM job_outcomes")}
    assert kinds <= {(j, k) for j in jobs for k in ("first_success", "routine")}, kinds
    loud = query(db, "SELECT COUNT(*) AS n FROM job_outcomes WHERE silent = 0 AND verdict_kind != 'first_success'")
    assert loud[0]["n"] == 0


@pytest.mark.slow
def test_routine_sample_jobs_stay_silent_over_12_runs(tmp_path):
    """The short version for `make test`: past the first successes and into learned baselines
    (the judge learns from the second success on), every routine run is silent."""
    _routine_stays_silent(tmp_path, 12, timeout=100)


@pytest.mark.soak
def test_routine_sample_jobs_stay_silent_over_100_runs(tmp_path):
    _routine_stays_silent(tmp_path, 100, timeout=900)
