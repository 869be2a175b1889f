"""settle(): verification decides succeeded | failed | blocked before any success is recorded."""

from __future__ import annotations

import json
import os
import time

from core.ledger import outcomes
from core.supervisor import supervisor
from tests.kit.supervisor import add_job, escalations_of, new_run, to_verifying


def _settle(ledger, rid):
    return supervisor.settle(ledger, rid, settings=None)


def test_plain_success_is_silent(ledger, tmp_path):
    add_job(ledger, tmp_path)
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=0)
    assert _settle(ledger, rid) == "succeeded"
    out = outcomes.get(ledger.conn, rid)
    assert out["status"] == "success" and out["verification"]["ok"] is True
    assert out["judged_by"] == "rules" and out["verdict_kind"] == "first_success"
    assert escalations_of(ledger) == []


def test_nonzero_exit_fails_and_escalates_critical(ledger, tmp_path):
    add_job(ledger, tmp_path, owner="ana")
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=3)
    assert _settle(ledger, rid) == "failed"
    out = outcomes.get(ledger.conn, rid)
    assert out["reason"] == "exit_code" and out["escalate"] == 1 and out["severity"] == "critical"
    (esc,) = escalations_of(ledger)
    assert esc["kind"] == "failed" and esc["owner"] == "ana" and esc["state"] == "open"
    assert "exited with code 3" in esc["reason"]


def test_false_claim_of_changed_file_fails_verification_and_escalates_false_claim(ledger, tmp_path):
    add_job(ledger, tmp_path)
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=0,
                 handoff={"status": "success", "files_changed": ["report.csv"], "artifacts": []})
    assert _settle(ledger, rid) == "failed"
    out = outcomes.get(ledger.conn, rid)
    assert out["reason"] == "verification_failed"
    assert "file_changed" in out["verification"]["failed"]
    (esc,) = escalations_of(ledger)
    assert esc["kind"] == "false_claim" and esc["severity"] == "critical"
    assert "claimed work verification cannot find" in esc["reason"] and "report.csv" in esc["reason"]


def test_stale_file_is_not_a_change(ledger, tmp_path):
    add_job(ledger, tmp_path)
    old = tmp_path / "old.txt"
    old.write_text("x")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    rid = new_run(ledger)
    to_verifying(ledger, rid, handoff={"status": "success", "files_changed": ["old.txt"]})
    assert _settle(ledger, rid) == "failed"
    checks = outcomes.get(ledger.conn, rid)["verification"]["checks"]
    assert any("not modified during the run" in c["detail"] for c in checks)


def test_real_changed_file_and_artifact_pass(ledger, tmp_path):
    add_job(ledger, tmp_path)
    art = tmp_path / "art"
    art.mkdir()
    rid = new_run(ledger, artifacts_dir=art)
    to_verifying(ledger, rid, duration_s=0.5)
    (tmp_path / "new.txt").write_text("fresh")
    (art / "summary.md").write_text("ok")
    # the runner's provisional row has no handoff; the supervisor reads the stored one
    ledger.write(lambda c: outcomes.record(c, rid, handoff={"status": "success", "files_changed": ["new.txt"],
                                                            "artifacts": ["summary.md"]}, handoff_findings=[]))
    assert _settle(ledger, rid) == "succeeded"


def test_symlink_and_outside_paths_are_findings(ledger, tmp_path):
    add_job(ledger, tmp_path)
    (tmp_path / "link").symlink_to("/etc/hostname")
    rid = new_run(ledger)
    to_verifying(ledger, rid, handoff={"status": "success", "files_changed": ["link", "/etc/passwd"]})
    assert _settle(ledger, rid) == "failed"
    details = " ".join(c["detail"] for c in outcomes.get(ledger.conn, rid)["verification"]["checks"])
    assert "symlink" in details and "outside the allowed roots" in details


def test_exit_zero_with_failed_status_is_a_mismatch(ledger, tmp_path):
    add_job(ledger, tmp_path)
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=0, handoff={"status": "failed", "error": "gave up"})
    assert _settle(ledger, rid) == "failed"
    assert "exit_status_agree" in outcomes.get(ledger.conn, rid)["verification"]["failed"]


def test_blockers_end_blocked(ledger, tmp_path):
    add_job(ledger, tmp_path)
    rid = new_run(ledger)
    to_verifying(ledger, rid, handoff={"status": "partial", "blockers": ["needs the prod password"]})
    assert _settle(ledger, rid) == "blocked"
    (esc,) = escalations_of(ledger)
    assert esc["kind"] == "blocked" and "prod password" in esc["reason"]


def test_verify_commands_run_in_job_cwd_with_timeout(ledger, tmp_path):
    add_job(ledger, tmp_path, verify=["test -f marker", {"command": ["sleep", "5"], "timeout": 0.3}])
    (tmp_path / "marker").write_text("")
    rid = new_run(ledger)
    to_verifying(ledger, rid)
    assert _settle(ledger, rid) == "failed"
    checks = [c for c in outcomes.get(ledger.conn, rid)["verification"]["checks"] if c["name"] == "verify_command"]
    assert checks[0]["ok"] is True
    assert checks[1]["ok"] is False and "timed out" in checks[1]["detail"]


def test_invalid_handoff_is_a_finding_not_a_crash(ledger, tmp_path):
    add_job(ledger, tmp_path)
    rid = new_run(ledger)
    to_verifying(ledger, rid, handoff=None, findings=[{"code": "invalid_json", "message": "line 1"}])
    assert _settle(ledger, rid) == "failed"
    assert "handoff_valid" in outcomes.get(ledger.conn, rid)["verification"]["failed"]


def test_failure_queues_retry_and_stays_quiet(ledger, tmp_path):
    add_job(ledger, tmp_path, max_attempts=2, backoff={"initial": 1, "jitter": False})
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=1, handoff={"status": "failed", "error": "rate_limit"})
    assert _settle(ledger, rid) == "failed"
    retry = ledger.one("SELECT * FROM runs WHERE attempt = 2")
    assert retry is not None and retry["state"] == "queued"
    out = outcomes.get(ledger.conn, rid)
    assert out["verdict_kind"] == "retry_pending" and out["silent"] == 1
    assert escalations_of(ledger) == []
    # the retry succeeds: one low-severity note, no escalation
    to_verifying(ledger, retry["id"])
    assert _settle(ledger, retry["id"]) == "succeeded"
    out2 = outcomes.get(ledger.conn, retry["id"])
    assert out2["verdict_kind"] == "recovered_on_retry" and out2["severity"] == "info" and out2["escalate"] == 0
    assert escalations_of(ledger) == []


def test_last_attempt_failing_is_retries_exhausted(ledger, tmp_path):
    add_job(ledger, tmp_path, max_attempts=2, backoff={"initial": 1, "jitter": False})
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=1)
    _settle(ledger, rid)
    retry = ledger.one("SELECT id FROM runs WHERE attempt = 2")["id"]
    to_verifying(ledger, retry, exit_code=1)
    assert _settle(ledger, retry) == "failed"
    (esc,) = escalations_of(ledger)
    assert esc["kind"] == "retries_exhausted" and esc["severity"] == "critical"


def test_settle_on_a_run_not_verifying_does_nothing(ledger, tmp_path):
    add_job(ledger, tmp_path)
    rid = new_run(ledger)
    assert _settle(ledger, rid) == "queued"
    assert supervisor.settle(ledger, 999) == "missing"


def test_settle_twice_judges_once(ledger, tmp_path):
    add_job(ledger, tmp_path)
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=2)
    _settle(ledger, rid)
    _settle(ledger, rid)
    supervisor.judge_run(ledger, rid)
    (esc,) = escalations_of(ledger)
    assert esc["count"] == 1
    verdicts = ledger.query("SELECT * FROM events WHERE run_id = ? AND kind = 'verdict'", (rid,))
    assert len(verdicts) == 1
    assert json.loads(verdicts[0]["detail"])["escalation_id"] == esc["id"]


def test_false_claim_is_surfaced_with_a_retry_queued_and_never_erased_by_a_later_success(ledger, tmp_path):
    add_job(ledger, tmp_path, max_attempts=2, backoff={"initial": 1, "jitter": False})
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=0, handoff={"status": "success", "files_changed": ["report.csv"]})
    assert _settle(ledger, rid) == "failed"
    retry = ledger.one("SELECT id FROM runs WHERE attempt = 2")["id"]
    (esc,) = escalations_of(ledger)
    assert esc["kind"] == "false_claim" and esc["severity"] == "warning" and "a retry is queued" in esc["reason"]
    # the retry starts after the false claim ended: a real recovery, which resolves other kinds
    to_verifying(ledger, retry, started_at=time.time() + 1)
    assert _settle(ledger, retry) == "succeeded"
    assert outcomes.get(ledger.conn, retry)["verdict_kind"] == "recovered_on_retry"
    (esc,) = escalations_of(ledger)
    assert esc["kind"] == "false_claim" and esc["state"] == "open"


def test_declared_min_bytes_is_measured_and_judged(ledger, tmp_path):
    add_job(ledger, tmp_path, expect={"min_bytes": {"out.csv": 100}})
    (tmp_path / "out.csv").write_text("id\n1\n")
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=0)
    assert _settle(ledger, rid) == "succeeded"
    out = outcomes.get(ledger.conn, rid)
    (check,) = [c for c in out["verification"]["checks"] if c["path"] == "out.csv"]
    assert check["size"] == 5 and check["soft"] is True
    assert out["verdict_kind"] == "small_file" and "out.csv is 5 bytes, under expect.min_bytes 100" in out["verdict_reason"]
    (tmp_path / "out.csv").unlink()
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=0)
    assert _settle(ledger, rid) == "succeeded"  # measured only: a missing min_bytes file is a warning
    assert outcomes.get(ledger.conn, rid)["verdict_kind"] == "small_file"
