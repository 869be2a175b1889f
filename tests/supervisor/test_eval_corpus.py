"""watchkeeper eval: the raw-evidence corpus goes through the real pipeline (facts, baselines,
rules, Claude through the local fake) and meets the goals with and without Claude."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from console.cli.common import EXIT_CONFIG
from console.cli.main import cli
from core.supervisor.eval import EvalCase, load_corpus, run_eval, score
from core.supervisor.rules import OutcomeFacts, Verdict
from tests.kit.fake_anthropic import FakeAnthropic

CORPUS = Path(__file__).resolve().parents[1] / "eval" / "corpus.jsonl"


def test_corpus_is_raw_evidence_from_incident_patterns():
    cases = load_corpus(str(CORPUS))
    assert len(cases) >= 300
    by_cls = Counter(c.cls for c in cases)
    assert by_cls["routine"] + by_cls["near_miss"] >= len(cases) / 3
    assert all(c.source for c in cases)
    lines = [json.loads(x) for x in CORPUS.read_text().splitlines() if x.startswith("{")]
    assert not any("output_matches" in d["case"] for d in lines), "cases carry evidence, not pre-digested facts"
    kinds = Counter(c.expect_kind for c in cases)
    for kind in ("failed", "timed_out", "orphaned", "verification_failed", "false_claim", "blocked",
                 "retries_exhausted", "late_result", "zero_work", "empty_file", "shrunken_file", "partial_content",
                 "new_output_shape", "work_count", "missing_output", "slow", "too_fast", "low_confidence",
                 "forbidden_output", "small_file", "first_success", "recovered_on_retry", "routine"):
        assert kinds[kind] > 0, kind


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


def test_bad_case_names_file_and_line(tmp_path):
    bad = tmp_path / "c.jsonl"
    bad.write_text('# header\n{"id": 1, "class": "weird", "case": {}}\n')
    res = CliRunner().invoke(cli, ["eval", str(bad)])
    assert res.exit_code == EXIT_CONFIG and f"{bad}:2: bad case" in res.output


def test_cli_eval_with_fake_claude_in_three_moods():
    with FakeAnthropic(mode="agree") as fake:
        args = ["eval", str(CORPUS), "--model", "fake", "--json"]
        for mode in ("agree", "always_escalate", "always_silent"):
            args += ["--claude-base-url", f"{fake.url}/{mode}"]
        res = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert fake.requests, "the Claude path was consulted"
    out = json.loads(res.output)
    assert res.exit_code == 0 and [p["meets_goals"] for p in out] == [True, True, True, True]
    for p in out[1:]:
        assert p["claude_calls"]["ok"] > 0 and p["claude_calls"]["error"] == 0
        assert p["hard_recall"] == 1.0


def test_cli_eval_with_broken_claude_keeps_rules_figures():
    with FakeAnthropic(mode="malformed") as fake:
        res = CliRunner().invoke(cli, ["eval", str(CORPUS), "--claude-base-url", fake.url, "--model", "fake", "--json"],
                                 catch_exceptions=False)
    out = json.loads(res.output)
    assert out[1]["claude_calls"]["error"] > 0
    assert out[1]["hard_recall"] == out[0]["hard_recall"] and out[1]["precision"] == out[0]["precision"]
