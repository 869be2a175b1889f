"""CLI: ``jobs`` (the list of jobs and the spec files that do not load), and the job controls
``pause`` and ``resume``.

Exit codes as ``abandon``: 0 done (or already so by you), 1 refused (someone else paused it
first, it is not paused, or the question was answered no), 2 no such job.
"""

from __future__ import annotations

import json
from pathlib import Path
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
    open_settings,
    shown,
    yes_option,
)
from core import actions
from core.actions import removed_words, unknown_words
from core.ledger.connection import Ledger
from core.ledger.reads import job_controls
from core.text import short_age
from core.vocabulary import ActionResult


def _known(ledger: Ledger, job: str) -> dict:
    row = job_controls(ledger, job)
    if row is not None and not row["enabled"]:
        fail(shown(removed_words(job)), EXIT_NOT_FOUND)
    if row is None:
        fail(unknown_words(job), EXIT_NOT_FOUND)
    return row


def _report(result: ActionResult) -> None:
    click.echo(shown(result.message), err=not result.ok)
    if result.missing:
        raise SystemExit(EXIT_NOT_FOUND)
    if not result.ok:
        raise SystemExit(EXIT_FINDINGS)


@click.command("pause")
@click.argument("job")
@as_option
@click.option("--reason", default=None, help="Why, recorded with the pause.")
@ledger_option
@yes_option
@ledger_errors
def pause_cmd(job: str, operator: str | None, reason: str | None, ledger_path: str | None, yes: bool) -> None:
    """Pause JOB: its scheduled runs are skipped (each skipped slot is recorded as a
    slot_skipped_paused event) until `watchkeeper resume JOB`. The pause is held in the
    ledger, so it survives runner restarts. Runs already queued or running go on, and
    `watchkeeper trigger JOB` still runs it by hand. Asks first unless --yes.

    Exit 0 when paused (or already paused by you), 1 when refused (someone else paused it
    first: says who and when; or the question was answered no), 2 when there is no such job.

    \b
    Example:
      watchkeeper pause nightly-backup --reason "disk swap tonight" --as ana --yes
    """
    settings = open_settings(None, None, ledger=ledger_path, operator=operator)
    with open_ledger(ledger_path) as ledger:
        row = _known(ledger, job)
        if row["paused_at"] is None and not yes:
            question = (f"Pause {shown(job)}? Its scheduled runs are skipped until "
                        f"`watchkeeper resume {shown(job)}`.")
            confirm_or_exit(question, "not paused")
        result = actions.pause_job(ledger, job, settings.operator, reason=reason)
    _report(result)


@click.command("resume")
@click.argument("job")
@as_option
@ledger_option
@yes_option
@ledger_errors
def resume_cmd(job: str, operator: str | None, ledger_path: str | None, yes: bool) -> None:
    """Resume a paused JOB: its next scheduled slot runs as usual; the slots skipped while it
    was paused are not replayed. Asks first unless --yes.

    Exit 0 when resumed (or already resumed by you), 1 when refused (the job is not paused;
    or the question was answered no), 2 when there is no such job.

    \b
    Example:
      watchkeeper resume nightly-backup --as ana --yes
    """
    settings = open_settings(None, None, ledger=ledger_path, operator=operator)
    with open_ledger(ledger_path) as ledger:
        row = _known(ledger, job)
        if row["paused_at"] is not None and not yes:
            by = str(row["paused_by"] or "?").removeprefix("operator:")
            question = f"Resume {shown(job)} (paused by {shown(by)})? Its next scheduled slot runs."
            confirm_or_exit(question, "not resumed")
        result = actions.resume_job(ledger, job, settings.operator)
    _report(result)


@click.command("jobs")
@ledger_option
@click.option("--json", "as_json", is_flag=True, help="JSON lines, one job (or invalid spec file) each.")
@ledger_errors
def jobs_cmd(ledger_path: str | None, as_json: bool) -> None:
    """List jobs: schedule, next run, last outcome, breaker state, success rate; then the
    spec files that do not load, each with its error as FILE:LINE: job 'NAME': MESSAGE.

    A paused job shows `paused` as its next run. A job whose file has an error since its
    last good load keeps running that spec; its error is shown under it.

    \b
    Example:
      watchkeeper jobs --ledger demo/watchkeeper.db
    """
    import time as _time

    from core.ledger.reads import invalid_specs, jobs_page
    from core.supervisor.policy.words import next_run_word

    now = _time.time()
    rows: list[dict[str, Any]] = []
    with open_ledger(ledger_path, read_only=True) as ledger:
        cursor = None
        while True:
            page = jobs_page(ledger, now=now, after=cursor, limit=500)
            rows.extend(page.rows)
            cursor = page.cursor
            if cursor is None:
                break
        invalid = invalid_specs(ledger, never_loaded=True, limit=10000)
        errors = {r["job"]: r["text"] for r in invalid_specs(ledger, limit=10000) if r["loaded"]}
    if as_json:
        for r in rows:
            r["loaded"] = True
            r["spec_error"] = errors.get(r["name"]) or r.get("last_error")
            click.echo(json.dumps(r, default=str))
        for inv in invalid:
            click.echo(json.dumps({"name": inv["job"] or None, "loaded": False, "enabled": 0, "source": inv["source"],
                                   "line": inv["line"], "field": inv["field"], "spec_error": inv["text"],
                                   "first_seen": inv["first_seen"], "last_seen": inv["last_seen"]}))
        return
    if not rows and not invalid:
        click.echo("no jobs (a runner records jobs when it loads their specs)")
        return
    click.echo(f"{'JOB':<22} {'SCHEDULE':<18} {'NEXT RUN':<10} {'LAST':<10} {'BREAKER':<10} {'SUCCESS':>7}")
    for r in rows:
        # The console's Jobs view gives the same answer (reads.job_next_run): paused, the
        # breaker's trial slot after its cool-down, a one-shot's `at`.
        nxt = next_run_word(r["next_run"], r.get("next_held"), now)
        rate = "-" if r["success_rate"] is None else f"{r['success_rate']:.0%}"
        brk = r["breaker_state"] or "closed"
        if brk == "open" and r.get("breaker_until"):
            brk += f" {short_age(r['breaker_until'] - now)}"  # a daily job cools down for a day
        name = r["name"] + ("" if r["enabled"] else " (removed)")
        last = "partial" if r.get("last_status") == "partial" else str(r["last_state"] or "-")
        click.echo(f"{shown(name, 22):<22} {shown(r['schedule_text'] or '-', 18):<18} {nxt:<10.10}"
                   f" {last:<10} {brk:<10} {rate:>7}")
        error = errors.get(r["name"]) or r.get("last_error")
        if error:
            click.echo(f"  ! spec error (the last good spec still runs): {shown(error, 200)}")
    for inv in invalid:
        name = inv["job"] or Path(inv["source"]).name
        click.echo(f"{shown(name, 22):<22} {'-':<18} {'-':<10} {'invalid':<10} {'-':<10} {'-':>7}")
        click.echo(f"  ! spec error (never loaded): {shown(inv['text'], 200)}")


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (jobs_cmd, pause_cmd, resume_cmd)
