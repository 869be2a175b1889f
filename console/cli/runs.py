"""CLI: ``run`` (headless runner), ``runs``, ``show``, ``trigger``, ``abandon``, ``retry``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from console.cli import table
from console.cli.common import (
    EXIT_FINDINGS,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    ID,
    as_option,
    config_option,
    confirm_or_exit,
    fail,
    ledger_errors,
    ledger_name,
    ledger_option,
    open_ledger,
    open_settings,
    prepare_places,
    shown,
    shown_lines,
    yes_option,
)
from console.evidence import handoff_fields, verification_rows
from core.ledger.lifecycle import TERMINAL, State
from core.ledger.records import Outcome, Run
from core.ledger.runs import job_known
from core.ledger.sql_store import SqlStore
from core.monitor import decode_status, exit_status
from core.processes import signal_name
from core.text import duration, iso, local_hms, quoted

STATE_COLOURS = {"succeeded": "green", "failed": "red", "timed_out": "red", "orphaned": "magenta",
                 "blocked": "yellow", "abandoned": "bright_black", "running": "cyan", "queued": "blue"}


def use_colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def styled_state(state: str) -> str:
    text = f"{state:<10}"
    return click.style(text, fg=STATE_COLOURS.get(state)) if use_colour() else text


#: How long a run ran: the one compact style (``core.text.duration``).
fmt_duration = duration


def fmt_exit(exit_code: int | None, sig: int | None) -> str:
    if sig:
        return signal_name(sig)
    return "-" if exit_code is None else str(exit_code)


def finished_line(ended_at: float, job: str, attempt: int, state: str, duration: float | None,
                  exit_code: int | None, sig: int | None, reason: str | None) -> str:
    """One line per finished run: time, job, attempt, state, duration, exit."""
    line = (f"{local_hms(ended_at)}  {shown(job, 22):<22.22} #{attempt:<2} {styled_state(state)} "
            f"{fmt_duration(duration):>8}  exit {fmt_exit(exit_code, sig)}")
    if reason and state != "succeeded":
        line += f"  ({shown(reason, 200)})"
    return line


def stop_options(fn: Any) -> Any:
    """``--drain`` / ``--kill``: what stopping the runner does with the runs still going."""
    fn = click.option("--kill", is_flag=True,
                      help="On stop, end running jobs (SIGTERM, SIGKILL after shutdown_grace); recorded as"
                           " abandoned (interrupted).")(fn)
    return click.option("--drain", is_flag=True,
                        help="On stop, wait up to shutdown_grace seconds for running jobs before leaving them"
                             " to the next runner.")(fn)


def stop_mode(drain: bool, kill: bool) -> str:
    """The runner's ``stop_mode`` from ``--drain``/``--kill`` (exit 2 when both are given)."""
    if drain and kill:
        fail("--drain and --kill exclude each other", EXIT_USAGE)
    return "drain" if drain else "kill" if kill else "leave"


@click.command("run")
@click.argument("spec_dir", type=click.Path(exists=True, file_okay=False))
@ledger_option
@config_option
@click.option("--concurrency", type=int, default=None, help="Global limit of runs at once [default 8].")
@click.option("--quiet", is_flag=True, help="Do not print a line per finished run.")
@click.option("--metrics", "metrics_bind", default=None, metavar="HOST:PORT",
              help="Serve Prometheus metrics on http://HOST:PORT/metrics [default: the [metrics] bind setting; off].")
@stop_options
def run_cmd(spec_dir: str, ledger_path: str | None, config_path: str | None, concurrency: int | None,
            quiet: bool, metrics_bind: str | None, drain: bool, kill: bool) -> None:
    """Run the jobs of SPEC_DIR headless, printing one line per finished run.

    Ctrl-C (or SIGTERM) stops spawning. Running jobs keep running under their monitors and
    the next runner re-attaches them, recording how each really ended (the upgrade path:
    stop, install, start). --drain waits up to `shutdown_grace` seconds for them first;
    --kill ends them (recorded as abandoned, reason interrupted). A second Ctrl-C stops
    waiting.

    With --metrics (or the [metrics] bind setting) it serves Prometheus metrics read from the
    ledger: runs by job and state, durations, open escalations, heartbeat age, outbox.

    \b
    Example:
      watchkeeper run sample_jobs --ledger /var/lib/watchkeeper/ledger.db
      watchkeeper run sample_jobs --metrics 127.0.0.1:9464   # curl http://127.0.0.1:9464/metrics
    """
    from core.runner.runner import Finished, Runner
    from core.spec.loader import load_dir

    settings = open_settings(spec_dir, config_path, ledger=ledger_path, concurrency=concurrency)
    prepare_places(settings.ledger, settings.artifacts_dir)
    stop_metrics = start_metrics(metrics_bind or settings.metrics.bind, settings.ledger,
                                  "--metrics" if metrics_bind else "metrics.bind")
    result = load_dir(spec_dir)
    for err in result.errors:
        click.echo(f"spec error: {err}", err=True)
    if not result.jobs:
        click.echo(f"warning: no valid jobs in {spec_dir}; waiting for specs to appear", err=True)

    def on_finished(f: Finished) -> None:
        if not quiet:
            click.echo(finished_line(f.ended_at, f.job, f.attempt, f.state, f.duration_s, f.exit_code, f.signal,
                                     f.reason))

    def on_started() -> None:  # once Ctrl-C is a clean stop (the runner's signal handlers are in place)
        click.echo(started_line(runner, settings), err=True)

    runner = Runner(spec_dir, settings, on_finished=on_finished, stop_mode=stop_mode(drain, kill),
                    on_notice=lambda text: click.echo(f"watchkeeper: {text}", err=True), on_started=on_started)
    try:
        asyncio.run(runner.run())
    except KeyboardInterrupt:
        pass
    finally:
        if stop_metrics is not None:
            stop_metrics()
    print_stopped(runner.stop_reason, runner.left_behind, runner.unrecorded_left)


def started_line(runner: Any, settings: Any) -> str:
    """The line ``run`` (and ``up --web``) prints once its runner is up: its id, how many
    jobs it runs and its ledger (a URL's password masked)."""
    return (f"watchkeeper: runner {runner.id} on {len(runner.jobs)} job(s), ledger "
            f"{ledger_name(settings.ledger)} (Ctrl-C to stop)")


def start_metrics(bind: str | None, ledger: Any, where: str) -> Any:
    """Starts the metrics server when ``bind`` is set (one line and exit 2 when it cannot
    listen); returns its stop function, or None."""
    if not bind:
        return None
    from console.bind import BindError, parse_bind
    from console.metrics import serve_metrics

    try:
        host, port = parse_bind(bind)
        stop = serve_metrics(ledger, host, port)
    except BindError as exc:
        fail(f"{where} {exc}", EXIT_USAGE)
    except OSError as exc:
        fail(f"{where} {bind}: cannot listen ({exc.strerror or exc})", EXIT_USAGE)
    click.echo(f"watchkeeper: metrics at http://{bind}/metrics", err=True)
    return stop


def print_stopped(reason: str, left: list[Run], unrecorded: list[int] | None = None) -> None:
    """On stderr: why the runner stopped and the runs it left running (``Runner.left_behind``),
    which keep running under their monitors until the next runner re-attaches them; or, when
    the stop could not be recorded, the ids it left running (``Runner.unrecorded_left``)."""
    if unrecorded is not None:
        click.echo(f"watchkeeper: runner stopped ({shown(reason)}), not recorded in the ledger; "
                   + (f"run(s) {', '.join(map(str, unrecorded))} left running under their monitors"
                      if unrecorded else "nothing left running"), err=True)
        return
    click.echo(f"watchkeeper: runner stopped ({shown(reason)})"
               + (f"; {len(left)} run(s) left running; the next runner re-attaches them and records how they end:"
                  if left else "; nothing left running"), err=True)
    for r in left:
        name = f"{r.job}/{r.task}" if r.task else r.job
        click.echo(f"  run {r.id}  {shown(name)}  attempt {r.attempt}  pid {r.pid or '-'}", err=True)


@click.command("runs")
@ledger_option
@click.option("--job", default=None, help="Only this job.")
@click.option("--state", default=None, type=click.Choice([s.value for s in State]),
              help="Only runs in this state (e.g. failed, orphaned).")
@click.option("--host", default=None, help="Only runs spawned on this host (its hostname).")
@click.option("--limit", default=30, show_default=True, type=click.IntRange(1, 10000))
@click.option("--json", "as_json", is_flag=True, help="JSON lines, one run each.")
@ledger_errors
def runs_cmd(ledger_path: str | None, job: str | None, state: str | None, host: str | None, limit: int,
             as_json: bool) -> None:
    """List recent runs, newest first by the time shown (when each ended; a run still in
    flight by when it started or was queued). Exit 2 when --job names a job the ledger has
    never seen.

    \b
    Example:
      watchkeeper runs --state failed --limit 10
    """
    with open_ledger(ledger_path, read_only=True) as ledger:
        rows = SqlStore(ledger).listed_runs(job=job, state=state, limit=limit, host=host)
        if job and not rows and not job_known(ledger, job):
            fail(f"no job {quoted(job)} in the ledger (see `watchkeeper jobs`)", EXIT_NOT_FOUND)
        ended = ended_meanwhile(ledger, {lr.run.id for lr in rows if lr.run.state == State.RUNNING})
    if as_json:
        for listed in rows:
            click.echo(json.dumps(listed.to_json(), default=str))
        return
    if not rows:
        click.echo("no runs")
        return
    room = table.terminal_width()
    # Piped, a name is whole (as the reason is); on a terminal it is narrowed to fit.
    cap_name, cap_host = (22, 12) if room is not None else (200, 200)
    names = [_one_line(f"{lr.run.job}/{lr.run.task}" if lr.run.task else lr.run.job, cap_name) for lr in rows]
    hosts = [_one_line(lr.run.host or "-", cap_host) for lr in rows]
    idw = max(2, *(len(str(lr.run.id)) for lr in rows))
    # Every column but REASON is fitted to what it holds; on a terminal JOB and HOST are
    # narrowed further so a line never wraps (console.cli.table).
    fitted = {"job": max(3, *map(len, names)), "host": max(4, *map(len, hosts))}
    widths = table.narrowed(fitted, {"job": 12, "host": 8}, fixed=idw + 2 + 8 + 2 + 1 + 1 + 3 + 1 + 10 + 1 + 8 + 2 + 7 + 1,
                       room=room)
    click.echo(f"{'ID':>{idw}}  {'TIME':8}  {'JOB':<{widths['job']}} {'HOST':<{widths['host']}} {'ATT':3} {'STATE':10}"
               f" {'DURATION':>8}  {'EXIT':7} REASON")
    for listed, name, where in zip(rows, names, hosts, strict=True):
        r = listed.run
        before = f"{r.id:>{idw}}  {local_hms(r.time)}  {_cut(name, widths['job'])} {_cut(where, widths['host'])} {r.attempt:<3} "
        after = f" {fmt_duration(listed.duration_s):>8}  {fmt_exit(r.exit_code, r.signal):7} "
        why = ended_words(ended[r.id]) if r.id in ended else listed.verdict_reason or r.reason or ""
        reason = table.last_column(why, len(before) + 10 + len(after), room)
        click.echo(before + styled_state(r.state) + after + reason)


def ended_meanwhile(ledger: Any, run_ids: set[int]) -> dict[int, int]:
    """Of ``run_ids``, the runs still ``running`` in the ledger whose job ended while no
    runner was up: their runner (of this host) is gone and their monitor recorded the job's
    status (``core.sweep.sweep.reattachable`` says "ended"). ``{run id: $? as the monitor
    wrote it}``; the next runner of this host records each end. Reads tables ``runs`` and
    ``runners`` and the runs' folders; never raises for a folder it cannot read."""
    if not run_ids:
        return {}
    from core.liveness import hostname
    from core.sweep.sweep import reattachable

    now, here, out = time.time(), hostname(), {}
    for run, owner in SqlStore(ledger).live_runs_and_owners():
        if run.id in run_ids and reattachable(run, owner, now=now, this_host=here) == "ended" and run.artifacts_dir:
            status = exit_status(Path(run.artifacts_dir))
            if status is not None:
                out[run.id] = status
    return out


def ended_words(status: int) -> str:
    """How ``ended_meanwhile`` reads in a listing: the job's end, and who records it."""
    code, sig = decode_status(status)
    how = f"killed by {signal_name(sig)}" if sig is not None else f"exit {code}"
    return f"the job ended ({how}) while no runner was up: the next runner of this host records it"


def _cut(text: str, width: int) -> str:
    """Already escaped ``text`` cut with "…" to ``width`` characters and padded to it."""
    return (text if len(text) <= width else text[:width - 1] + "…").ljust(width)


def _one_line(text: Any, width: int = 60) -> str:
    """Untrusted text on one line, escaped (``common.shown``: the CLI's one escaper)."""
    return shown(text, width)


def _safe(text: Any) -> str:
    """Untrusted multi-line text, escaped (``common.shown_lines``): newlines and tabs stay."""
    return shown_lines(text)


def verdict_sentence(o: Outcome) -> str:
    """The supervisor's verdict on an outcome as a sentence: ``escalated as critical
    (failed): backup-db exited 1``, ``kept silent (routine): routine success (…)``, ``noted,
    not escalated (first_success, info): first-ever success of x``. Untrusted parts escaped."""
    kind = shown(o.verdict_kind or "?")
    reason = shown(o.verdict_reason or "")
    if o.escalate:
        head = f"escalated as {shown(o.severity or 'info')} ({kind})"
    elif o.silent:
        head = f"kept silent ({kind})"
    else:
        head = f"noted, not escalated ({kind}" + (f", {shown(o.severity)})" if o.severity else ")")
    judged = f" [judged by {shown(o.judged_by)}]" if o.judged_by else ""
    return head + (f": {reason}" if reason else "") + judged


def verification_lines(ver: Any) -> list[str]:
    """``job_outcomes.verification`` as a heading (passed / FAILED and the failed checks) and
    one ``ok|FAIL|soft  check [path]: what was found`` line per check, claims first
    (``console.evidence.verification_rows``, the console's reading of the same record)."""
    rows = verification_rows(ver)
    failed = [shown(n) for n in (ver.get("failed") or [])] if isinstance(ver, dict) else []
    passed = isinstance(ver, dict) and ver.get("ok", not failed)
    head = f"verification: {'passed' if passed else 'FAILED'}, {len(rows)} check(s)"
    if failed:
        head += f" (failed: {', '.join(failed)})"
    out = [head]
    for ok, soft, what, found in rows:
        mark = "ok  " if ok else ("soft" if soft else "FAIL")
        out.append(f"  {mark}  {what}" + (f": {found}" if found else ""))
    return out


@click.command("show")
@click.argument("run_id", type=ID)
@ledger_option
@click.option("--json", "as_json", is_flag=True, help="Everything as one JSON document.")
@ledger_errors
def show_cmd(run_id: int, ledger_path: str | None, as_json: bool) -> None:
    """Show one run: its attempts, outcome, handoff, audit trail and output head/tail.

    \b
    Example:
      watchkeeper show 42
    """
    with open_ledger(ledger_path, read_only=True) as ledger:
        d = SqlStore(ledger).run_detail(run_id)
        if d is None:
            fail(f"no run {run_id}", EXIT_NOT_FOUND)
        ended = ended_meanwhile(ledger, {run_id} if d.run.state == State.RUNNING else set())
    if as_json:
        click.echo(json.dumps(d.to_json(), default=str, indent=2))
        return
    r, o = d.run, d.outcome
    room = table.terminal_width()

    def say(text: str = "") -> None:
        # On a terminal a long line (the audit trail's) folds at a word under itself; the
        # output sections below are shown as they were written.
        click.echo(table.folded(text, room))

    say(f"run {r.id}  job {shown(r.job)}  attempt {r.attempt}  state {r.state}")
    if r.id in ended:
        say(f"  {ended_words(ended[r.id])}")
    say(f"  slot {shown(r.slot)}  trigger {r.trigger}  worker {r.worker}"
        f"  runner {shown(r.runner_id or '-')}  host {shown(r.host or '-')}")
    if r.abandon_requested_at:
        say(shown(f"  kill requested by {r.abandon_requested_by} at {iso(r.abandon_requested_at)}:"
                  f" waiting for runner {r.runner_id} on {r.host or '?'} to confirm"))
    say(f"  started {iso(r.started_at) or '-'}  ended {iso(r.ended_at) or '-'}  "
        f"duration {fmt_duration(o.duration_s if o else None)}  exit {fmt_exit(r.exit_code, r.signal)}  "
        f"pid {r.pid or '-'}")
    if r.reason:
        say(f"  reason: {_safe(r.reason)}")
    say("attempts:")
    for a in d.attempts:
        mark = "*" if a.id == r.id else " "
        say(f" {mark} #{a.attempt} run {a.id} {a.state:<10} exit {fmt_exit(a.exit_code, a.signal)}"
            f"  {_safe(a.reason or '')}")
    if d.children:
        say("sub-tasks:")
        for c in d.children:
            say(f"   {shown(c.task):<16} #{c.attempt} run {c.id} {c.state:<10} "
                f"exit {fmt_exit(c.exit_code, c.signal)}")
    if o:
        say(f"outcome: status {o.status}  stdout {d.stdout.total} bytes, stderr "
            f"{d.stderr.total} bytes{' (capped: head and tail kept)' if o.output_truncated else ''}")
        if o.verdict_reason or o.severity or o.verdict_kind:
            say(f"verdict: {verdict_sentence(o)}")
        ver = o.verification
        if isinstance(ver, dict) and not ver.get("checks") and r.state != "succeeded":
            say("verification: skipped (the run failed before verification)")
        elif ver:
            for line in verification_lines(ver):
                say(line)
        for f in o.handoff_findings or []:
            say(f"handoff finding: {shown(f.get('code'))}: {_safe(f.get('message'))}")
        if o.handoff is not None:
            say("handoff:")
            for key, value in handoff_fields(o.handoff):
                say(f"  {key}: {value}")
    say("audit trail (every attempt of the lineage):")
    for e in d.events:
        move = f"{e.from_state or ''} → {e.to_state or ''}" if e.to_state or e.from_state else ""
        say(f"  {iso(e.at)}  run {e.run_id or '-':<5} {e.kind:<16} {move:<24} {shown(e.actor)}  "
            f"{_safe(e.reason or '')}")
    for name, sl in (("stdout", d.stdout), ("stderr", d.stderr)):
        if not sl.size:
            continue
        kept = "bytes kept" if sl.exists else "bytes; file gone, slices from the ledger"
        click.echo(f"--- {name} ({sl.size} {kept}) head ---")
        click.echo(_safe(sl.head).rstrip("\n"))
        if sl.tail:
            click.echo(f"--- {name} tail ---")
            click.echo(_safe(sl.tail).rstrip("\n"))


@click.command("trigger")
@click.argument("job")
@ledger_option
@as_option
@ledger_errors
def trigger_cmd(job: str, ledger_path: str | None, operator: str | None) -> None:
    """Queue a run of JOB now (a running runner picks it up), attributed operator:NAME.
    A paused job runs too (the schedule stays paused). Exit 2 when there is no such job or
    it was removed (its spec file is gone; `watchkeeper jobs` lists it as removed).

    \b
    Example:
      watchkeeper trigger disk-report
    """
    from core import actions

    settings = open_settings(None, None, ledger=ledger_path, operator=operator)
    with open_ledger(ledger_path) as ledger:
        result = actions.trigger_job(ledger, job, settings.operator)
    if result.missing:
        fail(shown(result.message), EXIT_NOT_FOUND)
    click.echo(shown(result.message))


@click.command("abandon")
@click.argument("run_id", type=ID)
@as_option
@ledger_option
@yes_option
@ledger_errors
def abandon_cmd(run_id: int, operator: str | None, ledger_path: str | None, yes: bool) -> None:
    """Abandon run RUN_ID: mark it abandoned and kill its live process group (SIGTERM, then
    SIGKILL); output, handoff and artifacts are kept. Asks first unless --yes.

    Exit 0 when abandoned, 1 when refused (the run already ended: says how, by whom and
    when; or the question was answered no), 2 when there is no such run.

    \b
    Example:
      watchkeeper abandon 42 --as ana --yes
    """
    from core import actions

    settings = open_settings(None, None, ledger=ledger_path, operator=operator)
    with open_ledger(ledger_path) as ledger:
        run = SqlStore(ledger).run(run_id)
        if run is None:
            fail(f"no run {run_id}", EXIT_NOT_FOUND)
        if run.state not in TERMINAL and not yes:
            where = f", pid {run.pid}" if run.pid else ""
            question = (f"Abandon {_safe(_one_line(run.job, 60))} run {run_id} ({run.state}{where})?"
                        " Its live process group is killed; every artifact is kept.")
            confirm_or_exit(question, "not abandoned")
        result = actions.abandon(ledger, run_id, settings.operator)
    click.echo(_safe(result.message), err=not result.ok)
    if not result.ok:
        raise SystemExit(EXIT_FINDINGS)


@click.command("retry")
@click.argument("run_id", type=ID)
@as_option
@ledger_option
@yes_option
@ledger_errors
def retry_cmd(run_id: int, operator: str | None, ledger_path: str | None, yes: bool) -> None:
    """Retry run RUN_ID: queue a new attempt of its lineage (a running runner picks it up).
    Asks first unless --yes; the same action, checks and messages as `r` in the console.

    Refused when the lineage's latest attempt has not ended yet (already queued or running,
    e.g. someone else's retry: says which run, by whom and when). Exit 0 when queued, 1 when
    refused or the question was answered no, 2 when there is no such run.

    \b
    Example:
      watchkeeper retry 42 --as ana --yes
      backup: queued attempt 3 (run 57)
    """
    from core import actions

    settings = open_settings(None, None, ledger=ledger_path, operator=operator)
    with open_ledger(ledger_path) as ledger:
        run = SqlStore(ledger).run(run_id)
        if run is None:
            fail(f"no run {run_id}", EXIT_NOT_FOUND)
        if not yes:
            question = f"Retry {_safe(_one_line(run.job, 60))} (run {run_id})? Queues a new attempt of this run's lineage."
            confirm_or_exit(question, "not retried")
        result = actions.retry(ledger, run_id, settings.operator)
    if result.missing:
        fail(_safe(result.message), EXIT_NOT_FOUND)
    click.echo(_safe(result.message), err=not result.ok)
    if not result.ok:
        raise SystemExit(EXIT_FINDINGS)


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (run_cmd, runs_cmd, show_cmd, trigger_cmd, abandon_cmd, retry_cmd)
