"""core.ledger.reads: bounded keyset pages, filters, header summary, run detail."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.ledger import reads
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.runs import PATHS


@pytest.fixture
def ledger(tmp_path: Path):
    ids = cf.build(tmp_path / "wk.db")
    with Ledger(tmp_path / "wk.db") as db:
        db.ids = ids
        yield db


def test_outcome_pages_are_bounded_and_cover_everything_once(ledger):
    seen, after = [], None
    while True:
        page = reads.outcomes_page(ledger, after=after, limit=7)
        assert len(page.rows) <= 7
        seen += [r.id for r in page.rows]
        if page.cursor is None:
            break
        after = page.cursor
    assert len(seen) == len(set(seen)) == 31  # 30 finished runs + 1 orphaned; the running one is excluded
    ended = [ledger.one("SELECT ended_at FROM runs WHERE id=?", (i,))[0] for i in seen]
    assert ended == sorted(ended, reverse=True)


def test_outcome_rows_carry_reason_and_duration(ledger):
    row = next(r for r in reads.outcomes_page(ledger).rows if r.state == "failed")
    assert row.reason.endswith("exited 1")
    assert row.duration_s == pytest.approx(12.5)


def test_escalations_open_first_then_severity(ledger):
    rows = reads.escalations_page(ledger).rows
    assert [r.severity for r in rows] == ["critical", "warning", "info"]
    assert rows[-1].state == "acknowledged"
    assert reads.escalations_page(ledger, include_resolved=False, flt=reads.parse_filter("state:acknowledged")).rows[0].job \
        == "report"


def test_escalation_keyset_pages_match_one_big_page(ledger):
    whole = [r.id for r in reads.escalations_page(ledger).rows]
    first = reads.escalations_page(ledger, limit=2)
    rest = reads.escalations_page(ledger, after=first.cursor, limit=2)
    assert [r.id for r in first.rows + rest.rows] == whole


def test_filter_tokens_and_free_text(ledger):
    flt = reads.parse_filter("job:sync state:failed exited")
    assert (flt.job, flt.state, flt.text) == ("sync", "failed", "exited")
    rows = reads.outcomes_page(ledger, flt=flt).rows
    assert rows and all(r.job == "sync-mail" and r.state == "failed" for r in rows)
    assert reads.outcomes_page(ledger, flt=reads.parse_filter("100%_literal")).rows == []
    assert reads.parse_filter('bad "quote').text == 'bad "quote'


def test_orphans_lists_at_risk_before_orphaned(ledger):
    rows = reads.orphans_page(ledger, now=cf.NOW).rows
    assert [(r.state, r.at_risk) for r in rows] == [("running", True), ("orphaned", False)]
    assert rows[0].lease_age_s == pytest.approx(45)
    assert rows[0].heartbeat_age_s == pytest.approx(2)


def test_jobs_have_next_run_last_outcome_and_rate(ledger):
    rows = {r.name: r for r in reads.jobs_page(ledger, now=cf.NOW).rows}
    assert rows["sync-mail"].next_run == pytest.approx(cf.NOW + 300)
    assert rows["report"].breaker_state == "open"
    assert rows["cleanup"].next_run is None and rows["cleanup"].success_rate is None
    assert 0 < rows["backup-db"].success_rate < 1


def test_summary_runner_up_counts_and_silent_share(ledger):
    s = reads.summary(ledger, cf.NOW)
    assert s.runner_up and s.runner_text == "runner up"
    assert s.open_by_severity == {"critical": 1, "warning": 1}
    assert s.silent_share == pytest.approx(22 / 30)


def test_summary_names_a_missing_runner(ledger):
    s = reads.summary(ledger, cf.NOW + 7 * 60)
    assert not s.runner_up and s.runner_text == "no runner for 7m 2s"


def test_run_detail_reads_output_files_head_and_tail(tmp_path: Path):
    art = tmp_path / "art"
    art.mkdir()
    (art / "stdout.log").write_bytes(b"A" * 10 + b"\xff middle " + b"B" * (reads.OUTPUT_HEAD + reads.OUTPUT_TAIL))
    cf.build(tmp_path / "wk.db", artifacts=art)
    with Ledger(tmp_path / "wk.db") as db:
        run_id = db.one("SELECT id FROM runs WHERE artifacts_dir IS NOT NULL")[0]
        d = reads.run_detail(db, run_id)
    assert d.stdout.exists and d.stdout.head.startswith("AAAAAAAAAA\ufffd")
    assert len(d.stdout.tail) == reads.OUTPUT_TAIL
    assert d.stderr.exists is False
    assert [a.attempt for a in d.attempts] == [1]
    # the audit trail, in order: queued, then each move of its path to the state it ended in
    assert [e.to_state for e in d.events] == ["queued", *PATHS[d.run.state]]


def test_run_detail_unknown_run_is_none(ledger):
    assert reads.run_detail(ledger, 999_999) is None


def test_offset_pages_match_keyset_pages(ledger):
    whole = [r.id for r in reads.outcomes_page(ledger, limit=100).rows]
    assert [r.id for r in reads.outcomes_page(ledger, offset=5, limit=4).rows] == whole[5:9]
    escs = [r.id for r in reads.escalations_page(ledger).rows]
    assert [r.id for r in reads.escalations_page(ledger, offset=1, limit=1).rows] == escs[1:2]
    orph = [r.id for r in reads.orphans_page(ledger, now=cf.NOW).rows]
    assert [r.id for r in reads.orphans_page(ledger, now=cf.NOW, offset=1).rows] == orph[1:]
    jobs = [r.name for r in reads.jobs_page(ledger, now=cf.NOW).rows]
    assert [r.name for r in reads.jobs_page(ledger, now=cf.NOW, offset=2, limit=1).rows] == jobs[2:3]


def test_count_rows_per_view_and_filter(ledger):
    assert reads.count_rows(ledger, "outcomes", now=cf.NOW) == 31
    assert reads.count_rows(ledger, "escalations", now=cf.NOW) == 3
    assert reads.count_rows(ledger, "orphans", now=cf.NOW) == 2
    assert reads.count_rows(ledger, "jobs", now=cf.NOW) == 4
    flt = reads.parse_filter("job:sync state:failed")
    assert reads.count_rows(ledger, "outcomes", now=cf.NOW, flt=flt) == len(reads.outcomes_page(ledger, flt=flt).rows)
    assert reads.count_rows(ledger, "outcomes", now=cf.NOW, flt=reads.parse_filter("kind:nothing")) == 0


def test_jobs_page_ignores_fanout_sub_task_runs(ledger):
    """The parent run is a fan-out job's outcome: sub-task runs must not set last_state,
    success_rate or next_run."""
    def add(c):
        parent = cf.add_run(ledger, "cleanup", state="succeeded", ended_at=cf.NOW - 100, lineage="fan-p",
                            slot="fan-1")
        for i in range(5):
            sub = cf.add_run(ledger, "cleanup", state="failed", ended_at=cf.NOW - 50 + i, lineage=f"fan-t{i}",
                             slot=f"fan-1-t{i}", exit_code=1)
            c.execute("UPDATE runs SET task = ?, slot = 'fan-1', parent_run_id = ? WHERE id = ?", (f"t{i}", parent, sub))
        queued = cf.add_run(ledger, "cleanup", state="queued", ended_at=None, lineage="fan-q", slot="fan-2")
        c.execute("UPDATE runs SET task = 'tq', not_before = ? WHERE id = ?", (cf.NOW + 10, queued))
    ledger.write(add)
    row = next(r for r in reads.jobs_page(ledger, now=cf.NOW).rows if r.name == "cleanup")
    assert row.last_state == "succeeded"
    assert row.success_rate == 1.0 and row.recent == 1
    assert row.next_run is None  # only a sub-task is queued; cleanup has no schedule


def test_deep_offset_reads_the_same_rows(ledger, monkeypatch):
    whole = [r.id for r in reads.outcomes_page(ledger, limit=100).rows]
    monkeypatch.setattr(reads, "_ANCHOR_FROM", 3)
    assert [r.id for r in reads.outcomes_page(ledger, offset=20, limit=5).rows] == whole[20:25]
    assert reads.outcomes_page(ledger, offset=500, limit=5).rows == []


def test_state_and_kind_filters_are_exact_job_and_text_are_substrings(ledger):
    def add(c):
        cf.add_escalation(ledger, "report", "verification_failed", "critical", run_id=None, reason="checks failed")
    ledger.write(add)
    kinds = {r.kind for r in reads.escalations_page(ledger, flt=reads.parse_filter("kind:failed")).rows}
    assert kinds == {"failed"}  # not verification_failed
    assert {r.kind for r in reads.escalations_page(ledger, flt=reads.parse_filter("KIND:Verification_Failed")).rows} \
        == {"verification_failed"}  # any case
    assert reads.escalations_page(ledger, flt=reads.parse_filter("state:ack")).rows == []
    assert reads.count_rows(ledger, "escalations", now=cf.NOW, flt=reads.parse_filter("kind:failed")) == 1
    assert {r.state for r in reads.outcomes_page(ledger, flt=reads.parse_filter("state:FAILED")).rows} \
        == {"failed"}
    assert {r.job for r in reads.outcomes_page(ledger, flt=reads.parse_filter("job:SYNC")).rows} \
        == {"sync-mail"}  # job stays a substring
    assert reads.outcomes_page(ledger, flt=reads.parse_filter("state:fail")).rows == []


def test_run_detail_lists_fanout_children(ledger):
    def add(c):
        parent = cf.add_run(ledger, "cleanup", state="failed", ended_at=cf.NOW - 100, lineage="fan-p", slot="fan-1")
        for i, (st, code) in enumerate((("succeeded", 0), ("failed", 3))):
            sub = cf.add_run(ledger, "cleanup", state=st, ended_at=cf.NOW - 50 + i, lineage=f"fan-t{i}",
                             slot=f"fan-1-t{i}", exit_code=code, reason=None if code == 0 else "exit_code")
            c.execute("UPDATE runs SET task = ?, parent_run_id = ? WHERE id = ?", (f"t{i}", parent, sub))
        return parent
    parent = ledger.write(add)
    d = reads.run_detail(ledger, parent)
    assert [(ch.task, ch.state, ch.exit_code) for ch in d.children] == [
        ("t0", "succeeded", 0), ("t1", "failed", 3)]
    assert reads.run_detail(ledger, ledger.ids["ok_run"]).children == ()
