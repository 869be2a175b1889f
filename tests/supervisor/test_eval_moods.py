"""watchkeeper eval measures the pipeline with three fake moods — oracle (the ceiling),
ungrounded (must change nothing), quote-anything (routine pages bounded by reach) — on the
project's corpus and on a fresh one written from other incident reports."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.supervisor.eval import EvalCase, load_corpus, run_eval
from core.supervisor.rules import OutcomeFacts

EVAL = Path(__file__).resolve().parents[1] / "eval"
OWN, FRESH = EVAL / "corpus.jsonl", EVAL / "corpus_fresh.jsonl"
#: Incidents the project's own corpus was written from: the fresh corpus must use others.
OWN_SOURCES = ("GitLab", "AWS S3", "Cloudflare 2019", "Let's Encrypt", "Dyn", "Knight", "Atlassian", "Slack 2021",
               "Heroku", "Travis", "GitHub 2018", "Tarsnap", "Facebook 2021")


@pytest.fixture(scope="module", params=[OWN, FRESH], ids=["own", "fresh"])
def cases(request) -> list[EvalCase]:
    return load_corpus(str(request.param))


def test_every_path_meets_its_goals(cases):
    rules, _ = run_eval(cases)
    assert rules.meets_goals(), rules.missed_goals()
    for mood in ("oracle", "quote-anything"):
        rep, _ = run_eval(cases, mood=mood)
        assert rep.meets_goals(), (mood, rep.missed_goals())
        assert rep.hard_recall == 1.0 and rep.reach is not None and rep.reach >= 0.98


def test_an_ungrounded_model_changes_no_verdict(cases):
    rules, _ = run_eval(cases)
    rep, calls = run_eval(cases, mood="ungrounded")
    assert rep.figures() == rules.figures() and rep.misses == rules.misses
    assert rep.consulted > 0 and rep.rejected == rep.consulted == calls["rejected"]


def test_the_oracle_is_the_ceiling_and_never_pages_a_quiet_case(cases):
    rep, _ = run_eval(cases, mood="oracle")
    assert rep.soft_recall is not None and rep.soft_recall >= 0.98
    assert rep.routine_silence == 1.0 and rep.near_miss_silence == 1.0


def test_the_fresh_corpus_is_a_hundred_new_cases_from_other_incident_reports():
    cases = load_corpus(str(FRESH))
    assert len(cases) >= 100 and all(c.source for c in cases)
    assert not [c.source for c in cases if any(s in c.source for s in OWN_SOURCES)]
    assert not {c.id for c in cases} & {c.id for c in load_corpus(str(OWN))}
    by_cls = Counter(c.cls for c in cases)
    assert min(by_cls[k] for k in ("hard", "soft", "routine", "near_miss")) > 0


def test_each_new_kind_is_in_both_corpora():
    for path in (OWN, FRESH):
        got = Counter(c.expect_kind for c in load_corpus(str(path)))
        for kind in ("intent_mismatch", "stale_output", "verification_failed", "retry_pending", "first_success"):
            assert got[kind] > 0, (path.name, kind)
        sources = " ".join(c.source for c in load_corpus(str(path)))
        assert "deterministic" in sources and "first" in sources


def test_reach_counts_the_cases_to_escalate_that_the_rules_left_silent():
    spec = {"name": "purge", "intent": "delete the accounts closed more than 30 days ago"}
    silent_first = EvalCase.from_json(json.dumps({
        "id": "a", "class": "soft", "source": "s", "spec": spec, "history": [],
        "case": {"stdout_head": "DRY RUN: would delete 40 accounts closed more than 30 days ago\n"},
        "expect": {"escalate": True, "kind": "intent_mismatch"}}))
    no_intent = EvalCase.from_json(json.dumps({
        "id": "b", "class": "soft", "source": "s", "spec": {"name": "x"}, "history": [],
        "case": {"stdout_head": "DRY RUN: would delete 40 accounts\n"},
        "expect": {"escalate": True, "kind": "intent_mismatch"}}))
    caught = EvalCase(id="c", cls="hard", case=OutcomeFacts(state="failed", exit_code=1), history=[], spec=None,
                      expect_escalate=True, expect_kind="failed")
    rules, _ = run_eval([silent_first, no_intent, caught])
    assert rules.reach is None and rules.soft_recall == 0.0
    rep, _ = run_eval([silent_first, no_intent, caught], mood="oracle")
    assert rep.counts["rules_missed"] == 2 and rep.reach == 0.5  # no intent: nothing to quote a clause of
    assert rep.soft_recall == 0.5 and not rep.meets_goals() and rep.missed_goals() == ["soft 50.0% < 98%"]


def test_cli_prints_reach_and_names_each_goal_missed(tmp_path):
    res = CliRunner().invoke(cli, ["eval", str(FRESH), "--mood", "oracle", "--mood", "ungrounded",
                                   "--mood", "quote-anything", "--json"], catch_exceptions=False)
    out = json.loads(res.output)
    assert res.exit_code == 0 and [p["label"] for p in out] == [
        "rules alone", "rules + oracle", "rules + ungrounded", "rules + quote-anything"]
    assert out[0]["reach"] is None and all(p["reach"] == 1.0 for p in out[1:])
    assert out[2]["rejected"] == out[2]["consulted"] > 0
    # Quiet first runs labelled routine: quote-anything pages every one (the consult rate).
    spec = {"name": "job", "intent": "export the orders"}
    lines = [json.dumps({"id": f"r{i}", "class": "routine", "source": "s", "spec": spec, "history": [],
                         "case": {"stdout_head": f"exported {100 + i} orders\n"},
                         "expect": {"escalate": False, "kind": "routine"}}) for i in range(3)]
    small = tmp_path / "c.jsonl"
    small.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(cli, ["eval", str(small), "--mood", "quote-anything"], catch_exceptions=False)
    assert res.exit_code == 1 and "GOAL MISSED: routine 0.0% < 95%" in res.output and "GOALS MISSED" in res.output
