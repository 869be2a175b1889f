"""A queued run of a job that no spec defines any more is cancelled and reported, not left
waiting forever (a pending retry's failure would otherwise never be seen)."""

from __future__ import annotations

import time
from pathlib import Path

from core.ledger.connection import Ledger
from core.ledger.jobs import sync_jobs
from core.ledger.runs import trigger
from core.spec.loader import load_dir
from core.supervisor import supervisor


def test_queued_retry_of_a_removed_job_is_abandoned_and_escalated(tmp_path: Path):
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "a.toml").write_text('name = "alpha"\ncommand = "false"\nowner = "ana"\n')
    with Ledger(tmp_path / "wk.db") as led:
        sync_jobs(led, load_dir(specs), actor="test")
        run_id = trigger(led, "alpha", actor="test")
        (specs / "a.toml").write_text('name = "beta"\ncommand = "false"\n')  # renamed in its file
        sync_jobs(led, load_dir(specs), actor="test")
        assert supervisor.cancel_removed_job_runs(led, grace_s=30.0) == []  # not before the grace
        assert supervisor.cancel_removed_job_runs(led, grace_s=30.0, now=time.time() + 60) == [run_id]
        run = led.one("SELECT * FROM runs WHERE id = ?", (run_id,))
        assert (run["state"], run["reason"]) == ("abandoned", "job_removed")
        esc = led.one("SELECT * FROM escalations WHERE job = 'alpha'")
        assert (esc["kind"], esc["severity"], esc["state"]) == ("job_removed", "warning", "open")
        assert "no longer defined" in esc["reason"]
        out = led.one("SELECT * FROM job_outcomes WHERE run_id = ?", (run_id,))
        assert out["judged_by"] is not None and out["escalate"] == 1
        # a job still defined is never touched
        beta = trigger(led, "beta", actor="test")
        assert supervisor.cancel_removed_job_runs(led, grace_s=0.0, now=time.time() + 60) == []
        assert led.one("SELECT state FROM runs WHERE id = ?", (beta,))["state"] == "queued"
