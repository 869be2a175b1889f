"""A failed verification whose check will fail the same way again is not left silent while a
retry is pending: it escalates at once, naming the check."""

from __future__ import annotations

from core.ledger import outcomes
from core.spec.model import JobSpec
from core.supervisor import supervisor
from core.supervisor.rules import OutcomeFacts, evaluate
from tests.kit.supervisor import add_job, escalations_of, new_run, to_verifying

SPEC = JobSpec(name="load", command="true", max_attempts=3)
SCHEMA = "verify_command: python checks/not_null.py: exit 1: 3114 rows with NULL region ({:.1f}s)"


def _failed(attempt: int, check: str, *, deterministic: bool = False, retry: bool = True) -> OutcomeFacts:
    return OutcomeFacts(run_id=attempt, job="load", attempt=attempt, state="failed", status="failed",
                        reason="verification_failed", exit_code=0, retry_queued=retry,
                        verification_failed=[check], deterministic_failed=[check] if deterministic else [])


def test_a_check_marked_deterministic_escalates_at_once_with_a_retry_queued():
    v = evaluate(_failed(1, SCHEMA.format(0.3), deterministic=True), [], SPEC)
    assert v.escalate and v.hard and v.kind == "verification_failed"
    assert "python checks/not_null.py: exit 1: 3114 rows with NULL region" in v.reason
    assert "a check marked deterministic" in v.reason and "the queued retry will fail the same way" in v.reason


def test_the_same_check_failing_the_same_way_twice_escalates_at_once():
    first = _failed(1, SCHEMA.format(0.3))
    assert evaluate(first, [], SPEC).kind == "retry_pending"  # once may be chance
    v = evaluate(_failed(2, SCHEMA.format(0.5)), [first], SPEC)  # only the timing differs
    assert v.escalate and v.kind == "verification_failed"
    assert "the same check failing the same way as on attempt 1" in v.reason


def test_a_check_failing_differently_is_retried_silently():
    first = _failed(1, "verify_command: curl https://warehouse/health: exit 28: timed out (10.0s)")
    v = evaluate(_failed(2, SCHEMA.format(0.4)), [first], SPEC)
    assert v.silent and v.kind == "retry_pending"


def test_settle_escalates_a_deterministic_verify_failure_while_its_retry_waits(ledger, tmp_path):
    add_job(ledger, tmp_path, max_attempts=3,
            verify=[{"command": "echo 'column amount_cents missing'; exit 1", "deterministic": True}])
    rid = new_run(ledger)
    to_verifying(ledger, rid, stdout="exported 15000 rows\n")
    assert supervisor.settle(ledger, rid, settings=None) == "failed"
    out = outcomes.get(ledger.conn, rid)
    assert out["verification"]["checks"][-1]["deterministic"] is True
    assert ledger.one("SELECT 1 FROM runs WHERE attempt = 2") is not None, "the retry is still queued"
    (esc,) = escalations_of(ledger)
    assert esc["kind"] == "verification_failed" and esc["severity"] == "critical"
    assert "column amount_cents missing" in esc["reason"] and "marked deterministic" in esc["reason"]
