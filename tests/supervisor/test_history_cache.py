"""The judge's history, decoded once per connection, is exactly what a fresh read gives:
after new outcomes, a retry queued (``retried`` flips), an outcome rewritten, rows deleted,
and a window longer than ``HISTORY_LIMIT``."""

from __future__ import annotations

from core.ledger import outcomes
from core.ledger.connection import Ledger
from core.supervisor import supervisor
from core.supervisor.facts import outcome_facts
from tests.kit.supervisor import add_job, new_run, to_verifying


def fresh(ledger: Ledger, before: int, job: str = "job") -> list:
    return [outcome_facts({"job": job}, r, retry_queued=r["retried"])
            for r in outcomes.job_history(ledger.conn, job, before, supervisor.HISTORY_LIMIT)]


def judged_run(ledger: Ledger, *, exit_code: int = 0, stdout: str = "rows=10\n") -> int:
    rid = new_run(ledger)
    to_verifying(ledger, rid, exit_code=exit_code, stdout=stdout, handoff={"status": "done"})
    supervisor.settle(ledger, rid, settings=None)
    return rid


def same(ledger: Ledger, before: int) -> None:
    assert supervisor._history(ledger, "job", before) == fresh(ledger, before)


def test_cached_history_tracks_every_change(ledger, tmp_path):
    add_job(ledger, tmp_path)
    ids = [judged_run(ledger, stdout=f"rows={i}\n") for i in range(5)]
    same(ledger, ids[-1] + 1)
    same(ledger, ids[2])  # an earlier window from the same cache
    failed = judged_run(ledger, exit_code=1)
    same(ledger, failed + 1)
    # A retry of the failed run is queued: its ``retried`` flips, nothing else about it changes.
    lineage = ledger.one("SELECT lineage FROM runs WHERE id = ?", (failed,))["lineage"]
    assert not fresh(ledger, failed + 1)[-1].retry_queued
    retry = new_run(ledger, attempt=2, lineage=lineage)
    ledger.write(lambda c: c.execute("UPDATE runs SET trigger = 'retry' WHERE id = ?", (retry,)))  # the policy's
    assert fresh(ledger, failed + 1)[-1].retry_queued
    same(ledger, failed + 1)
    # An outcome rewritten after it was judged (what ``record`` does) is decoded afresh.
    ledger.write(lambda c: outcomes.record(c, ids[1], stdout_head="rows=999\n", stdout_tail="rows=999\n"))
    same(ledger, failed + 1)
    assert any("999" in (f.stdout or "") for f in supervisor._history(ledger, "job", failed + 1))
    # Deleted outcomes leave the history.
    ledger.write(lambda c: c.execute("DELETE FROM job_outcomes WHERE run_id = ?", (ids[0],)))
    same(ledger, failed + 1)
    assert ids[0] not in [f.run_id for f in supervisor._history(ledger, "job", failed + 1)]


def test_window_longer_than_the_limit_slides(ledger, tmp_path, monkeypatch):
    monkeypatch.setattr(supervisor, "HISTORY_LIMIT", 3)
    add_job(ledger, tmp_path)
    ids = [judged_run(ledger) for _ in range(6)]
    for before in (ids[-1] + 1, ids[3], ids[-1] + 1):
        same(ledger, before)
        assert len(supervisor._history(ledger, "job", before)) == 3


def test_each_connection_keeps_its_own(ledger, tmp_path):
    add_job(ledger, tmp_path)
    rid = judged_run(ledger)
    with Ledger(ledger.target) as other:
        assert supervisor._history(other, "job", rid + 1) == fresh(ledger, rid + 1)
    same(ledger, rid + 1)


def test_a_runners_thread_ledgers_share_one_cache(tmp_path):
    from core.ledger.writer import Writer, WriterLedger
    writer = Writer(tmp_path / "wk.db")
    a, b = WriterLedger(writer), WriterLedger(writer)
    try:
        add_job(a, tmp_path)
        rid = judged_run(a)
        assert supervisor._history(a, "job", rid + 1) == fresh(a, rid + 1)
        assert supervisor._history(b, "job", rid + 1) == fresh(b, rid + 1)
        assert list(supervisor._history_caches[writer].jobs) == ["job"]
        assert a not in supervisor._history_caches and b not in supervisor._history_caches
    finally:
        a.close()
        b.close()
        writer.close()


def test_history_carries_the_verdict_and_a_repeat_anomaly_escalates_again(ledger, tmp_path):
    add_job(ledger, tmp_path)
    for n in (15234, 15240, 15228, 15236, 15231, 15239):
        judged_run(ledger, stdout=f"exported {n} rows\n")
    first_zero = judged_run(ledger, stdout="exported 0 rows\n")
    judged_run(ledger, stdout="exported 15231 rows\n")
    again = judged_run(ledger, stdout="exported 0 rows\n")
    hist = supervisor._history(ledger, "job", again)
    same(ledger, again)
    z = next(f for f in hist if f.run_id == first_zero)
    assert z.verdict_kind == "zero_work" and z.escalated
    row = ledger.one("SELECT verdict_kind, escalate FROM job_outcomes WHERE run_id = ?", (again,))
    assert (row["verdict_kind"], row["escalate"]) == ("zero_work", 1)
