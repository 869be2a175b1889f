"""Escalations: dedup with a count, operator actions with attribution and races, snooze
expiry, auto-resolve on recovery, runner gap, late results."""

from __future__ import annotations

import json
import threading
import time

from core import actions
from core.ledger import escalations
from core.ledger.connection import Ledger
from core.spec.settings import Settings
from core.supervisor import supervisor
from tests.kit.supervisor import add_job, end_as, escalations_of, new_run, to_verifying


def _fail(ledger, code=1):
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=code)
    supervisor.settle(ledger, rid)
    return rid


def _succeed(ledger):
    rid = new_run(ledger)
    to_verifying(ledger, rid, started_at=time.time())  # started after the failures ended
    supervisor.settle(ledger, rid)
    return rid


def test_twenty_failures_are_one_escalation_with_count_twenty(ledger, tmp_path):
    add_job(ledger, tmp_path, owner="ana")
    rids = [_fail(ledger) for _ in range(20)]
    (esc,) = escalations_of(ledger)
    assert esc["count"] == 20 and esc["latest_run_id"] == rids[-1] and esc["owner"] == "ana"
    assert esc["first_seen"] <= esc["last_seen"]


def test_recovery_auto_resolves_with_event(ledger, tmp_path):
    add_job(ledger, tmp_path)
    _fail(ledger)
    rid = _succeed(ledger)
    (esc,) = escalations_of(ledger)
    assert esc["state"] == "resolved" and esc["resolved_by"] == "supervisor"
    ev = ledger.one("SELECT * FROM events WHERE kind = 'escalation_resolved'")
    assert ev["run_id"] == rid and json.loads(ev["detail"])["auto"] is True
    _fail(ledger)  # a new failure after recovery is a new escalation
    assert [e["state"] for e in escalations_of(ledger)] == ["resolved", "open"]


def test_acknowledge_race_exactly_one_wins(ledger, tmp_path):
    add_job(ledger, tmp_path)
    _fail(ledger)
    esc_id = escalations_of(ledger)[0]["id"]
    results = {}
    barrier = threading.Barrier(2)

    def act(name):
        with Ledger(ledger.target) as own:
            barrier.wait()
            results[name] = actions.acknowledge(own, esc_id, name)

    threads = [threading.Thread(target=act, args=(n,)) for n in ("ana", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [n for n, r in results.items() if r.ok]
    assert len(winners) == 1
    loser = "bob" if winners == ["ana"] else "ana"
    assert results[loser].message.startswith(f"escalation {esc_id} already acknowledged by {winners[0]} at ")
    assert results[loser].message.endswith("UTC")
    evs = ledger.query("SELECT actor FROM events WHERE kind = 'escalation_acknowledged'")
    assert [e["actor"] for e in evs] == [f"operator:{winners[0]}"]


def test_acknowledge_is_idempotent_for_the_same_operator(ledger, tmp_path):
    add_job(ledger, tmp_path)
    _fail(ledger)
    esc_id = escalations_of(ledger)[0]["id"]
    assert actions.acknowledge(ledger, esc_id, "ana").ok
    again = actions.acknowledge(ledger, esc_id, "ana")
    assert again.ok and "nothing to do" in again.message
    assert len(ledger.query("SELECT 1 FROM events WHERE kind = 'escalation_acknowledged'")) == 1
    assert not actions.acknowledge(ledger, 999, "ana").ok


def test_resolve_then_resolve_again_names_the_first(ledger, tmp_path):
    add_job(ledger, tmp_path)
    _fail(ledger)
    esc_id = escalations_of(ledger)[0]["id"]
    assert actions.resolve(ledger, esc_id, "ana").ok
    res = actions.resolve(ledger, esc_id, "bob")
    assert not res.ok and "already resolved by ana" in res.message


def test_snooze_reopens_when_still_unresolved(ledger, tmp_path):
    add_job(ledger, tmp_path)
    _fail(ledger)
    esc_id = escalations_of(ledger)[0]["id"]
    now = time.time()
    assert not actions.snooze(ledger, esc_id, "ana", now - 1).ok
    assert actions.snooze(ledger, esc_id, "ana", now + 60, now=now).ok
    assert escalations.expire_snoozes(ledger, now=now + 30) == []
    assert escalations.expire_snoozes(ledger, now=now + 61) == [esc_id]
    esc = escalations.get(ledger, esc_id)
    assert esc["state"] == "open"
    assert ledger.one("SELECT 1 FROM events WHERE kind = 'escalation_reopened'") is not None


def test_snoozed_escalation_resolves_on_recovery_instead_of_reopening(ledger, tmp_path):
    add_job(ledger, tmp_path)
    _fail(ledger)
    esc_id = escalations_of(ledger)[0]["id"]
    actions.snooze(ledger, esc_id, "ana", time.time() + 60)
    _fail(ledger)
    assert escalations.get(ledger, esc_id)["state"] == "snoozed"  # counted, still snoozed
    assert escalations.get(ledger, esc_id)["count"] == 2
    _succeed(ledger)
    assert escalations.get(ledger, esc_id)["state"] == "resolved"
    assert escalations.expire_snoozes(ledger, now=time.time() + 120) == []


def test_timed_out_and_orphaned_escalate_via_judge_run(ledger, tmp_path):
    add_job(ledger, tmp_path)
    for state in ("timed_out", "orphaned"):
        rid = new_run(ledger)
        end_as(ledger, rid, state)
        supervisor.judge_run(ledger, rid)
    assert sorted(e["kind"] for e in escalations_of(ledger)) == ["orphaned", "timed_out"]


def test_late_result_escalates_once_per_run(ledger, tmp_path):
    add_job(ledger, tmp_path, owner="ana")
    rid = new_run(ledger)
    end_as(ledger, rid, "orphaned")
    ledger.write(lambda c: c.execute(
        "INSERT INTO events (at, run_id, job, actor, kind, detail) VALUES (?,?,?,?,?,?)",
        (time.time(), rid, "job", "runner:x", "late_result", json.dumps({"exit_code": 0, "signal": None}))))
    supervisor.note_late_result(ledger, rid)
    supervisor.note_late_result(ledger, rid)
    (esc,) = [e for e in escalations_of(ledger) if e["kind"] == "late_result"]
    assert esc["count"] == 1 and esc["owner"] == "ana" and "exit_code=0" in esc["reason"]


def test_runner_gap_opens_and_resolves(ledger, tmp_path):
    now = time.time()
    ledger.write(lambda c: c.execute(
        "INSERT INTO runners (id, hostname, pid, started_at, heartbeat_at, heartbeat_s, lease_s)"
        " VALUES ('r1', 'host', 1, ?, ?, 5, 30)", (now - 100, now - 60)))
    assert supervisor.check_runner_gap(ledger, now=now) == "opened"
    assert supervisor.check_runner_gap(ledger, now=now + 1) is None  # no double counting
    (esc,) = escalations_of(ledger, supervisor.RUNNER_JOB)
    assert esc["kind"] == "runner_gap" and esc["severity"] == "critical" and esc["count"] == 1
    ledger.write(lambda c: c.execute(
        "INSERT INTO runners (id, hostname, pid, started_at, heartbeat_at, heartbeat_s, lease_s)"
        " VALUES ('r2', 'host', 2, ?, ?, 5, 30)", (now, now)))
    assert supervisor.check_runner_gap(ledger, now=now + 2) == "resolved"


def test_periodic_runs_all_steps(ledger, tmp_path):
    add_job(ledger, tmp_path)
    _fail(ledger)
    esc_id = escalations_of(ledger)[0]["id"]
    actions.snooze(ledger, esc_id, "ana", time.time() + 0.05)
    time.sleep(0.1)
    supervisor.periodic(ledger, Settings(ledger=tmp_path / "wk.db"))
    assert escalations.get(ledger, esc_id)["state"] == "open"


def test_list_escalations_filters(ledger, tmp_path):
    add_job(ledger, tmp_path)
    add_job(ledger, tmp_path, name="other")
    _fail(ledger)
    rid = new_run(ledger, "other")
    end_as(ledger, rid, "timed_out")
    supervisor.judge_run(ledger, rid)
    assert len(escalations.list_escalations(ledger)) == 2
    assert [e.job for e in escalations.list_escalations(ledger, job="other")] == ["other"]
    actions.resolve(ledger, escalations_of(ledger)[0]["id"], "ana")
    assert [e.job for e in escalations.list_escalations(ledger, state="active")] == ["other"]


def test_overlapping_success_does_not_resolve_a_failure_it_overlapped(ledger, tmp_path):
    """Concurrency > 1: a run that started before the failed run ended proves nothing about it."""
    add_job(ledger, tmp_path, concurrency=2)
    long_ok = new_run(ledger)
    started = time.time()
    to_verifying(ledger, long_ok, started_at=started - 5)  # started before the failure below
    failed = _fail(ledger)
    supervisor.settle(ledger, long_ok)  # ends after the failure, but started before it ended
    (esc,) = escalations_of(ledger)
    assert esc["state"] == "open" and esc["latest_run_id"] == failed
    later = _succeed(ledger)  # started after the failure ended: a real recovery
    (esc,) = escalations_of(ledger)
    assert esc["state"] == "resolved"
    ev = ledger.one("SELECT * FROM events WHERE kind = 'escalation_resolved'")
    assert ev["run_id"] == later


def test_escaped_processes_are_a_warning_whatever_the_outcome(ledger, tmp_path):
    add_job(ledger, tmp_path, owner="ana")
    rid = new_run(ledger)
    to_verifying(ledger, rid, handoff={"status": "success"}, findings=[
        {"code": "escaped_processes", "message": "ended (SIGTERM): pid 4242 (sleep 60)"}])
    assert supervisor.settle(ledger, rid) == "succeeded"  # the run itself still succeeded
    (esc,) = [e for e in escalations_of(ledger) if e["kind"] == "escaped_processes"]
    assert esc["severity"] == "warning" and esc["owner"] == "ana" and "pid 4242" in esc["reason"]
    assert esc["state"] == "open"  # its own success does not resolve it
    _succeed(ledger)  # a later clean run does
    (esc,) = [e for e in escalations_of(ledger) if e["kind"] == "escaped_processes"]
    assert esc["state"] == "resolved"
