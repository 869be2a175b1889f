"""``watchkeeper sweep``, ``status`` and ``doctor``: the orphan sweep and ledger health."""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

import click

from console.cli.common import (
    ledger_errors,
    ledger_option,
    open_ledger_at,
    open_settings,
    shown,
    shown_lines,
)
from console.cli.table import folded, terminal_width
from core.ledger import runners as core_status
from core.sweep import doctor as core_doctor
from core.sweep import sweep as core_sweep
from core.sweep import watch as core_watch


def _config_option(f: Any) -> Any:
    return click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True), default=None,
                        help="watchkeeper.toml to read settings (lease, heartbeat, …) from.")(f)


def _print_report(report: core_sweep.SweepReport, watched: core_watch.WatchReport, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({**report.to_dict(), "watch": watched.to_dict()}))
        return
    if report.skipped_paused:
        click.echo("sweep: paused detected; nothing declared dead this pass")
    for run_id in report.orphaned:
        how = " (process group killed)" if run_id in report.killed else ""
        click.echo(f"orphaned run {run_id}{how}")
    for rid in report.stalled_runners:
        click.echo(f"runner {shown(rid)} stalled: process alive, heartbeat stale; its runs were left alone")
    if watched.gap == "opened":
        click.echo("runner gap: no runner is running jobs; escalation runner_gap opened")
    elif watched.gap == "resolved":
        click.echo("runner gap resolved: a runner is heartbeating again")
    if watched.sent or watched.failed:
        click.echo(f"notifications: {watched.sent} sent, {watched.failed} failed, {watched.retried} to retry")
    for err in [*report.errors, *watched.errors]:
        click.echo(f"error: {shown_lines(err)}", err=True)


@click.command("sweep")
@ledger_option
@_config_option
@click.option("--loop", is_flag=True, help="Keep sweeping every --interval seconds until interrupted.")
@click.option("--interval", type=click.FloatRange(min=0.1, max=86400), default=None,
              help="Seconds between passes (default: sweep_interval).")
@click.option("--json", "as_json", is_flag=True, help="One JSON report per pass.")
@ledger_errors
def sweep_cmd(ledger_path: str | None, config_path: str | None, loop: bool, interval: float | None,
              as_json: bool) -> None:
    """Declare dead the runs nothing is running any more (the orphan sweep), and watch the runner.

    A run is orphaned when its lease expired and its process is gone; a live process whose
    runner is gone is killed (whole process group) and orphaned. Runs of live runners are
    never touched. Each pass also opens the runner_gap escalation when no runner is alive
    while one is expected (the last one did not stop cleanly), and delivers due
    notifications itself, so a cron entry running this command reaches the owner even when
    nothing else is alive. Exit code 1 when a pass could not write (it is retried next pass).

    \b
    Example:
      watchkeeper sweep --ledger demo/watchkeeper.db           # one pass, e.g. from cron
      watchkeeper sweep --ledger demo/watchkeeper.db --loop    # a second watcher
    """
    settings = open_settings(config=config_path, ledger=ledger_path)
    led = open_ledger_at(settings.ledger)
    failed = False

    def on_report(report: core_sweep.SweepReport) -> None:
        nonlocal failed
        watched = core_watch.watch_once(led, settings)
        failed = bool(report.errors or watched.errors)
        _print_report(report, watched, as_json)

    try:
        if loop:
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            core_sweep.loop(led, settings, actor="sweep", interval=interval, stop=stop, on_report=on_report)
        else:
            on_report(core_sweep.Sweeper(settings, actor="sweep").sweep_once(led))
    finally:
        led.close()
    sys.exit(1 if failed else 0)


@click.command("status")
@ledger_option
@_config_option
@click.option("--all", "all_runners", is_flag=True,
              help="Also list runners gone for more than a day (by default only counted).")
@click.option("--host", default=None, help="Only this host's runners (its hostname).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@ledger_errors
def status_cmd(ledger_path: str | None, config_path: str | None, all_runners: bool, host: str | None,
               as_json: bool) -> None:
    """Show each runner's last heartbeat, and say plainly when no runner is alive; with
    runners on more than one host (or a host down), each host with its runners alive, last
    heartbeat and live runs.

    Each runner is listed once, newest heartbeat first; runners gone for more than a day
    are counted, not listed, unless --all. Exit code 2 when there is a runner gap (no
    runner alive), else 0.

    \b
    Example:
      watchkeeper status --ledger demo/watchkeeper.db
      no runner since 04:12, 7m ago
    """
    settings = open_settings(config=config_path, ledger=ledger_path)
    led = open_ledger_at(settings.ledger, read_only=True)
    try:
        st = core_status.status(led, all_runners=all_runners, host=host)
    finally:
        led.close()
    if as_json:
        click.echo(json.dumps(st))
    else:
        room = terminal_width()
        for line in core_status.format_status(st):
            # On a terminal a long line (a long hostname, a stop reason) is folded at a word,
            # its continuation indented under it, instead of wrapping mid-word at the edge.
            click.echo(folded(shown_lines(line), room))
    sys.exit(2 if st["gap"] else 0)


@click.command("doctor")
@ledger_option
@_config_option
@click.option("--repair", is_flag=True, help="Settle what can be settled safely (audited), then check again.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@ledger_errors
def doctor_cmd(ledger_path: str | None, config_path: str | None, repair: bool, as_json: bool) -> None:
    """Check the ledger's invariants; print each violation with the run it concerns.

    Checks: SQLite integrity, run state vs audit trail, live runs without a live owner or
    lease, one terminal transition per run, contiguous attempts, one run per slot and
    attempt. Exit code 1 when violations remain.

    \b
    Example:
      watchkeeper doctor --ledger demo/watchkeeper.db
      watchkeeper doctor --ledger demo/watchkeeper.db --repair --json
    """
    settings = open_settings(config=config_path, ledger=ledger_path)
    led = open_ledger_at(settings.ledger, read_only=not repair)
    try:
        report = core_doctor.diagnose(led, settings, repair=repair)
    finally:
        led.close()
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    else:
        for line in report.repaired:
            click.echo(f"repaired: {shown_lines(line)}")
        for err in report.errors:
            click.echo(f"error: {shown_lines(err)}", err=True)
        for v in report.violations:
            click.echo(shown_lines(str(v)) + ("  (repairable: --repair)" if v.repairable and not repair else ""))
        click.echo("ledger ok" if report.ok else f"{len(report.violations)} violation(s)")
    sys.exit(0 if report.ok else 1)


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (sweep_cmd, status_cmd, doctor_cmd)
