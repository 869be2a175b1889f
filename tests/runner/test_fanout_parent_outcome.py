"""What a fan-out parent records once its sub-tasks settled (``core.ledger.fanout.parent_outcome``):
its status, and in words why it failed — each reason names the rule that decided it."""

from __future__ import annotations

import pytest

from core.ledger.fanout import parent_outcome
from core.spec.model import JobSpec, Task


def spec(*, allow_partial: bool = True) -> JobSpec:
    return JobSpec(name="fan", command=["true"], kind="fanout", allow_partial=allow_partial,
                   tasks=[Task(name="a", command=["true"]), Task(name="b", command=["true"])])


A_OK = {"task": "a", "ok": True, "state": "succeeded"}
B_FAILED = {"task": "b", "ok": False, "state": "failed", "reason": "exit 2"}
A_FAILED = {"task": "a", "ok": False, "state": "failed", "reason": "exit 1"}


def test_all_succeeded_is_success():
    code, out = parent_outcome(spec(), [A_OK, {**B_FAILED, "ok": True, "state": "succeeded"}], True)
    assert (code, out["status"]) == (0, "success")


def test_one_failed_with_a_synthesis_and_partial_allowed_is_partial():
    code, out = parent_outcome(spec(), [A_OK, B_FAILED], True)
    assert (code, out["status"], out["result"]["missing"]) == (0, "partial", ["b"])
    assert "b (failed: exit 2)" in out["notes"]


@pytest.mark.parametrize(("allow_partial", "results", "synth_ok", "why"), [
    # allow_partial = false: a task did succeed, so "nothing succeeded" would be false
    (False, [A_OK, B_FAILED], True, "a sub-task failed and the job does not allow a partial result"),
    (True, [A_FAILED, B_FAILED], True, "nothing succeeded"),
    (True, [A_OK, B_FAILED], False, "synthesis failed"),
    (True, [A_OK, B_FAILED], None, "no synthesis to salvage a partial result"),
])
def test_a_failed_parent_says_which_rule_failed_it(allow_partial, results, synth_ok, why):
    code, out = parent_outcome(spec(allow_partial=allow_partial), results, synth_ok)
    assert (code, out["status"]) == (1, "failed")
    assert out["error"].startswith(why), out["error"]
    assert out["result"]["succeeded"] == [r["task"] for r in results if r["ok"]]
