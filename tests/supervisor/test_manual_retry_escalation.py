"""A manual retry of a lineage whose failure was escalated, failing again, counts on the same
escalation: it does not open a second kind (``retries_exhausted`` beside ``failed``) for the
same failure."""

from __future__ import annotations

import sys

import pytest

from core import actions
from core.ledger.connection import Ledger
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs

PY = sys.executable


def escalations(db) -> list[tuple]:
    return [(r["kind"], r["count"], r["state"]) for r in query(db, "SELECT kind, count, state FROM escalations"
                                                                   " ORDER BY id")]


def judged(db, run_id: int):
    return query(db, "SELECT verdict_kind FROM job_outcomes WHERE run_id = ? AND judged_by IS NOT NULL", (run_id,))


@pytest.mark.slow
@pytest.mark.parametrize(("attempts", "kind"), [(1, "failed"), (2, "retries_exhausted")])
def test_manual_retry_of_an_escalated_lineage_counts_on_its_escalation(tmp_path, attempts, kind):
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "broken"
command = ["{PY}", "-c", "import sys; sys.exit('disk full')"]
once = true
max_attempts = {attempts}
backoff = {{ initial = "0.1s", jitter = false }}
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        first = wait_for(lambda: query(s.ledger, "SELECT id FROM runs WHERE attempt = ? AND state = 'failed'",
                                       (attempts,)))[0]["id"]
        wait_for(lambda: judged(s.ledger, first))
        assert escalations(s.ledger) == [(kind, 1, "open")]
        with Ledger(s.ledger) as ledger:
            res = actions.retry(ledger, first, "ana")
        assert res.ok, res.message
        wait_for(lambda: judged(s.ledger, res.target_id))
    assert judged(s.ledger, res.target_id)[0]["verdict_kind"] == kind
    assert escalations(s.ledger) == [(kind, 2, "open")]


def test_rules_count_a_failed_manual_retry_on_the_lineage_kind():
    from core.supervisor.rules import OutcomeFacts, evaluate

    base = {"job": "broken", "state": "failed", "status": "failed", "exit_code": 1, "stderr": "disk full\n"}
    plain = evaluate(OutcomeFacts.from_dict({**base, "attempt": 2, "prior_failures": 1}), [], None)
    assert plain.kind == "retries_exhausted"
    retried = evaluate(OutcomeFacts.from_dict({**base, "attempt": 2, "prior_failures": 1, "escalated_as": "failed"}),
                       [], None)
    assert (retried.kind, retried.escalate, retried.hard) == ("failed", True, True)
    assert "manual retry" in retried.reason and "disk full" in retried.reason
    timed = evaluate(OutcomeFacts.from_dict({**base, "attempt": 3, "escalated_as": "timed_out"}), [], None)
    assert timed.kind == "timed_out" and timed.anomalies == ["timed_out", "failed"]
