"""The judge's reach and grounding through the real ``anthropic`` client against the local fake
Messages API: a first success that contradicts its intent is paged with the quote; an answer
quoting text the run never printed pages nothing and leaves a ``judge_rejected`` event; a
routine success with a learned baseline is never sent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.actions import trigger_job
from core.ledger import outcomes
from core.ledger.connection import Ledger
from core.spec.settings import JudgeSettings, Settings
from core.supervisor import supervisor
from tests.kit.fake_anthropic import FakeAnthropic, prompt_of
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for
from tests.kit.supervisor import add_job, escalations_of, new_run, to_verifying

SAMPLES = Path(__file__).resolve().parents[2] / "sample_jobs"
INTENT = "Delete the customer accounts closed more than 30 days ago (GDPR retention)."
DRY = "DRY RUN: would delete 412 accounts closed more than 30 days ago; nothing was deleted"


def _judge(url: str, **kw) -> dict:
    return JudgeSettings(enabled=True, api_key="test-key", base_url=url, model="fake", timeout=5.0, max_retries=0,
                         **kw).model_dump()


@pytest.fixture
def fake():
    with FakeAnthropic() as f:
        yield f


def _settle(ledger: Ledger, tmp_path: Path, url: str, stdout: str) -> int:
    rid = new_run(ledger)
    to_verifying(ledger, rid, stdout=stdout)
    supervisor.settle(ledger, rid, settings=Settings(ledger=tmp_path / "wk.db", judge=_judge(url)))
    return rid


def test_a_first_success_contradicting_its_intent_pages_with_the_quote(ledger, tmp_path, fake):
    fake.mode = "quote_anything"  # quotes the first stdout line shown to it, against the intent
    add_job(ledger, tmp_path, intent=INTENT, owner="privacy@example.org")
    rid = _settle(ledger, tmp_path, fake.url, DRY + "\npurge finished\n")
    out = outcomes.get(ledger.conn, rid)
    assert out["verdict_kind"] == "intent_mismatch" and out["escalate"] == 1 and out["judged_by"] == "rules+claude"
    (esc,) = escalations_of(ledger)
    assert esc["kind"] == "intent_mismatch" and esc["owner"] == "privacy@example.org"
    assert f'it printed "{DRY}" (stdout), while its intent says "{INTENT}"' in esc["reason"]
    prompt = prompt_of(fake.requests[0])
    assert "Consulted because:\n- success 1 of its first 5" in prompt


def test_an_ungrounded_escalation_pages_nothing_and_is_recorded(ledger, tmp_path, fake):
    fake.mode = "ungrounded"  # escalates, quoting a line this run never printed
    add_job(ledger, tmp_path, intent=INTENT)
    rid = _settle(ledger, tmp_path, fake.url, DRY + "\n")
    out = outcomes.get(ledger.conn, rid)
    assert out["verdict_kind"] == "first_success" and out["escalate"] == 0 and out["judged_by"] == "rules"
    assert escalations_of(ledger) == []
    ev = ledger.one("SELECT * FROM events WHERE kind = 'judge_rejected' AND run_id = ?", (rid,))
    detail = json.loads(ev["detail"]) if isinstance(ev["detail"], str) else ev["detail"]
    assert ev["reason"] == "quote_not_found" and "is not in this run's output or handoff" in detail["why"]
    assert detail["quote"].startswith("FATAL: nothing was written") and detail["clause"] == INTENT
    assert detail["consulted_for"] == ["success 1 of its first 5"]


def test_a_routine_success_with_a_learned_baseline_is_not_sent(ledger, tmp_path, fake):
    fake.mode = "quote_anything"
    add_job(ledger, tmp_path, intent="export the day's orders")
    for i in range(5):  # the first five are consulted (and this fake pages them: it quotes anything)
        _settle(ledger, tmp_path, fake.url, f"exported {15000 + 31 * i} rows to out/orders.csv\n")
    assert len(fake.requests) == 5
    rid = _settle(ledger, tmp_path, fake.url, "exported 15321 rows to out/orders.csv\n")
    assert len(fake.requests) == 5
    out = outcomes.get(ledger.conn, rid)
    assert out["verdict_kind"] == "routine" and out["judged_by"] == "rules"


@pytest.mark.slow
def test_sample_job_first_success_contradicting_its_intent_is_paged_end_to_end(tmp_path, fake):
    """The sample ``account-purge`` runs for real under a runner with the judge on: its first
    success only lists what it would delete, and the page quotes that line and the intent."""
    fake.mode = "quote_anything"
    folder = tmp_path / "jobs"
    shutil.copytree(SAMPLES / "bin", folder / "bin")
    shutil.copy(SAMPLES / "intent.toml", folder / "intent.toml")
    settings = fast_settings(tmp_path, judge=_judge(fake.url))
    db = Path(settings.ledger)
    with RunnerThread(folder, settings):
        wait_for(lambda: query(db, "SELECT 1 FROM jobs WHERE name = 'account-purge'"), timeout=20)
        with Ledger(db) as led:
            assert trigger_job(led, "account-purge", "test").ok
        wait_for(lambda: query(db, "SELECT 1 FROM escalations WHERE kind = 'intent_mismatch'"), timeout=60)
    (esc,) = query(db, "SELECT * FROM escalations")
    assert esc["job"] == "account-purge" and esc["owner"] == "privacy@example.org"
    assert 'it printed "DRY RUN: would delete ' in esc["reason"] and "nothing was deleted\" (stdout)" in esc["reason"]
    assert 'while its intent says "Delete the customer accounts closed more than 30 days ago' in esc["reason"]
