"""The page reads (``PageReads`` on ``SqlStore``) hand typed records, the same on each backend.

Issue 19: above ``core.ledger`` no code indexes a row. The console's and the CLI's reads
return one frozen record type per row shape (``core.ledger.page_records``), and the
``--json`` documents built from them keep the keys the CLI has always printed.
"""

from __future__ import annotations

import dataclasses

import pytest

from core.ledger.connection import Ledger
from core.ledger.page_records import (
    RUN_COLUMNS,
    EscalationDetail,
    InvalidSpec,
    JobControls,
    JobHistory,
    JobRow,
    ListedRun,
    LiveRunRow,
    OutcomeRow,
    RunDetail,
    RunEvidence,
)
from core.ledger.records import Escalation
from core.ledger.sql_store import SqlStore
from tests.kit import console_fixtures as cf


@pytest.fixture
def store(ledger_target: str):
    ids = cf.build(ledger_target)
    ids.update({f"story_{k}": v for k, v in cf.add_escalation_story(ledger_target).items()})
    with Ledger(ledger_target) as led:
        led.ids = ids
        yield SqlStore(led)


def _frozen(record: object) -> None:
    assert dataclasses.is_dataclass(record) and type(record).__dataclass_params__.frozen  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.id = 0  # type: ignore[attr-defined]


def test_every_view_page_is_its_record_type(store):
    now = cf.NOW
    pages = {Escalation: store.escalations_page(), OutcomeRow: store.outcomes_page(),
             LiveRunRow: store.orphans_page(now=now), JobRow: store.jobs_page(now=now)}
    for cls, page in pages.items():
        assert page.rows and all(type(r) is cls for r in page.rows), cls
    _frozen(pages[OutcomeRow].rows[0])
    failed = next(r for r in pages[OutcomeRow].rows if r.state == "failed" and r.job == "backup-db")
    assert failed.duration_s == pytest.approx(12.5) and failed.reason.endswith("exited 1")
    risky = next(r for r in pages[LiveRunRow].rows if r.id == store.ledger.ids["risky_run"])
    assert risky.at_risk and risky.live and risky.lease_age_s == pytest.approx(45)
    jobs = {j.name: j for j in pages[JobRow].rows}
    assert jobs["report"].breaker_state == "open" and all(b.state for b in jobs["backup-db"].recent_runs)
    assert store.count_rows("outcomes", now=now) == len(store.outcomes_page(limit=1000).rows)


def test_one_screen_reads_are_records(store):
    ids = store.ledger.ids
    d = store.run_detail(ids["failed_run"])
    assert isinstance(d, RunDetail) and d.run.id == ids["failed_run"] and d.outcome is not None
    assert [a.attempt for a in d.attempts] == [1] and d.events[-1].to_state == "failed"
    assert d.stderr.total == d.outcome.stderr_bytes and d.stderr.tail.endswith("refused\n")
    ev = store.run_evidence(ids["failed_run"])
    assert isinstance(ev, RunEvidence) and "refused" in ev.stderr_end
    esc = store.escalation_detail(ids["story_esc"])
    assert isinstance(esc, EscalationDetail) and esc.escalation.count == 3
    assert [o.run_id for o in esc.occurrences][0] == ids["story_runs"]
    assert {a.kind for a in esc.acts} == {"escalation_acknowledged", "escalation_snoozed"}
    assert {(n.sink, n.state) for n in esc.notifications} == {("email", "sent"), ("webhook", "failed")}
    assert esc.latest_run is not None and esc.latest_run.state == "failed"
    hist = store.job_history("nightly-etl", now=cf.NOW)
    assert isinstance(hist, JobHistory) and hist.job.name == "nightly-etl" and len(hist.runs) == 3
    assert isinstance(store.job_controls("report"), JobControls) and store.job_controls("nope") is None
    assert store.invalid_specs() == [] and all(isinstance(s, InvalidSpec) for s in store.invalid_specs())
    for missing in (store.run_detail(999_999), store.escalation_detail(999_999), store.job_history("nope", now=0)):
        assert missing is None


def test_cli_json_documents_keep_their_keys(store):
    listed = store.listed_runs(limit=5)
    assert listed and all(isinstance(r, ListedRun) for r in listed)
    doc = listed[0].to_json()
    # The runs table's columns in table order, then the outcome's figures: what `runs --json` printed.
    assert list(doc) == [*RUN_COLUMNS, "duration_s", "status", "verdict_reason", "severity"]
    detail = store.run_detail(store.ledger.ids["failed_run"]).to_json()
    assert list(detail) == ["run", "outcome", "attempts", "events", "stdout", "stderr", "escalations", "children"]
    assert list(detail["stdout"]) == ["exists", "size", "head", "tail", "total"]
    assert detail["events"][0]["detail"] is None or isinstance(detail["events"][0]["detail"], str)
    job = store.jobs_page(now=cf.NOW).rows[0].to_json()
    assert list(job)[-4:] == ["last_ended_at", "recent", "recent_runs", "success_rate"]
    assert all(isinstance(bar, list) and len(bar) == 3 for bar in job["recent_runs"])
