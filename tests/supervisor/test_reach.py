"""Reach: the model is consulted on the successes the rules cannot vouch for, and only on those."""

from __future__ import annotations

from core.spec.model import JobSpec
from core.supervisor.reach import reasons
from core.supervisor.rules import OutcomeFacts, evaluate

SPEC = JobSpec(name="sync", command="true", intent="sync the 6 partner feeds into the catalogue")


def _ok(i: int, feeds: int = 6, extra: str = "", **kw) -> OutcomeFacts:
    return OutcomeFacts(run_id=i, job="sync", duration_s=10.0,
                        stdout=f"fetched {feeds} of 6 partner feeds\nupdated {1200 + 7 * i} prices\n{extra}", **kw)


HIST = [_ok(i) for i in range(8)]


def _why(case: OutcomeFacts, hist: list[OutcomeFacts], spec: JobSpec | None = SPEC, n: int = 5) -> list[str]:
    return reasons(case, hist, spec, evaluate(case, hist, spec), first_successes=n)


def test_a_routine_success_with_a_learned_baseline_is_not_consulted():
    assert _why(_ok(20), HIST) == []


def test_a_jobs_first_successes_are_consulted():
    assert _why(_ok(1), []) == ["success 1 of its first 5"]
    assert _why(_ok(5), HIST[:4]) == ["success 5 of its first 5"]
    assert "success 1 of its first 3" not in _why(_ok(9), HIST[:3], n=3)


def test_a_line_or_count_with_no_baseline_is_consulted_and_named_by_place_not_text():
    got = _why(_ok(20, extra="switched feed acme to the backup mirror\n"), HIST)
    assert got == ["stdout line 3 has a shape no learned success printed"]
    got = _why(_ok(20, extra="skipped 4 stale offers\n"), HIST)
    assert got and "skipped" not in " ".join(got)  # the job's own words stay in the untrusted block


def test_a_count_far_off_its_learned_range_short_of_the_rules_threshold_is_consulted():
    case = OutcomeFacts(run_id=30, job="sync", duration_s=10.0, stdout="fetched 6 of 6 partner feeds\nupdated 9000 prices\n")
    rules = evaluate(case, HIST, SPEC)
    assert rules.silent  # 7x the usual: the rules page only beyond 10x
    assert reasons(case, HIST, SPEC, rules) == ["stdout line 2 carries a count outside 4x its learned range"]


def test_an_output_repeating_the_previous_success_byte_for_byte_is_consulted():
    hist = [_ok(i) for i in range(8)]
    again = OutcomeFacts(run_id=9, job="sync", duration_s=10.0, stdout=hist[-1].stdout)
    assert _why(again, hist) == ["its output repeats the previous success's byte for byte, though its successes"
                                 " always differed"]


def test_a_handoff_whose_result_is_prose_is_consulted():
    prose = {"status": "success", "result": {"summary": "I could not reach two partners so I reused last week's"
                                                        " prices for them, which should be close enough"}}
    assert _why(_ok(20, handoff=prose), HIST) == ["its handoff result is prose the rules cannot read"]
    assert _why(_ok(20, handoff={"status": "success", "result": {"feeds": 6}}), HIST) == []


def test_an_intent_quantity_the_output_never_mentions_is_consulted_while_no_baseline_vouches():
    spec = JobSpec(name="sync", command="true", intent="sync the 6 partner feeds into the catalogue")
    case = OutcomeFacts(run_id=1, job="sync", duration_s=1.0, stdout="updated 1200 prices\n")
    assert 'its intent names "6", which its output does not mention' in _why(case, [], spec)
    assert not any("intent names" in r for r in _why(_ok(1), [], spec))  # "6 of 6" mentions it


def test_failures_hard_verdicts_and_jobs_without_intent_are_not_consulted():
    failed = OutcomeFacts(run_id=3, job="sync", state="failed", status="failed", exit_code=1)
    assert _why(failed, HIST) == []
    retrying = OutcomeFacts(run_id=3, job="sync", state="failed", status="failed", exit_code=1, retry_queued=True)
    assert _why(retrying, HIST) == []
    assert _why(_ok(1), [], spec=JobSpec(name="sync", command="true")) == []  # nothing to quote a clause of


def test_soft_verdicts_are_consulted_so_the_model_may_raise_or_annotate():
    got = _why(_ok(20, feeds=0), HIST)
    assert got and got[0].startswith("the rules found ")
