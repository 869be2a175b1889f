"""Breakers that fit the job: default window and cooldown follow the job's period, an
opening breaker is escalated with the failures that opened it, and ``breaker = false``
turns it off (closing one that is open)."""

from __future__ import annotations

import json

import pytest

from core.ledger import breaker
from core.ledger.connection import Ledger
from core.ledger.jobs import sync_jobs
from core.spec.loader import load_dir
from core.spec.model import JobSpec
from core.supervisor.policy.breaker import BREAKER
from core.supervisor.policy.retry import RETRY
from tests.kit.runs import add_run

T0 = 1_767_268_800.0


@pytest.mark.parametrize(("when", "window", "cooldown"), [
    ({"every": "5s"}, 30.0, 50.0),                       # a 5-second job: its last six slots, ten skipped
    ({"every": "1m"}, 360.0, 600.0),
    ({"schedule": "*/15 * * * *"}, 5400.0, 3600.0),      # cooldown at most an hour
    ({"schedule": "0 3 * * *"}, 6 * 86400.0, 86400.0),   # a daily job: six days, one slot skipped
    ({"schedule": "0 9 * * 1-5"}, 6 * 86400.0, 86400.0),  # weekdays: the typical gap is a day
    ({}, 300.0, 600.0),                                  # manual: no period, the fixed defaults
])
def test_default_thresholds_follow_the_period(when, window, cooldown):
    b = JobSpec(name="j", command="true", **when).breaker
    assert (b.enabled, b.failures, b.window, b.cooldown) == (True, 3, window, cooldown)


def test_written_values_win_and_missing_ones_are_fitted():
    b = JobSpec(name="j", command="true", every=5, breaker={"failures": 5}).breaker
    assert (b.failures, b.window, b.cooldown) == (5, 50.0, 50.0)
    b = JobSpec(name="j", command="true", every=5, breaker={"window": "1h", "cooldown": "2h"}).breaker
    assert (b.window, b.cooldown) == (3600.0, 7200.0)


def test_breaker_false_in_toml_turns_it_off(tmp_path):
    (tmp_path / "a.toml").write_text('name = "a"\ncommand = "true"\nevery = "5s"\nbreaker = false\n')
    (tmp_path / "b.toml").write_text('name = "b"\ncommand = "true"\nevery = "5s"\n[breaker]\nenabled = false\n')
    res = load_dir(tmp_path)
    assert not res.errors
    assert not res.jobs["a"].spec.breaker.enabled and not res.jobs["b"].spec.breaker.enabled


def _ledger_with(tmp_path, spec_text: str) -> tuple[Ledger, JobSpec]:
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "j.toml").write_text(spec_text)
    led = Ledger(tmp_path / "wk.db")
    res = load_dir(specs)
    sync_jobs(led, res)
    return led, res.jobs["j"].spec


def _fail(led: Ledger, n: int, ended_at: float, stderr: str = "", *, short: bool = False,
          trigger: str = "schedule", exit_code: int = 1) -> int:
    """A failed run; its stderr stored as capture stores it: a short one whole in stderr_head
    (stderr_tail NULL), a long one's end in stderr_tail."""
    def tx(conn):
        return add_run(conn, "j", "failed", lineage=f"L{n}", slot=f"s{n}", trigger=trigger, started_at=ended_at - 1,
                       ended_at=ended_at, end={"exit_code": exit_code},
                       outcome={"stderr_head": stderr if short else "", "stderr_tail": None if short else stderr})
    return led.write(tx)


def test_a_5_second_job_failing_now_and_then_keeps_its_breaker_closed(tmp_path):
    led, spec = _ledger_with(tmp_path, 'name = "j"\ncommand = "true"\nevery = "5s"\n')
    # three failures in two minutes of a job that ran 24 times: the old fixed 3-in-5-minutes opened
    ids = [_fail(led, i, T0 + i * 60) for i in range(3)]
    assert led.write(lambda c: breaker.record(c, spec, ids[-1], "failed", actor="test", words=BREAKER, now=T0 + 120)) is None
    assert breaker.state_of(led.conn, "j")[0] == "closed"
    led.close()


def test_an_opening_breaker_is_escalated_with_the_failures_that_opened_it(tmp_path):
    led, spec = _ledger_with(tmp_path, 'name = "j"\ncommand = "true"\nevery = "5s"\n')
    ids = [_fail(led, i, T0 + i * 5, stderr=f"step {i}\nerror: disk full on /dev/sd{i}\n") for i in range(3)]
    assert led.write(lambda c: breaker.record(c, spec, ids[-1], "failed", actor="test", words=BREAKER, now=T0 + 10)) == "open"
    esc = led.one("SELECT kind, reason, latest_run_id FROM escalations")
    assert esc["kind"] == "circuit_open" and esc["latest_run_id"] == ids[-1]
    assert esc["reason"] == (
        f"3 failures within 30 seconds: run {ids[2]} failed (exit 1: error: disk full on /dev/sd2),"
        f" run {ids[1]} failed (exit 1: error: disk full on /dev/sd1),"
        f" run {ids[0]} failed (exit 1: error: disk full on /dev/sd0); scheduled runs skipped for 50 seconds")
    detail = json.loads(led.one("SELECT detail FROM events WHERE kind = 'breaker_open'")["detail"])
    assert detail["failures"] == ids[::-1] and (detail["window"], detail["cooldown"]) == (30.0, 50.0)
    led.close()


@pytest.mark.parametrize(("spec_when", "trigger", "held"), [
    ('every = "1m"\n', "schedule", "scheduled runs skipped for 10 minutes"),
    ("", "exec", "breaker open for 10 minutes (runs through watchkeeper exec are never skipped: fix what fails)"),
    ("", "manual", "breaker open for 10 minutes (a manual job: nothing is skipped)"),
])
def test_a_short_stderr_is_quoted_and_the_reason_fits_how_the_job_runs(tmp_path, spec_when, trigger, held):
    # a one-line stderr is kept whole in stderr_head (stderr_tail NULL): its line is still quoted
    led, spec = _ledger_with(tmp_path, f'name = "j"\ncommand = "true"\n{spec_when}')
    ids = [_fail(led, i, T0 + i * 5, "error: cannot reach db.internal:5432\n", short=True, trigger=trigger,
                 exit_code=3) for i in range(3)]
    assert led.write(lambda c: breaker.record(c, spec, ids[-1], "failed", actor="test", words=BREAKER, now=T0 + 10)) == "open"
    reason = led.one("SELECT reason FROM escalations WHERE kind = 'circuit_open'")["reason"]
    assert reason.endswith(f"run {ids[2]} failed (exit 3: error: cannot reach db.internal:5432),"
                           f" run {ids[1]} failed (exit 3: error: cannot reach db.internal:5432),"
                           f" run {ids[0]} failed (exit 3: error: cannot reach db.internal:5432); {held}")
    led.close()


def test_turning_the_breaker_off_closes_an_open_one_and_never_opens_again(tmp_path):
    led, spec = _ledger_with(tmp_path, 'name = "j"\ncommand = "true"\nevery = "5s"\n')
    ids = [_fail(led, i, T0 + i) for i in range(3)]
    led.write(lambda c: breaker.record(c, spec, ids[-1], "failed", actor="test", words=BREAKER, now=T0 + 3))
    assert breaker.state_of(led.conn, "j")[0] == "open"
    (tmp_path / "jobs" / "j.toml").write_text('name = "j"\ncommand = "true"\nevery = "5s"\nbreaker = false\n')
    off = load_dir(tmp_path / "jobs").jobs["j"].spec
    assert led.write(lambda c: breaker.admit(c, off, "slot", actor="test", now=T0 + 4))
    assert breaker.state_of(led.conn, "j")[0] == "closed"
    assert led.one("SELECT state, resolved_by FROM escalations WHERE kind = 'circuit_open'")["state"] == "resolved"
    more = [_fail(led, 10 + i, T0 + 5 + i) for i in range(5)]
    assert led.write(lambda c: breaker.record(c, off, more[-1], "failed", actor="test", words=BREAKER, now=T0 + 10)) is None
    assert breaker.state_of(led.conn, "j")[0] == "closed"
    led.close()


@pytest.mark.parametrize(("switch", "routed"), [("", False), ("breaker = false\n", True)])
def test_a_breaker_turned_off_never_cuts_off_the_fallback(tmp_path, switch, routed):
    from core.ledger import retries

    led, spec = _ledger_with(tmp_path, f'name = "j"\ncommand = "false"\nevery = "5s"\nmax_attempts = 5\n'
                                       f'no_retry_on = [2]\nfallback = "true"\n{switch}')
    now = T0 + 100

    def seed(conn):
        for i in range(3):  # the fallback failed three times in the window
            add_run(conn, "j", "failed", lineage=f"F{i}", attempt=2, slot=f"f{i}", trigger="retry", worker="fallback",
                    ended_at=now - 10 + i)
        rid = add_run(conn, "j", "failed", lineage="L", slot="s", trigger="schedule", ended_at=now,
                      end={"exit_code": 2})
        return retries.follow_up(conn, rid, "failed", actor="test", policy=RETRY, spec=spec, now=now)
    new = led.write(seed)
    assert (new is not None) == routed
    if routed:
        assert led.one("SELECT worker FROM runs WHERE id = ?", (new,))[0] == "fallback"
    else:
        rule = led.one("SELECT reason FROM events WHERE kind = 'retry_decision' ORDER BY id DESC LIMIT 1")[0]
        assert rule == "fallback_breaker_open"
    led.close()


def _open(tmp_path, spec_text: str = 'name = "j"\ncommand = "true"\nevery = "5s"\n'):
    led, spec = _ledger_with(tmp_path, spec_text)
    ids = [_fail(led, i, T0 + i * 5) for i in range(3)]
    assert led.write(lambda c: breaker.record(c, spec, ids[-1], "failed", actor="test", words=BREAKER, now=T0 + 10)) == "open"
    return led, spec


def test_a_run_that_succeeds_while_the_breaker_is_open_closes_it(tmp_path):
    # A manual trigger is not held back by the breaker: its success shows the job works again.
    led, spec = _open(tmp_path)
    ok = led.write(lambda c: add_run(c, "j", "succeeded", lineage="OK", slot="manual:ok", trigger="manual",
                                     started_at=T0 + 19, ended_at=T0 + 20))
    assert led.write(lambda c: breaker.record(c, spec, ok, "succeeded", actor="test", words=BREAKER, now=T0 + 20)) == "closed"
    assert breaker.state_of(led.conn, "j")[0] == "closed"
    assert led.one("SELECT state FROM escalations WHERE kind = 'circuit_open'")["state"] == "resolved"
    led.close()


def test_resolving_the_circuit_open_escalation_closes_the_breaker(tmp_path):
    from core import actions
    led, _spec = _open(tmp_path)
    esc = led.one("SELECT id FROM escalations WHERE kind = 'circuit_open'")["id"]
    got = actions.resolve(led, esc, "ana", now=T0 + 30)
    assert got.ok and got.message == f"resolved escalation {esc} (j circuit_open); breaker closed: j runs again"
    assert breaker.state_of(led.conn, "j")[0] == "closed"
    event = led.one("SELECT actor, reason FROM events WHERE kind = 'breaker_closed'")
    assert (event["actor"], event["reason"]) == ("operator:ana", f"closed by ana (resolved escalation {esc})")
    led.close()


def test_a_cooldown_shortened_in_the_spec_counts_from_the_opening(tmp_path):
    led, spec = _open(tmp_path)  # every 5s: a 50-s cooldown from T0 + 10
    shorter = spec.model_copy(update={"breaker": spec.breaker.model_copy(update={"cooldown": 15.0})})
    assert not led.write(lambda c: breaker.admit(c, spec, "s-a", actor="test", now=T0 + 30))  # still cooling down
    assert led.write(lambda c: breaker.admit(c, shorter, "s-b", actor="test", now=T0 + 30))  # 10 + 15 < 30: the trial
    assert breaker.state_of(led.conn, "j")[0] == "half_open"
    led.close()


def test_a_closed_breaker_counts_only_the_failures_since_it_closed(tmp_path):
    from core import actions
    led, spec = _open(tmp_path)  # three failures at T0 … T0 + 10 opened it
    esc = led.one("SELECT id FROM escalations WHERE kind = 'circuit_open'")["id"]
    assert actions.resolve(led, esc, "ana", now=T0 + 20).ok  # closed by hand
    one_more = _fail(led, 9, T0 + 25)
    assert led.write(lambda c: breaker.record(c, spec, one_more, "failed", actor="test", words=BREAKER,
                                              now=T0 + 25)) is None  # one failure, not four
    assert breaker.state_of(led.conn, "j")[0] == "closed"
    led.close()
