"""``watchkeeper mission …``: start a mission, watch it, answer its questions, approve its
report, abandon a failed worker, abort it. The runner (``watchkeeper run``/``up``) does the
work; these commands only write the person's decisions into the ledger.

Exit codes: 0 done, 1 refused or lost a race (the message says why), 2 no such mission or
worker, or an unusable ledger / mission file, 3 bad settings.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import click

from console.cli.common import (
    EXIT_FINDINGS,
    EXIT_NOT_FOUND,
    as_option,
    confirm_or_exit,
    fail,
    ledger_errors,
    ledger_option,
    open_ledger,
    open_ledger_at,
    open_settings,
    shown,
    shown_lines,
    yes_option,
)
from core.ledger.records import Mission, Worker, columns
from core.ledger.sql_store import as_store
from core.mission import actions as mactions
from core.mission.worker import api_key
from core.text import iso
from core.vocabulary import ActionResult


def _finish(res: ActionResult) -> None:
    if res.ok:
        click.echo(shown(res.message))
        return
    fail(shown(res.message), EXIT_NOT_FOUND if res.missing else EXIT_FINDINGS)


def mission_line(m: Mission) -> str:
    """One line: id, state, name, turns/budget, coordinator, goal."""
    b = m.budget or {}
    return (f"#{m.id:<4} {m.state:<17} {shown(m.name, 16):<16} turns {m.turns}/{b.get('turns')}"
            f"  {m.coordinator:<8} {shown(m.goal, 70)}")


def worker_line(w: Worker) -> str:
    """One line of the tree: seq, worker, state, confidence, steps, attempts, note."""
    conf = f"{w.confidence:.2f}" if isinstance(w.confidence, int | float) else "-"
    return (f"  {w.seq:>2}. {shown(w.worker, 20):<20} {w.state:<10} {shown(w.status or '-'):<8}"
            f" conf {conf:<5} steps {w.steps_used if w.steps_used is not None else '-':<3}"
            f" attempts {w.attempts}  run {w.run_id or '-'}  {shown(w.note or w.error or '', 80)}")


def _ask(ledger: Any, mission_id: int, question: str, declined: str) -> None:
    """Ask ``question`` about mission ``mission_id`` (exit 2 when there is no such mission);
    a no is ``declined`` on stderr and exit 1, as for abandon, retry and pause."""
    m = as_store(ledger).mission(mission_id)
    if m is None:
        fail(f"no mission {mission_id}", EXIT_NOT_FOUND)
    confirm_or_exit(question.format(name=shown(m.name, 40), id=mission_id), declined)


@click.group("mission")
def mission_group() -> None:
    """Missions: a coordinator splits a goal, workers do the pieces, a person approves.

    \b
    Example:
      watchkeeper mission start "Explain tides" --spec sample_jobs/missions/pipeline.toml
      watchkeeper mission show 1
      watchkeeper mission approve 1 --as ana --yes
    """

@mission_group.command("start")
@click.argument("goal", required=False)
@click.option("--spec", "spec_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Mission definition (TOML).")
@click.option("--name", default=None, help="Mission definition by name (in --spec, or SPECS/missions/).")
@click.option("--specs", "spec_dir", type=click.Path(file_okay=False), default=None,
              help="Spec folder whose missions/ holds definitions [default: .].")
@click.option("--worker", "workers", multiple=True, help="Worker job it may spawn (repeatable).")
@click.option("--coordinator", type=click.Choice(["claude", "scripted", "external"]), default=None,
              help="Who plans [default: from the definition; 'auto' = claude with a key, else scripted].")
@click.option("--owner", default=None, help="Who questions and the report go to.")
@click.option("--turns", type=click.IntRange(1, 1000), default=None, help="Coordinator turn budget.")
@ledger_option
@ledger_errors
def start_cmd(goal: str | None, spec_file: str | None, name: str | None, spec_dir: str | None,
              workers: tuple[str, ...], coordinator: str | None, owner: str | None, turns: int | None,
              ledger_path: str | None) -> None:
    """Start a mission with GOAL (or the definition's goal); the runner carries it out.

    \b
    Example:
      watchkeeper mission start --specs sample_jobs --name pipeline
      watchkeeper mission start "Summarise the outage" --worker researcher --coordinator claude
    """
    settings = open_settings(spec_dir, ledger=ledger_path)
    definition = None
    if spec_file or name or not workers:
        try:
            definition = mactions.find_definition(spec_dir or ".", name=name, path=spec_file)
        except mactions.MissionDefinitionError as exc:
            fail(shown_lines(str(exc)), EXIT_NOT_FOUND)
    ledger = open_ledger_at(settings.ledger, must_exist=False)
    with ledger:
        try:
            mid = mactions.start(ledger, goal, definition=definition, workers=list(workers) or None, owner=owner,
                                 api_key=api_key(settings), coordinator=coordinator,
                                 budget={"turns": turns} if turns else None, who=settings.operator)
        except mactions.MissionDefinitionError as exc:
            fail(shown_lines(str(exc)), EXIT_NOT_FOUND)
        m = as_store(ledger).mission(mid)
        assert m is not None  # just created
    # The follow-up command carries the flags given here: without --ledger it would read another ledger.
    where = f" --ledger {shown(shlex.quote(ledger_path))}" if ledger_path else ""
    click.echo(f"mission {mid} started ({m.coordinator} coordinator, workers: "
               f"{', '.join(shown(w) for w in m.workers)}); follow it with: "
               f"watchkeeper mission show {mid}{where}")

@mission_group.command("list")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@ledger_option
@ledger_errors
def list_cmd(limit: int, as_json: bool, ledger_path: str | None) -> None:
    """Missions, newest first.

    \b
    Example:
      watchkeeper mission list --limit 5
    """
    with open_ledger(ledger_path, read_only=True) as ledger:
        found = as_store(ledger).missions(limit=limit)
    for m in found:
        click.echo(json.dumps(columns(m), default=str) if as_json else mission_line(m))

@mission_group.command("show")
@click.argument("mission_id", type=click.IntRange(1))
@click.option("--json", "as_json", is_flag=True, help="The mission, its workers and audit trail as JSON.")
@ledger_option
@ledger_errors
def show_cmd(mission_id: int, as_json: bool, ledger_path: str | None) -> None:
    """The mission as a tree: coordinator, workers (state, confidence, steps), question, report.

    \b
    Example:
      watchkeeper mission show 1
    """
    with open_ledger(ledger_path, read_only=True) as ledger:
        store = as_store(ledger)
        m = store.mission(mission_id)
        if m is None:
            fail(f"no mission {mission_id}", EXIT_NOT_FOUND)
        workers = store.mission_workers(mission_id)
        events = store.mission_events(mission_id, limit=30)
    if as_json:
        click.echo(json.dumps({**columns(m), "spawned": [columns(w) for w in workers],
                               "events": [columns(e) for e in events]}, default=str, indent=2))
        return
    b = m.budget or {}
    click.echo(f"mission {m.id} ({shown(m.name)}): {m.state}"
               + (f" ({shown(m.reason, 120)})" if m.reason else ""))
    click.echo(f"goal: {shown_lines(m.goal)}")
    click.echo(f"owner: {shown(m.owner or '-')}   started {iso(m.created_at)}")
    click.echo(f"coordinator: {m.coordinator}  turns {m.turns}/{b.get('turns')}  tokens {m.tokens}"
               f"  cost ${m.cost:.4f}")
    for w in workers:
        click.echo(worker_line(w))
    if m.question:
        click.echo(f"question (answer with: watchkeeper mission answer {m.id} TEXT): {shown_lines(m.question)}")
    if m.report:
        click.echo(f"report ({m.report_status or '-'}):")
        for line in shown_lines(m.report).splitlines():
            click.echo(f"  {line}")
    click.echo("audit trail:")
    for e in events[-12:]:
        click.echo(f"  {iso(e.at)}  {shown(e.actor, 24):<24} {e.kind:<26} {shown(e.reason or '', 90)}")

@mission_group.command("answer")
@click.argument("mission_id", type=click.IntRange(1))
@click.argument("text")
@as_option
@ledger_option
@ledger_errors
def answer_cmd(mission_id: int, text: str, operator: str | None, ledger_path: str | None) -> None:
    """Answer the mission's open question; the coordinator is woken with it.

    \b
    Example:
      watchkeeper mission answer 1 "Use the 2024 figures" --as ana
    """
    settings = open_settings(ledger=ledger_path)
    with open_ledger_at(settings.ledger) as ledger:
        _finish(mactions.answer(ledger, mission_id, text, operator or settings.operator))

@mission_group.command("approve")
@click.argument("mission_id", type=click.IntRange(1))
@as_option
@ledger_option
@yes_option
@ledger_errors
def approve_cmd(mission_id: int, operator: str | None, ledger_path: str | None, yes: bool) -> None:
    """Approve the report and close the mission (every worker delivered or abandoned).
    Asks first unless --yes.

    \b
    Example:
      watchkeeper mission approve 1 --as ana --yes
    """
    settings = open_settings(ledger=ledger_path)
    with open_ledger_at(settings.ledger) as ledger:
        if not yes:
            _ask(ledger, mission_id, "Approve the report of mission {id} ({name}) and close it?", "not approved")
        _finish(mactions.approve(ledger, mission_id, operator or settings.operator))

@mission_group.command("abandon-worker")
@click.argument("mission_id", type=click.IntRange(1))
@click.argument("seq", type=click.IntRange(1))
@as_option
@ledger_option
@yes_option
@ledger_errors
def abandon_worker_cmd(mission_id: int, seq: int, operator: str | None, ledger_path: str | None,
                       yes: bool) -> None:
    """Give up worker SEQ (failed, or still running: its run is killed, artifacts kept).
    Asks first unless --yes.

    \b
    Example:
      watchkeeper mission abandon-worker 1 2 --as ana --yes
    """
    settings = open_settings(ledger=ledger_path)
    with open_ledger_at(settings.ledger) as ledger:
        if not yes:
            _ask(ledger, mission_id, f"Abandon worker {seq} of mission {{id}} ({{name}})? A running worker's"
                 " run is killed; its artifacts are kept.", "not abandoned")
        _finish(mactions.abandon_worker(ledger, mission_id, seq, operator or settings.operator))

@mission_group.command("abort")
@click.argument("mission_id", type=click.IntRange(1))
@as_option
@ledger_option
@yes_option
@ledger_errors
def abort_cmd(mission_id: int, operator: str | None, ledger_path: str | None, yes: bool) -> None:
    """Abort: live workers are killed, every output and artifact is kept. Asks first unless --yes.

    \b
    Example:
      watchkeeper mission abort 1 --as ana --yes
    """
    settings = open_settings(ledger=ledger_path)
    with open_ledger_at(settings.ledger) as ledger:
        if not yes:
            _ask(ledger, mission_id, "Abort mission {id} ({name})? Its live workers are killed;"
                 " every output and artifact is kept.", "not aborted")
        _finish(mactions.abort(ledger, mission_id, operator or settings.operator))


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (mission_group,)
