"""watchkeeper eval: the shipped corpus meets the goals with rules alone and via the Claude
path against the local fake server."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from console.cli.main import cli
from core.supervisor.rules import EvalCase, OutcomeFacts, Verdict, load_corpus, run_eval, score
from tests.fake_anthropic import FakeAnthropic

CORPUS = Path(__file__).parent / "eval_corpus.jsonl"


def test_corpus_covers_every_class():
    cases = load_corpus(str(CORPUS))
    assert len(cases) >= 200
    kinds = Counter(c.expect_kind for c in cases)
    for kind in ("failed", "timed_out", "orphaned", "verification_failed", "blocked", "retries_exhausted",
                 "late_result", "slow", "too_fast", "output_mismatch", "low_confidence", "partial", "flapping",
                 "first_success", "recovered_on_retry", "routine"):
        assert kinds[kind] > 0, kind
    assert Counter(c.cls for c in cases)["near_miss"] >= 20


def test_rules_alone_meet_goals():
    rep, calls = run_eval(load_corpus(str(CORPUS)))
    assert rep.meets_goals(), rep.misses
    assert rep.hard_recall == 1.0 and sum(calls.values()) == 0


def test_scoring_can_fail():
    case = EvalCase(id="x", cls="hard", case=OutcomeFacts(state="failed"), history=[], spec=None,
                    expect_escalate=True, expect_kind="failed")
    silent = Verdict("routine", False, None, "", silent=True)
    rep = score([case], [silent])
    assert rep.hard_recall == 0.0 and not rep.meets_goals() and rep.misses


def test_cli_eval_with_fake_claude():
    with FakeAnthropic(mode="agree") as fake:
        res = CliRunner().invoke(cli, ["eval", str(CORPUS), "--claude-base-url", fake.url, "--model", "fake",
                                       "--json"], catch_exceptions=False)
        assert fake.requests, "the Claude path was consulted"
    out = json.loads(res.output)
    assert res.exit_code == 0 and [p["meets_goals"] for p in out] == [True, True]
    assert out[1]["claude_calls"]["ok"] > 0 and out[1]["claude_calls"]["error"] == 0


def test_cli_eval_with_broken_claude_keeps_rules_figures():
    with FakeAnthropic(mode="malformed") as fake:
        res = CliRunner().invoke(cli, ["eval", str(CORPUS), "--claude-base-url", fake.url, "--model", "fake", "--json"],
                                 catch_exceptions=False)
    out = json.loads(res.output)
    assert out[1]["claude_calls"]["error"] > 0
    assert out[1]["hard_recall"] == out[0]["hard_recall"] and out[1]["precision"] == out[0]["precision"]
