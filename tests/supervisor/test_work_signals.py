"""The judge reads the work, not only the exit: learned line shapes, work counts, file sizes,
result content and declared checks (pure rules, raw evidence)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.spec.model import JobSpec
from core.supervisor.evidence import mask, result_problems
from core.supervisor.rules import OutcomeFacts, evaluate

SPEC = JobSpec(name="export", command="true")


def _ok(i: int, rows: int, size: int = 20_000) -> OutcomeFacts:
    return OutcomeFacts(run_id=i, job="export", duration_s=10.0,
                        stdout=f"2026-01-0{1 + i % 9}T02:00:0{i % 10}Z connecting to db-{i}\nexported {rows} rows "
                               f"to /srv/out/export-{i}.csv\ndone in {3 + i % 4}.2s",
                        files=[{"path": "out/export.csv", "role": "artifact", "size": size + 37 * i}])


HIST = [_ok(i, 15000 + 113 * i) for i in range(12)]


def test_masking_keeps_counts_and_hides_ids_paths_times():
    shape, counts = mask("2026-01-01T02:00:00Z exported 15234 rows to /srv/out/x.csv in 3.2s (job a1b2c3d4e5)")
    assert shape == "<TIME> exported <N> rows to <PATH> in <QTY> (job <HEX>)" and counts == (15234,)


def test_routine_success_with_varying_numbers_is_silent():
    v = evaluate(_ok(20, 15900), HIST, SPEC)
    assert v.silent and v.kind == "routine", v.reason


def test_zero_work_where_history_never_is_zero():
    v = evaluate(_ok(20, 0), HIST, SPEC)
    assert v.escalate and v.kind == "zero_work" and v.severity == "warning"
    assert '"exported 0 rows to /srv/out/export-20.csv"' in v.reason and "usually" in v.reason


def test_count_far_below_its_range():
    assert evaluate(_ok(20, 12), HIST, SPEC).kind == "work_count"


def test_new_error_like_line_in_a_success():
    case = _ok(20, 15500)
    case.stdout += "\nWARNING: 3 partitions skipped (permission denied)"
    v = evaluate(case, HIST, SPEC)
    assert v.kind == "new_output_shape" and "permission denied" in v.reason


def test_usual_line_missing():
    case = OutcomeFacts(run_id=20, job="export", duration_s=10.0, stdout="connecting to db-1\nnothing new",
                        files=HIST[0].files)
    v = evaluate(case, HIST, SPEC)
    assert "missing_output" in v.anomalies and '"exported 16243 rows to /srv/out/export-11.csv"' in v.reason


def test_empty_and_shrunken_files():
    case = _ok(20, 15500)
    case.files = [{"path": "out/export.csv", "size": 0}]
    assert evaluate(case, HIST, SPEC).kind == "empty_file"
    case.files = [{"path": "out/export.csv", "size": 900}]
    v = evaluate(case, HIST, SPEC)
    assert v.kind == "shrunken_file" and "out/export.csv is 900 bytes, usually" in v.reason


def test_empty_file_needs_no_history():
    v = evaluate(OutcomeFacts(job="r", files=[{"path": "r.pdf", "size": 0}]), [], SPEC)
    assert v.kind == "empty_file" and "r.pdf" in v.reason


def test_success_whose_result_says_children_failed():
    case = OutcomeFacts(job="fan", handoff={"status": "success", "result": {"children": 8, "failed": 2}})
    v = evaluate(case, HIST, SPEC)
    assert v.kind == "partial_content" and "failed = 2 of 8" in v.reason
    assert result_problems({"status": "success", "result": {"degraded": True}}) == ["result.degraded = true"]
    assert result_problems({"status": "success", "result": {"failed": 0, "total": 8}}) == []


def test_declared_forbidden_output_and_min_bytes():
    spec = JobSpec(name="export", command="true",
                   expect={"forbid_output": ["(?i)fallback"], "min_bytes": {"out/export.csv": 1000}})
    case = OutcomeFacts(job="export", stdout="using fallback mirror\nok",
                        files=[{"path": "out/export.csv", "size": 12}])
    v = evaluate(case, [], spec)
    assert {"forbidden_output", "small_file"} <= set(v.anomalies) and "under expect.min_bytes 1000" in v.reason


def test_forbid_output_is_validated():
    with pytest.raises(ValidationError, match="forbid_output"):
        JobSpec(name="x", command="true", expect={"forbid_output": ["(unclosed"]})
    with pytest.raises(ValidationError):
        JobSpec(name="x", command="true", expect={"min_bytes": {"a": -1}})


def test_false_claim_surfaces_while_a_retry_is_queued():
    case = OutcomeFacts(job="w", state="failed", status="failed", reason="verification_failed", retry_queued=True,
                        false_claims=["it says it changed report.csv (does not exist)"])
    v = evaluate(case, [], SPEC)
    assert v.escalate and v.hard and v.kind == "false_claim" and v.severity == "warning"
    assert "report.csv" in v.reason


def test_hard_reason_quotes_the_jobs_own_last_lines():
    case = OutcomeFacts(job="backup", state="failed", status="failed", exit_code=2,
                        stderr="starting\npg_dump: error: connection to server failed: FATAL: too many clients")
    v = evaluate(case, [], SPEC)
    assert v.reason.startswith("backup exited with code 2; last output:") and "too many clients" in v.reason


def test_every_kind_the_rules_name_is_in_the_vocabulary():
    from core.supervisor import rules
    from core.vocabulary import EscalationKind

    named = (rules.HARD_KINDS | rules.SOFT_KINDS | rules.NOTE_KINDS | rules.SILENT_KINDS
             | rules.RECOVERABLE_KINDS | set(rules._SOFT_ORDER))
    assert named <= {k.value for k in EscalationKind}, named - {k.value for k in EscalationKind}


def _escalated(f: OutcomeFacts, kind: str) -> OutcomeFacts:
    f.verdict_kind, f.escalated = kind, True
    return f


def test_a_success_escalated_as_an_anomaly_teaches_no_baseline():
    # One earlier zero-row run, one empty file, one error line — each escalated when it
    # happened — must not make the same wrong thing routine the next time.
    zero = _escalated(_ok(12, 0), "zero_work")
    v = evaluate(_ok(20, 0), [*HIST, zero, _ok(13, 15100)], SPEC)
    assert v.kind == "zero_work" and v.escalate, v.reason
    empty = _escalated(_ok(12, 15100, size=-37 * 12), "empty_file")
    v = evaluate(_ok(20, 15100, size=300 - 37 * 20), [*HIST, empty], SPEC)
    assert "small_file" in v.anomalies or "shrunken_file" in v.anomalies, v.reason
    warned = _escalated(_ok(12, 15100), "new_output_shape")
    warned.stdout += "\nWARNING: 3 partitions skipped (permission denied)"
    case = _ok(20, 15500)
    case.stdout += "\nWARNING: 4 partitions skipped (permission denied)"
    assert evaluate(case, [*HIST, warned], SPEC).kind == "new_output_shape"


def test_unescalated_successes_still_teach():
    # The same zero-row run judged unremarkable (e.g. corpus history without verdicts) counts.
    v = evaluate(_ok(20, 0), [*HIST, _ok(12, 0)], SPEC)
    assert v.kind != "zero_work", v.reason


def _ticks(i: int, upto: int) -> OutcomeFacts:
    return OutcomeFacts(run_id=i, job="export", duration_s=25.0,
                        stdout="\n".join(f"tick {n}" for n in range(1, upto + 1)) + "\ndone")


def test_a_progress_counter_is_one_count_not_a_work_count_on_every_line():
    # A job that prints "tick 1" ... "tick 25" was paged work_count on every run: its later
    # lines were judged against the range learned from the first line alone.
    hist = [_ticks(i, 25) for i in range(8)]
    v = evaluate(_ticks(20, 25), hist, SPEC)
    assert v.silent and v.kind == "routine", v.reason


def test_a_progress_counter_that_stops_far_short_is_a_work_count():
    hist = [_ticks(i, 25) for i in range(8)]
    v = evaluate(_ticks(20, 1), hist, SPEC)
    assert v.kind == "work_count" and '"tick 1"' in v.reason and "usually 25-25" in v.reason, v.reason
