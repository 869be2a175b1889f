"""The store protocol and its SQL implementation agree, and the store hands out typed records:
every ``Store`` operation exists on ``SqlStore`` with the same parameters, a judging case is
one read of records with JSON decoded, and a failed attempt cannot end without the retry
policy."""

from __future__ import annotations

import inspect

import pytest

from core.ledger import lifecycle
from core.ledger.lifecycle import State
from core.ledger.records import Job, JudgingCase, Outcome, Run
from core.ledger.sql_store import SqlStore
from core.ledger.store import Store
from core.supervisor import supervisor
from core.supervisor.policy.retry import RETRY
from core.vocabulary import EndReason
from tests.kit.supervisor import add_job, new_run, to_verifying


def _operations(cls: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in vars(cls).items()
            if inspect.isfunction(fn) and not name.startswith("_")}


def test_sql_store_implements_every_operation_with_the_protocols_parameters():
    protocol, sql = _operations(Store), _operations(SqlStore)
    assert protocol, "the protocol declares operations"
    missing = sorted(set(protocol) - set(sql))
    assert missing == []
    for name, sig in protocol.items():
        assert list(sql[name].parameters) == list(sig.parameters), name


def test_judging_case_is_typed_records_with_json_decoded(ledger, tmp_path):
    add_job(ledger, tmp_path, max_attempts=2)
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=0, stdout="rows=3\n", handoff={"status": "success", "result": {"n": 3}})
    case = SqlStore(ledger).judging_case(rid)
    assert isinstance(case, JudgingCase)
    assert isinstance(case.run, Run) and case.run.id == rid and case.run.state == State.VERIFYING
    assert isinstance(case.outcome, Outcome) and case.outcome.handoff == {"status": "success", "result": {"n": 3}}
    assert isinstance(case.job, Job) and case.job.name == "job"
    assert (case.retry_queued, case.prior_failures, case.escalated_before) == (False, 0, None)
    assert SqlStore(ledger).judging_case(rid + 1000) is None


def test_a_failed_attempt_cannot_end_without_the_retry_policy(ledger, tmp_path):
    add_job(ledger, tmp_path, max_attempts=2)
    rid = new_run(ledger)
    assert lifecycle.transition(ledger, rid, 1, State.QUEUED, State.SPAWNED, actor="test")
    assert lifecycle.transition(ledger, rid, 1, State.SPAWNED, State.RUNNING, actor="test")
    with pytest.raises(ValueError, match="retry policy"):
        SqlStore(ledger).finish_run(rid, 1, State.RUNNING, State.TIMED_OUT, reason_code=EndReason.TIMEOUT, actor="test")
    assert SqlStore(ledger).run_state(rid) == State.RUNNING  # nothing written
    assert SqlStore(ledger, retry=RETRY).finish_run(rid, 1, State.RUNNING, State.TIMED_OUT, reason_code=EndReason.TIMEOUT, actor="test")
    case = SqlStore(ledger).judging_case(rid)
    assert case is not None and case.retry_queued  # the policy queued attempt 2 with the move


def test_settle_records_the_verdict_in_the_moves_transaction(ledger, tmp_path):
    add_job(ledger, tmp_path)
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=0, handoff={"status": "success"})
    assert supervisor.settle(ledger, rid, settings=None) == State.SUCCEEDED
    out = SqlStore(ledger).outcome(rid)
    assert out is not None and out.judged_by == "rules" and out.state == State.SUCCEEDED
    verdicts = [e for e in ledger.query("SELECT kind FROM events WHERE run_id = ?", (rid,)) if e[0] == "verdict"]
    assert len(verdicts) == 1
