"""CLI: job controls, ``pause`` and ``resume``.

Exit codes as ``abandon``: 0 done (or already so by you), 1 refused (someone else paused it
first, it is not paused, or the question was answered no), 2 no such job.
"""

from __future__ import annotations

import click

from console.cli.common import (
    EXIT_FINDINGS,
    EXIT_NOT_FOUND,
    as_option,
    confirm_or_exit,
    fail,
    ledger_errors,
    ledger_option,
    shown,
    yes_option,
)
from console.cli.runs import open_ledger, open_settings
from core import actions
from core.actions import removed_words, unknown_words
from core.ledger.connection import Ledger
from core.ledger.reads import job_controls
from core.vocabulary import ActionResult


def register(cli: click.Group) -> None:
    cli.add_command(pause_cmd)
    cli.add_command(resume_cmd)


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
