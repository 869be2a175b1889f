"""A job's real end after an operator abandoned its run never pages: the operator already
decided. It is recorded (the ``late_result`` event with the real status, judged) and only a
result after an orphaning escalates ``late_result``."""

from __future__ import annotations

import json
import time

import pytest

from core import actions
from core.ledger import lifecycle
from core.supervisor import supervisor
from core.vocabulary import RunState as State
from tests.kit.supervisor import add_job, end_as, escalations_of, new_run


def _running(ledger) -> int:
    rid = new_run(ledger)
    assert lifecycle.transition(ledger, rid, 1, State.QUEUED, State.SPAWNED, actor="test")
    assert lifecycle.transition(ledger, rid, 1, State.SPAWNED, State.RUNNING, actor="test",
                                fields={"started_at": time.time() - 5})
    return rid


def _late(ledger, rid: int, *, exit_code: int | None, signal: int | None) -> None:
    ledger.write(lambda c: c.execute(
        "INSERT INTO events (at, run_id, job, actor, kind, detail) VALUES (?,?,?,?,?,?)",
        (time.time(), rid, "job", "runner:x", "late_result", json.dumps({"exit_code": exit_code, "signal": signal}))))


@pytest.mark.parametrize(("exit_code", "signal"), [(0, None), (3, None), (None, 15)])
def test_an_end_after_an_abandon_is_judged_silently(ledger, tmp_path, exit_code, signal):
    # No pid recorded: the abandon signals nothing and writes no abandon_kill event, exactly
    # what the runner sees when the job ends before the abandon's kill is confirmed.
    add_job(ledger, tmp_path, owner="ana")
    rid = _running(ledger)
    assert actions.abandon(ledger, rid, "ana").ok
    _late(ledger, rid, exit_code=exit_code, signal=signal)
    supervisor.note_late_result(ledger, rid)
    assert not [e for e in escalations_of(ledger) if e["kind"] == "late_result"]
    judged = ledger.query("SELECT reason FROM events WHERE run_id = ? AND kind = 'late_result_judged'", (rid,))
    assert len(judged) == 1 and "abandon" in judged[0]["reason"]
    assert ledger.one("SELECT state FROM runs WHERE id = ?", (rid,))["state"] == "abandoned"


def test_an_end_after_an_orphaning_still_pages(ledger, tmp_path):
    add_job(ledger, tmp_path, owner="ana")
    rid = new_run(ledger)
    end_as(ledger, rid, "orphaned")
    _late(ledger, rid, exit_code=0, signal=None)
    supervisor.note_late_result(ledger, rid)
    (esc,) = [e for e in escalations_of(ledger) if e["kind"] == "late_result"]
    assert esc["owner"] == "ana"
