"""CLI: ``escalations``, ``ack``, ``snooze``, ``resolve``, ``tail``, ``report`` (``eval`` is in ``console.cli.eval``).

No SQL here: everything goes through ``core.ledger.escalations``, ``core.supervisor.supervisor`` and
``core.supervisor.rules``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

from console.cli import table
from console.cli.common import (
    DURATION,
    ESCALATION_ID,
    EXIT_FINDINGS,
    EXIT_NOT_FOUND,
    WHILE,
    as_option,
    fail,
    ledger_errors,
    ledger_option,
    open_ledger,
    open_ledger_at,
    open_ledger_prefer_write,
    open_settings,
    shown,
)
from core import actions
from core.ledger.page_records import KindCount
from core.ledger.records import Escalation, columns
from core.ledger.runs import job_known
from core.ledger.sql_store import SqlStore
from core.supervisor import supervisor
from core.text import cut, iso, quoted, short_age

EXIT_LOST = EXIT_FINDINGS
TAIL_POLL_S = 0.2
#: tail also checks for a runner gap this often, so a dead runner shows up over ssh.
TAIL_GAP_CHECK_S = 5.0
SEV_COLOURS = {"critical": "red", "warning": "yellow", "info": "cyan"}


def _colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


#: Column widths of an escalation line (characters): the most a value takes before it is cut
#: with "…", so a long owner or job never pushes the next column out of line. ``escalations``
#: narrows them to the longest value it lists; ``tail`` streams, so it keeps these. On a
#: terminal both narrow the cuttable ones further (down to ``FLOORS``) and cut REASON, so a
#: line fits the terminal's width (``console.cli.table``).
COLUMNS = {"id": 6, "severity": 8, "job": 20, "kind": 19, "count": 5, "owner": 26, "state": 12}
FLOORS = {"job": 8, "kind": 7, "owner": 5, "state": 8}
_HEADINGS = {"id": "ID", "severity": "SEVERITY", "job": "JOB", "kind": "KIND", "count": "COUNT", "owner": "OWNER",
             "state": "STATE"}
#: The time column: ISO UTC with seconds when piped; on a terminal month, day, hour and minute
#: (UTC), which leaves the reason nine more characters.
TIME_WIDTH = 20
TERMINAL_TIME_WIDTH = 11
#: A terminal narrower than this (characters) gets the short form: severity in four letters,
#: COUNT headed N, no OWNER column (``show``/the console name the owner), so JOB, KIND and
#: REASON keep readable widths at 80 columns.
NARROW = 110
_SHORT_SEVERITY = {"critical": "crit", "warning": "warn", "info": "info"}
_SHORT_HEADINGS = {**_HEADINGS, "severity": "SEV", "count": "N"}


def _narrow(room: int | None) -> bool:
    return room is not None and room < NARROW


def _shown(room: int | None) -> dict[str, int]:
    """``COLUMNS`` as drawn at ``room`` (the short form drops OWNER)."""
    return {k: (4 if k == "severity" else w) for k, w in COLUMNS.items() if k != "owner"} if _narrow(room) \
        else dict(COLUMNS)


def _cells(e: Escalation, room: int | None = None) -> dict[str, str]:
    """The column values of escalation ``e`` before cutting (untrusted ones escaped)."""
    sev = str(e.severity or "-")
    return {"id": f"#{e.id}", "severity": _SHORT_SEVERITY.get(sev, sev) if _narrow(room) else sev,
            "job": shown(e.job), "kind": shown(e.kind), "count": f"x{e.count}", "owner": shown(e.owner or "-"),
            "state": str(e.state)}


def fitted_widths(rows: list[Escalation], room: int | None = None) -> dict[str, int]:
    """The columns shown at ``room`` narrowed to the longest value (or heading) each holds in
    ``rows``, and, for a terminal ``room`` characters wide, narrowed further so REASON keeps
    room."""
    cells = [_cells(e, room) for e in rows]
    heads = _SHORT_HEADINGS if _narrow(room) else _HEADINGS
    widths = {k: min(w, max([len(heads[k])] + [len(c[k]) for c in cells])) for k, w in _shown(room).items()}
    return table.narrowed(widths, {k: f for k, f in FLOORS.items() if k in widths}, _fixed(room), room)


def terminal_widths(room: int | None) -> dict[str, int]:
    """The columns for a stream of lines (``tail``) on a terminal ``room`` characters wide."""
    shown_cols = _shown(room)
    return table.narrowed(shown_cols, {k: f for k, f in FLOORS.items() if k in shown_cols}, _fixed(room), room)


def _fixed(room: int | None) -> int:
    """The characters of a line outside the column cells: time and separators."""
    return (TIME_WIDTH if room is None else TERMINAL_TIME_WIDTH) + 2 * (len(_shown(room)) + 1)


def _fit(text: str, width: int) -> str:
    return (text if len(text) <= width else text[:width - 1] + "…").ljust(width)


def _when(e: Escalation, room: int | None, at: float | None = None) -> str:
    ts = at if at is not None else (e.updated_at or e.last_seen)
    if ts is None:
        return "-".ljust(TIME_WIDTH if room is None else TERMINAL_TIME_WIDTH)
    if room is None:
        return (iso(ts) or "-").ljust(TIME_WIDTH)
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%m-%d %H:%M")


def header_line(widths: dict[str, int] | None = None, room: int | None = None) -> str:
    """The heading row over ``escalation_line`` rows of the same ``widths`` and ``room``."""
    w = widths or _shown(room)
    time_width = TIME_WIDTH if room is None else TERMINAL_TIME_WIDTH
    heads = _SHORT_HEADINGS if _narrow(room) else _HEADINGS
    return "  ".join(["TIME (UTC)".ljust(time_width)] + [_fit(heads[k], w[k]) for k in w] + ["REASON"])


def escalation_line(e: Escalation, *, colour: bool = False, widths: dict[str, int] | None = None,
                    room: int | None = None, at: float | None = None) -> str:
    """One line: time, id, severity, job, kind, count, owner, state, reason; every column cut
    to its width (``COLUMNS``, or ``widths``) so the next one starts where its heading does.
    ``room``: the terminal's width (``table.terminal_width``): the time is shorter and the
    reason cut so the line fits it; None (piped): the full reason. The time is ``at`` (Unix
    seconds) when given — the listing's order, last seen — else the escalation's last change
    (``updated_at``: what ``tail`` follows)."""
    w = widths or _shown(room)
    cells = {k: _fit(v, w[k]) for k, v in _cells(e, room).items() if k in w}
    when = _when(e, room, at)
    used = sum(len(c) + 2 for c in cells.values()) + len(when) + 2
    # Lower-case severity words, so `tail | grep critical` works as the manual shows.
    if colour:
        cells["severity"] = click.style(cells["severity"], fg=SEV_COLOURS.get(e.severity or ""))
    # Untrusted: escapes and controls shown escaped, never obeyed.
    reason = table.last_column(e.reason, used, room)
    return "  ".join([when] + [cells[k] for k in w] + [reason]).rstrip()


def _json_row(e: Escalation) -> str:
    """Escalation ``e`` as its ``escalations`` columns plus their times in ISO UTC: one JSON line."""
    return json.dumps({**columns(e), "updated_iso": iso(e.updated_at), "first_seen_iso": iso(e.first_seen),
                       "last_seen_iso": iso(e.last_seen)}, default=str)


def _hms(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _exit_words(code: int | None, sig: int | None) -> str:
    return f"signal {sig}" if sig is not None else ("" if code is None else f"exit {code}")


def _show_one(esc_id: int, ledger_path: str | None, as_json: bool) -> None:
    """``escalations ESC_ID``: one escalation whole (``Store.escalation_detail``): its
    columns, full reason, occurrences, what people did to it and its outbox rows."""
    with open_ledger(ledger_path, read_only=True) as ledger:
        d = SqlStore(ledger).escalation_detail(esc_id)
    if d is None:
        fail(f"no escalation {esc_id} (the ID `watchkeeper escalations` lists)", EXIT_NOT_FOUND)
    e = d.escalation
    if as_json:
        click.echo(json.dumps({**json.loads(_json_row(e)), "occurrences": [columns(o) for o in d.occurrences],
                               "acts": [columns(a) for a in d.acts],
                               "notifications": [columns(n) for n in d.notifications],
                               "latest_run": columns(d.latest_run) if d.latest_run else None}, default=str, indent=2))
        return
    room = table.terminal_width()

    def say(text: str = "") -> None:
        click.echo(table.folded(text, room))  # a long reason folds at a word under itself

    say(f"escalation #{e.id}  {e.severity}  {e.state}  {shown(e.kind)}  job {shown(e.job)}")
    say(f"  owner {shown(e.owner or '-')}  raised {e.count} time(s), first {_hms(e.first_seen)},"
        f" last {_hms(e.last_seen)} (UTC)")
    if d.latest_run is not None:
        r = d.latest_run
        say(f"  latest run {r.id} (attempt {r.attempt}, {r.state}"
            f"{', ' + _exit_words(r.exit_code, r.signal) if _exit_words(r.exit_code, r.signal) else ''}):"
            f" watchkeeper show {r.id}")
    if e.acked_by:
        say(f"  acknowledged by {shown(e.acked_by)} at {_hms(e.acked_at)}")
    if e.snoozed_until:
        say(f"  snoozed by {shown(e.snoozed_by or '-')} until {_hms(e.snoozed_until)}")
    if e.resolved_by or e.resolved_at:
        say(f"  resolved by {shown(e.resolved_by or '-')} at {_hms(e.resolved_at)}")
    say("reason:")
    say(f"  {shown(e.reason or '-')}")
    if d.occurrences:
        say("occurrences (newest first):")
        for o in d.occurrences:
            # A run-less escalation (host_down, runner_gap) says what it saw instead of a run.
            ran = (f"run {o.run_id} {o.run_state or ''} {_exit_words(o.exit_code, o.signal)}".rstrip() if o.run_id
                   else shown(o.reason or "" if room is None else cut(o.reason or "", max(30, room - 32))))
            say(f"  {_hms(o.at)}  {o.kind.removeprefix('escalation_'):<8} {ran}".rstrip())
    if d.acts:
        say("acted on (newest first):")
        for a in d.acts:
            until = f" until {_hms(a.until)}" if a.until else ""
            # The audit trail's actor ("operator:ana") named as the header names the operator.
            say(f"  {_hms(a.at)}  {a.kind.removeprefix('escalation_')} by {shown(a.actor.removeprefix('operator:'))}{until}"
                f"{'  ' + shown(a.reason) if a.reason else ''}")
    if d.notifications:
        say("notifications (newest first):")
        for n in d.notifications:
            when = f"sent {_hms(n.sent_at)}" if n.sent_at else n.state
            err = f"  last error: {shown(n.last_error)}" if n.last_error else ""
            say(f"  #{n.id} {n.event} to {shown(n.sink)}: {when}, {n.attempts} attempt(s){err}")
    else:
        say("notifications: none (no sink configured, or none due for this event)")
    if e.state != "resolved":
        # What can still be done: an acknowledged one needs no second ack.
        verbs = ([] if e.state == "acknowledged" else [f"watchkeeper ack {e.id}"]) + [
            f"watchkeeper snooze {e.id} --for 2h", f"watchkeeper resolve {e.id}"]
        say("next: " + "   ".join(verbs))


@click.command("escalations")
@click.argument("esc_id", type=ESCALATION_ID, required=False)
@click.option("--state", type=click.Choice(["open", "acknowledged", "snoozed", "resolved", "active", "all"]),
              default="active", show_default=True, help="Which escalations to list.")
@click.option("--job", default=None, help="Only this job.")
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line (with ESC_ID: one document).")
@ledger_option
@ledger_errors
def escalations_cmd(esc_id: int | None, state: str, job: str | None, limit: int, as_json: bool,
                    ledger_path: str | None) -> None:
    """List escalations (active ones by default), the last seen first, each with the time it
    was last seen (UTC); with ESC_ID, show
    that one whole: its full reason, every time it was raised, who acknowledged, snoozed or
    resolved it, and its notifications.

    \b
    Example:
      watchkeeper escalations --state open --json
      watchkeeper escalations 7
    """
    if esc_id is not None:
        _show_one(esc_id, ledger_path, as_json)
        return
    ledger = open_ledger(ledger_path, read_only=True)
    with ledger:
        rows = SqlStore(ledger).escalations(None if state == "all" else state, limit, job=job)
        if job and not rows and not job_known(ledger, job):
            fail(f"no job {quoted(job)} in the ledger (see `watchkeeper jobs`)", EXIT_NOT_FOUND)
    room = None if as_json else table.terminal_width()
    widths = fitted_widths(rows, room)
    if rows and not as_json:
        click.echo(header_line(widths, room))
    cut = False
    for e in rows:
        # The time a row is listed by (last seen): a row resolved later keeps its place and its time
        line = _json_row(e) if as_json else escalation_line(e, colour=_colour(), widths=widths, room=room,
                                                            at=e.last_seen)
        cut = cut or (room is not None and line.endswith("…"))
        click.echo(line)
    if cut:
        click.echo("(reasons cut to the terminal's width: `watchkeeper escalations ID` shows one whole)", err=True)
    if not rows and not as_json:
        which = "" if state == "all" else f"{state} "
        click.echo(f"no {which}escalations" + (f" of {shown(job)}" if job else ""), err=True)

def _finish(res: Any) -> None:
    if not res.ok:  # "error: no escalation 9999", as every command says a failure
        fail(shown(res.message), EXIT_NOT_FOUND if res.missing else EXIT_LOST)
    click.echo(shown(res.message))

def _act(ledger_path: str | None, act: Callable[[Any, str], Any], operator: str | None) -> None:
    """Open the ledger, apply one operator action as ``operator`` (else the settings'
    operator) and say its result (``_finish``)."""
    settings = open_settings(ledger=ledger_path)
    with open_ledger_at(settings.ledger) as ledger:
        _finish(act(ledger, operator or settings.operator))


@click.command("ack")
@click.argument("esc_id", type=ESCALATION_ID)
@as_option
@ledger_option
@ledger_errors
def ack_cmd(esc_id: int, operator: str | None, ledger_path: str | None) -> None:
    """Acknowledge escalation ESC_ID (exit 1 if someone else was first).

    \b
    Example:
      watchkeeper ack 7 --as ana
    """
    _act(ledger_path, lambda ledger, who: actions.acknowledge(ledger, esc_id, who), operator)

@click.command("snooze")
@click.argument("esc_id", type=ESCALATION_ID)
@click.option("--for", "for_", required=True, type=WHILE,
              help="How long, with a unit: 30m, 2h, 1d, 1w (at most 10 years).")
@as_option
@ledger_option
@ledger_errors
def snooze_cmd(esc_id: int, for_: float, operator: str | None, ledger_path: str | None) -> None:
    """Snooze escalation ESC_ID; it reopens afterwards unless the job recovered.

    \b
    Example:
      watchkeeper snooze 7 --for 2h
    """
    _act(ledger_path, lambda ledger, who: actions.snooze(ledger, esc_id, who, time.time() + for_), operator)

@click.command("resolve")
@click.argument("esc_id", type=ESCALATION_ID)
@as_option
@ledger_option
@ledger_errors
def resolve_cmd(esc_id: int, operator: str | None, ledger_path: str | None) -> None:
    """Resolve escalation ESC_ID by hand.

    \b
    Example:
      watchkeeper resolve 7 --as ana
    """
    _act(ledger_path, lambda ledger, who: actions.resolve(ledger, esc_id, who), operator)

@click.command("tail")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--since", default=None, type=DURATION,
              help="Also show changes from this long ago, e.g. 1h (at most 10 years).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="watchkeeper.toml: its notify sinks hear a runner gap this tail opens.")
@ledger_option
@ledger_errors
def tail_cmd(as_json: bool, since: float | None, config_path: str | None, ledger_path: str | None) -> None:
    """Follow new and changed escalations, one line each, until Ctrl-C or a closed pipe.

    A runner gap it sees is opened as the runner_gap escalation, owned by the gone
    runner's owner; with --config its sinks are notified (else the next runner or
    `sweep --config` sends what is owed).

    \b
    Example:
      ssh host watchkeeper tail | grep critical
    """
    start = time.time() - (since or 0.0)
    settings = open_settings(config=config_path, ledger=ledger_path)
    # Writable when it can be, so the runner-gap check below can record; read-only media
    # still get a tail of what exists.
    ledger = open_ledger_prefer_write(settings.ledger)
    # A closed pipe ends us quietly instead of a traceback (ssh host watchkeeper tail | head).
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    colour = _colour() and not as_json
    cursor = (start, 0)
    next_gap = 0.0
    room = None if as_json else table.terminal_width()
    widths = terminal_widths(room)
    if not as_json and sys.stdout.isatty():  # a heading for a person; a pipe gets only escalation lines
        click.echo(header_line(widths, room))
    try:
        with ledger:
            store = SqlStore(ledger)
            while True:
                if time.monotonic() >= next_gap:
                    next_gap = time.monotonic() + TAIL_GAP_CHECK_S
                    try:
                        supervisor.check_runner_gap(ledger, sinks=settings.notify, owner=settings.runner_owner)
                    except Exception:  # read-only media etc.: tail keeps showing what exists
                        pass
                rows = store.escalations_changed_since(cursor[0], cursor[1])
                for e in rows:
                    click.echo(_json_row(e) if as_json else escalation_line(e, colour=colour, widths=widths, room=room))
                    cursor = (e.updated_at, e.id)
                sys.stdout.flush()
                if not rows:
                    time.sleep(TAIL_POLL_S)
    except (KeyboardInterrupt, BrokenPipeError):
        try:
            sys.stdout.close()
        except BrokenPipeError:
            pass

@click.command("report")
@click.option("--since", default="24h", show_default=True, type=DURATION,
              help="Window, e.g. 1h, 7d (at most 10 years).")
@click.option("--json", "as_json", is_flag=True)
@ledger_option
@ledger_errors
def report_cmd(since: float, as_json: bool, ledger_path: str | None) -> None:
    """Runs judged, share silent, escalations by kind, notifications sent and failed.

    \b
    Example:
      watchkeeper report --since 24h
    """
    start = time.time() - since
    ledger = open_ledger(ledger_path, read_only=True)
    with ledger:
        rep = supervisor.report(ledger, start)
    if as_json:
        click.echo(json.dumps(rep.to_json(), default=str))
        return
    share = "n/a" if rep.silent_share is None else f"{100 * rep.silent_share:.1f}%"
    click.echo(f"since {iso(start)} ({short_age(time.time() - start)} ago)")
    click.echo(f"runs judged     {rep.runs}")
    click.echo(f"silent          {rep.silent} ({share})")
    click.echo(f"notes           {rep.notes}")
    click.echo(f"escalated       {rep.escalated}")
    click.echo("escalations by kind:")
    kinds = rep.escalations or (KindCount(kind="(none)"),)
    # Columns sized to their content: a long kind (mission_worker_failed) keeps the counts aligned.
    kw = max(len(shown(k.kind)) for k in kinds)
    ew = max(len(str(k.escalations)) for k in kinds)
    ow = max(len(str(k.occurrences or 0)) for k in kinds)
    for k in kinds:
        click.echo(f"  {shown(k.kind):<{kw}} {k.escalations:>{ew}} escalation(s),"
                   f" {k.occurrences or 0:>{ow}} occurrence(s)")
    sent = rep.notifications
    click.echo(f"notifications   sent {sent.get('sent', 0)}, failed {sent.get('failed', 0)},"
               f" pending {sent.get('pending', 0)}"
               + (f", cancelled {sent['cancelled']}" if sent.get("cancelled") else ""))


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (escalations_cmd, ack_cmd, snooze_cmd, resolve_cmd, tail_cmd, report_cmd)
