"""The pure rules judge: baseline, flapping, confidence, partial, lineage policy."""

from __future__ import annotations

from core.spec.model import JobSpec
from core.supervisor.baseline import learn
from core.supervisor.rules import OutcomeFacts, evaluate

SPEC = JobSpec(name="job", command="true")


def _hist(durations, state="succeeded"):
    return [OutcomeFacts(run_id=i, duration_s=d, state=state, status="success" if state == "succeeded" else "failed")
            for i, d in enumerate(durations)]


def test_baseline_needs_ten_successes():
    assert learn([10.0] * 9) is None
    b = learn([10.0] * 9 + [11.0])
    assert b is not None and b.median == 10.0 and b.classify(10.4) is None


def test_baseline_is_robust_to_one_outlier():
    b = learn([10, 11, 9, 10, 10, 12, 10, 9, 11, 10, 900])
    assert b.high < 30 and b.classify(60) == "slow" and b.classify(2) == "too_fast"


def test_slow_run_outside_learned_range_is_a_soft_anomaly():
    v = evaluate(OutcomeFacts(duration_s=80), _hist([20, 21, 19, 20, 22, 20, 18, 20, 21, 20]), SPEC)
    assert v.kind == "slow" and v.escalate and v.severity == "warning" and "duration was 80.0s" in v.reason


def test_slow_but_within_range_is_silent():
    v = evaluate(OutcomeFacts(duration_s=28), _hist([20, 21, 19, 20, 22, 20, 18, 20, 21, 20]), SPEC)
    assert v.kind == "routine" and v.silent


def test_too_fast_success():
    v = evaluate(OutcomeFacts(duration_s=0.2), _hist([60] * 12), SPEC)
    assert v.kind == "too_fast" and v.escalate


def test_explicit_expect_duration_applies_without_history():
    spec = JobSpec(name="job", command="true", expect={"duration": ["1s", "10s"]})
    assert evaluate(OutcomeFacts(duration_s=30), _hist([5]), spec).kind == "slow"


def test_low_confidence_uses_job_threshold():
    spec = JobSpec(name="job", command="true", confidence_threshold=0.8)
    assert evaluate(OutcomeFacts(confidence=0.7), _hist([1]), spec).kind == "low_confidence"
    assert evaluate(OutcomeFacts(confidence=0.7), _hist([1]), SPEC).silent


def test_partial_escalates_warning():
    v = evaluate(OutcomeFacts(status="partial", handoff_status="partial"), _hist([1]), SPEC)
    assert v.kind == "partial" and v.severity == "warning"


def test_flapping_job():
    hist = []
    for i in range(7):
        ok = i % 2 == 0
        hist.append(OutcomeFacts(run_id=i, state="succeeded" if ok else "failed", status="success" if ok else "failed"))
    v = evaluate(OutcomeFacts(run_id=9), hist[1:], SPEC)
    assert v.kind == "flapping" and v.escalate


def test_first_success_is_a_note_not_an_escalation():
    v = evaluate(OutcomeFacts(), [], SPEC)
    assert v.kind == "first_success" and not v.escalate and not v.silent and v.severity == "info"


def test_hard_classes_escalate():
    for state in ("failed", "timed_out", "orphaned"):
        v = evaluate(OutcomeFacts(state=state, status=state, exit_code=None), [], SPEC)
        assert v.hard and v.escalate and v.severity == "critical" and v.kind == state


def test_failure_with_retry_queued_waits_for_the_lineage():
    v = evaluate(OutcomeFacts(state="failed", status="failed", exit_code=75, retry_queued=True), [], SPEC)
    assert v.silent and not v.escalate and v.kind == "retry_pending"


def test_abandoned_is_silent():
    assert evaluate(OutcomeFacts(state="abandoned", status="abandoned"), [], SPEC).silent
