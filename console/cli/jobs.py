"""CLI: ``jobs`` (the list of jobs and the spec files that do not load), and the job controls
``pause`` and ``resume``.

Exit codes as ``abandon``: 0 done (or already so by you), 1 refused (someone else paused it
first, it is not paused, or the question was answered no), 2 no such job.
"""

from __future__ import annotations

import json

import click

from console.cli import table
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
from core.ledger.page_records import JobControls, JobRow
from core.ledger.sql_store import SqlStore
from core.vocabulary import ActionResult


def _known(ledger: Ledger, job: str) -> JobControls:
    """The job's control state, or exit 2 (one line) when there is no such job or it was removed."""
    controls = SqlStore(ledger).job_controls(job)
    if controls is None:
        fail(unknown_words(job), EXIT_NOT_FOUND)
    if not controls.enabled:
        fail(shown(removed_words(job)), EXIT_NOT_FOUND)
    return controls


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
        controls = _known(ledger, job)
        if controls.paused_at is None and not yes:
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
        controls = _known(ledger, job)
        if controls.paused_at is not None and not yes:
            by = str(controls.paused_by or "?").removeprefix("operator:")
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

    from core.supervisor.policy.words import breaker_word, next_run_word

    now = _time.time()
    rows: list[JobRow] = []
    with open_ledger(ledger_path, read_only=True) as ledger:
        store = SqlStore(ledger)
        cursor = None
        while True:
            page = store.jobs_page(now=now, after=cursor, limit=500)
            rows.extend(page.rows)
            cursor = page.cursor
            if cursor is None:
                break
        invalid = store.invalid_specs(never_loaded=True, limit=10000)
        errors = {spec.job: spec.text for spec in store.invalid_specs(limit=10000) if spec.loaded}
        from core.ledger import reads

        runner_up, runner_text = reads.runner_status(ledger, now)
    if as_json:
        for job in rows:
            doc = {**job.to_json(), "loaded": True, "spec_error": errors.get(job.name) or job.last_error}
            click.echo(json.dumps(doc, default=str))
        for inv in invalid:
            click.echo(json.dumps({"name": inv.job or None, "loaded": False, "enabled": 0, "source": inv.source,
                                   "line": inv.line, "field": inv.field, "spec_error": inv.text,
                                   "first_seen": inv.first_seen, "last_seen": inv.last_seen}))
        return
    if not rows and not invalid:
        click.echo("no jobs (a runner records jobs when it loads their specs)")
        return
    # JOB fitted to the longest name (at most 20), so a line fits 80 columns; on a terminal a
    # spec error's text is cut to its width (console.cli.table), piped it is whole.
    room = table.terminal_width()
    names = [shown(job.name + ("" if job.enabled else " (removed)"), 20) for job in rows]
    names += [shown(inv.name, 20) for inv in invalid]
    jw = max(3, *map(len, names))
    click.echo(f"{'JOB':<{jw}} {'SCHEDULE':<18} {'NEXT RUN':<10} {'LAST':<10} {'BREAKER':<10} {'SUCCESS':>7}")
    for job, name in zip(rows, names, strict=False):
        # The console's Jobs view gives the same answer (reads.job_next_run): paused, the
        # breaker's trial slot after its cool-down, a one-shot's `at`.
        nxt = next_run_word(job.next_run, job.next_held, now)
        rate = "-" if job.success_rate is None else f"{job.success_rate:.0%}"
        brk = breaker_word(job.breaker_state, job.breaker_until, now)  # a daily job cools down for a day
        last = "partial" if job.last_status == "partial" else str(job.last_state or "-")
        click.echo(f"{name:<{jw}} {shown(job.schedule_text or '-', 18):<18} {nxt:<10.10}"
                   f" {last:<10} {brk:<10} {rate:>7}")
        error = errors.get(job.name) or job.last_error
        if error:
            head = "  ! spec error (the last good spec still runs): "
            click.echo(head + table.last_column(error, len(head), room))
    for inv, name in zip(invalid, names[len(rows):], strict=True):
        click.echo(f"{name:<{jw}} {'-':<18} {'-':<10} {'invalid':<10} {'-':<10} {'-':>7}")
        head = "  ! spec error (never loaded): "
        click.echo(head + table.last_column(inv.text, len(head), room))
    if rows and not runner_up:
        # Next runs are when a runner would start them; with none up, nothing starts.
        click.echo(table.folded(f"note: {runner_text}: nothing runs until a runner starts (watchkeeper status)",
                                room))


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (jobs_cmd, pause_cmd, resume_cmd)
