"""CLI: ``eval`` — measure the judge on a labelled corpus, or replay a real ledger (shadow mode).

No SQL here: the corpus is read by ``core.supervisor.eval``; a ledger through
``core.ledger.outcomes`` and ``core.supervisor.supervisor.gather``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import click

from console.cli.common import DURATION, EXIT_CONFIG, EXIT_FINDINGS, fail, ledger_errors, open_ledger_at
from core.ledger.sql_store import as_store
from core.spec.settings import JudgeSettings
from core.supervisor import supervisor
from core.supervisor.eval import load_corpus, replay, replay_summary, run_eval
from core.supervisor.moods import MOODS
from core.text import iso, stripped_line

#: The shipped corpus, used when no CORPUS is given and the command runs from the project folder.
DEFAULT_CORPUS = "tests/eval/corpus.jsonl"
#: Outcomes one replay reads at most (newest dropped beyond it, with a note).
REPLAY_LIMIT = 20_000


def _judge_settings(base_url: str, model: str) -> JudgeSettings:
    return JudgeSettings(enabled=True, api_key=os.environ.get("ANTHROPIC_API_KEY") or "eval-fake", base_url=base_url,
                         model=model, timeout=10.0, max_retries=1, max_calls_per_hour=100_000)


@click.command("eval")
@click.argument("corpus", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--ledger", "ledger_path", default=None, type=click.Path(dir_okay=False),
              help="Replay this ledger's recorded outcomes with today's judge instead (shadow mode).")
@click.option("--since", default="7d", show_default=True, type=DURATION,
              help="With --ledger: outcomes recorded in this window, e.g. 24h, 7d.")
@click.option("--all", "show_all", is_flag=True, help="With --ledger: list every outcome, not only changed ones.")
@click.option("--claude-base-url", "claude_urls", multiple=True,
              help="Also judge through the Claude path at this Messages API URL (e.g. a local fake); repeatable.")
@click.option("--mood", "moods", multiple=True, type=click.Choice(MOODS),
              help="Also judge through a fake model that measures the pipeline: oracle (the label, with a real"
                   " quote: the ceiling), ungrounded (escalates on invented quotes: must change nothing),"
                   " quote-anything (escalates on any real line: routine pages bounded by reach); repeatable.")
@click.option("--model", default=JudgeSettings().model, show_default=True, help="Model for the Claude path.")
@click.option("--show-misses", is_flag=True, help="List every case judged against its label.")
@click.option("--json", "as_json", is_flag=True)
@ledger_errors
def eval_cmd(corpus: str | None, ledger_path: str | None, since: float, show_all: bool,
             claude_urls: tuple[str, ...], moods: tuple[str, ...], model: str, show_misses: bool,
             as_json: bool) -> None:
    """Measure the judge on a labelled CORPUS (JSONL of raw-evidence cases; default
    tests/eval/corpus.jsonl when run from the project folder): hard-class
    recall, soft-anomaly recall, routine not paged and precision, each with rules alone,
    through every --mood and every --claude-base-url; with a model in the path, reach (of
    the cases to escalate that the rules left silent, the share put before the model).
    Exit 1, naming each, when a goal is missed.

    With --ledger PATH, re-judge the outcomes recorded there since --since with today's
    supervisor and print what it would have escalated or silenced next to what it did.
    Nothing is written to the ledger.

    \b
    Example:
      watchkeeper eval tests/eval/corpus.jsonl
      watchkeeper eval --mood oracle --mood ungrounded --mood quote-anything
      watchkeeper eval --ledger demo/watchkeeper.db --since 7d
    """
    if ledger_path is not None:
        _replay(ledger_path, since, show_all, claude_urls, model, as_json)
        return
    if corpus is None and Path(DEFAULT_CORPUS).is_file():
        corpus = DEFAULT_CORPUS
    if corpus is None:
        fail(f"give a CORPUS file (no {DEFAULT_CORPUS} here), or --ledger PATH to replay a ledger", EXIT_CONFIG)
    try:
        cases = load_corpus(corpus)
    except (OSError, ValueError) as exc:
        fail(str(exc), EXIT_CONFIG)
    passes: list[tuple[str, Any, dict[str, int]]] = []
    rep, calls = run_eval(cases)
    passes.append(("rules alone", rep, calls))
    for mood in moods:
        rep_m, calls_m = run_eval(cases, mood=mood)
        if mood == "ungrounded":
            rep_m.same_as = rep
        passes.append((f"rules + {mood}", rep_m, calls_m))
    for url in claude_urls:
        rep2, calls2 = run_eval(cases, claude=_judge_settings(url, model))
        passes.append((f"rules + claude ({url})", rep2, calls2))
    ok = all(r.meets_goals() for _, r, _ in passes)
    if as_json:
        click.echo(json.dumps([{**r.to_json(lbl), "claude_calls": c} for lbl, r, c in passes]))
    else:
        by_cls: dict[str, int] = {}
        for case in cases:
            by_cls[case.cls] = by_cls.get(case.cls, 0) + 1
        click.echo(f"{len(cases)} cases from {corpus} ("
                   + ", ".join(f"{n} {k}" for k, n in sorted(by_cls.items())) + ")")
        for lbl, r, model_calls in passes:
            for line in r.lines(lbl):
                click.echo(line)
            if model_calls.get("error") or model_calls.get("budget") or model_calls.get("cached"):
                click.echo(f"  model calls: {model_calls['ok']} answered, {model_calls['cached']} cached,"
                           f" {model_calls['error']} errors (rules verdict kept), {model_calls['budget']} over budget")
            for missed in r.missed_goals():
                click.echo(f"  GOAL MISSED: {missed}")
            if show_misses:
                for m in r.misses:
                    click.echo(f"  miss: {stripped_line(m)}")
        click.echo("goals met" if ok else "GOALS MISSED")
    if not ok:
        raise SystemExit(EXIT_FINDINGS)


def _replay(path: str, since: float, show_all: bool, claude_urls: tuple[str, ...], model: str, as_json: bool) -> None:
    start = time.time() - since
    with open_ledger_at(path, read_only=True) as ledger:
        judged = as_store(ledger).judged_outcomes(start, limit=REPLAY_LIMIT)

        def gathered() -> Any:
            for was in judged:
                got = supervisor.gather(ledger, was.run_id)
                if got is not None:
                    facts, history, spec, _ = got
                    yield was, facts, history, spec
        claude = _judge_settings(claude_urls[0], model) if claude_urls else None
        items, calls = replay(gathered(), claude=claude)
    summary = replay_summary(items)
    if as_json:
        click.echo(json.dumps({**summary, "since": start, "claude_calls": calls,
                               "outcomes_list": [vars(r) | {"changed": r.changed} for r in items
                                                 if show_all or r.changed]}, default=str))
        return
    click.echo(f"{len(items)} outcome(s) recorded since {iso(start)} in {path}, re-judged by today's supervisor"
               + (" (limit reached)" if len(judged) >= REPLAY_LIMIT else ""))
    click.echo(f"{'job':<24} {'outcomes':>8} {'escalated then':>14} {'would now':>10} {'changed':>8}")
    for job, j in sorted(summary["jobs"].items()):
        click.echo(f"{stripped_line(job, 24):<24} {j['outcomes']:>8} {j['was_escalated']:>14} {j['now_escalated']:>10}"
                   f" {j['changed']:>8}")
    shown = [r for r in items if show_all or r.changed]
    if shown:
        click.echo("")
        click.echo("run     job                      was                    would now")
    for r in shown:
        was = f"{'escalate' if r.was_escalate else 'silent'} {r.was_kind or '-'}"
        now = f"{'escalate' if r.now_escalate else 'silent'} {r.now_kind}"
        click.echo(f"{r.run_id:<7} {stripped_line(r.job, 24):<24} {was:<22} {now}")
        if r.now_escalate:
            click.echo(f"        why: {stripped_line(r.now_reason, 160)}")
    if not items:
        click.echo("nothing recorded in that window")


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (eval_cmd,)
