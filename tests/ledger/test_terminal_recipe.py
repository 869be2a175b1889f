"""core.ledger.terminal: a run ends in one transaction with its outcome, its sub-tasks'
settlement and its retry decision; runs.create is the one way a run row is made."""

from __future__ import annotations

import json

import pytest

from core.ledger import lifecycle, runs, terminal
from core.ledger.connection import Ledger
from core.ledger.records import Run
from core.spec.model import JobSpec, Task
from core.supervisor.policy.retry import RETRY
from core.vocabulary import EndReason
from tests.kit.sweep import add_job


def _running(led: Ledger, job: str = "job", **kw) -> int:
    rid = led.write(lambda c: runs.create(c, job=job, slot="s1", trigger="manual", actor="test", not_before=0.0,
                                          spec_hash=None, **kw))
    assert lifecycle.transition(led, rid, 1, "queued", "spawned", actor="test")
    assert lifecycle.transition(led, rid, 1, "spawned", "running", actor="test", fields={"started_at": 1.0})
    return rid


def _events(led: Ledger, run_id: int, kind: str) -> list[dict]:
    return led.rows("SELECT * FROM events WHERE run_id = ? AND kind = ? ORDER BY id", (run_id, kind))


def test_create_queues_attempt_one_with_its_event_and_refuses_an_unknown_trigger(ledger):
    rid = ledger.write(lambda c: runs.create(c, job="job", slot="s", trigger="schedule", actor="runner:x",
                                             not_before=5.0, spec_hash="h", detail={"slot": "s"}))
    row = runs.get(ledger.conn, rid)
    assert (row["state"], row["attempt"], row["trigger"], row["worker"], row["not_before"]) == \
        ("queued", 1, "schedule", "primary", 5.0)
    ev = _events(ledger, rid, "run_queued")
    assert [(e["to_state"], e["reason"], json.loads(e["detail"])) for e in ev] == [("queued", "schedule", {"slot": "s"})]
    # The same slot again: nothing written with if_absent, an error without it.
    assert ledger.write(lambda c: runs.create(c, job="job", slot="s", trigger="schedule", actor="x",
                                              not_before=5.0, spec_hash="h", if_absent=True)) is None
    with pytest.raises(ValueError):
        ledger.write(lambda c: runs.create(c, job="job", slot="t", trigger="sometimes", actor="x",
                                           not_before=0.0, spec_hash=None))


def test_a_failure_ends_with_outcome_and_retry_in_one_move(ledger):
    add_job(ledger, max_attempts=2)
    rid = _running(ledger)
    assert terminal.finish_run(ledger, rid, 1, "running", "timed_out", reason_code=EndReason.TIMEOUT,
                               actor="runner:x", retry=RETRY, reason="timed out after 5s", outcome={"exit_code": None})
    out = ledger.row("SELECT state, status, reason, duration_s FROM job_outcomes WHERE run_id = ?", (rid,))
    assert (out["state"], out["status"], out["reason"]) == ("timed_out", "timed_out", "timed out after 5s")
    row = runs.get(ledger.conn, rid)
    assert (row["reason_code"], row["reason"]) == ("timeout", "timed out after 5s")
    retry = ledger.row("SELECT id, attempt, state, trigger FROM runs WHERE lineage = (SELECT lineage FROM runs"
                       " WHERE id = ?) AND attempt = 2", (rid,))
    assert (retry["state"], retry["trigger"]) == ("queued", "retry")
    assert json.loads(_events(ledger, rid, "retry_decision")[0]["detail"])["retry"] is True


def test_a_success_writes_status_success_and_no_retry_decision(ledger):
    add_job(ledger)
    rid = _running(ledger)
    assert lifecycle.transition(ledger, rid, 1, "running", "verifying", actor="t")
    assert terminal.finish_run(ledger, rid, 1, "verifying", "succeeded", reason_code=EndReason.COMPLETED, actor="supervisor")
    assert ledger.row("SELECT status FROM job_outcomes WHERE run_id = ?", (rid,))["status"] == "success"
    assert _events(ledger, rid, "retry_decision") == []


def test_a_terminal_move_needs_its_reason_code_and_a_live_move_has_none(ledger):
    rid = _running(ledger)
    with pytest.raises(ValueError, match="reason_code"):
        terminal.finish_run(ledger, rid, 1, "running", "timed_out", reason_code=None, actor="t", retry=RETRY)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reason_code"):
        lifecycle.transition(ledger, rid, 1, "running", "verifying", actor="t", reason_code=EndReason.EXIT_CODE)
    assert runs.get(ledger.conn, rid)["state"] == "running"


def test_a_lost_race_writes_nothing(ledger):
    rid = _running(ledger)
    assert not terminal.finish_run(ledger, rid, 1, "spawned", "orphaned", reason_code=EndReason.LEASE_EXPIRED, actor="sweep",
                                   retry=RETRY)
    assert runs.state_of(ledger.conn, rid) == "running"
    assert ledger.row("SELECT 1 FROM job_outcomes WHERE run_id = ?", (rid,)) is None


def test_only_terminal_states_and_legal_moves(ledger):
    rid = _running(ledger)
    with pytest.raises(ValueError, match="terminal"):
        terminal.finish_run(ledger, rid, 1, "running", "verifying", reason_code=EndReason.EXIT_CODE, actor="t")
    with pytest.raises(lifecycle.IllegalTransition):
        terminal.finish_run(ledger, rid, 1, "queued", "succeeded", reason_code=EndReason.COMPLETED, actor="t")


def test_an_ending_fanout_parent_abandons_its_queued_subtasks(ledger):
    spec = JobSpec(name="fan", command=["true"], kind="fanout", tasks=[Task(name="a", command=["true"]),
                                                                       Task(name="b", command=["true"])])
    add_job(ledger, "fan", kind="fanout", tasks=[t.model_dump() for t in spec.tasks])
    parent = _running(ledger, job="fan")
    from core.ledger import fanout
    kids = ledger.write(lambda c: fanout.create_children(c, Run.from_row(runs.get(c, parent)), spec, actor="t"))
    assert len(kids) == 2
    assert terminal.finish_run(ledger, parent, 1, "running", "orphaned", reason_code=EndReason.RUNNER_GONE, actor="sweep",
                               reason="runner_gone", retry=RETRY)
    assert [runs.state_of(ledger.conn, k) for k in kids] == ["abandoned", "abandoned"]
    assert {r["reason"] for r in ledger.rows("SELECT reason FROM job_outcomes WHERE run_id IN (?, ?)", kids)} == \
        {EndReason.PARENT_ENDED}


def test_a_retry_policy_that_raises_never_blocks_the_move(ledger):
    ledger.write(lambda c: c.execute("INSERT INTO jobs (name, spec, spec_hash, updated_at)"
                                     " VALUES ('job', '{not json', 'x', 0)"))
    rid = _running(ledger)
    assert terminal.finish_run(ledger, rid, 1, "running", "orphaned", reason_code=EndReason.LEASE_EXPIRED, actor="sweep",
                               reason="lease_expired", retry=RETRY)
    assert runs.state_of(ledger.conn, rid) == "orphaned"
    decision = _events(ledger, rid, "retry_decision")
    assert len(decision) == 1 and decision[0]["reason"] == "error" and decision[0]["job"] == "job"
    assert ledger.row("SELECT COUNT(*) AS n FROM runs WHERE job = 'job'")["n"] == 1
