"""``watchkeeper check DIR``: validate a folder of job specs (and its watchkeeper.toml)."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from console.cli.common import EXIT_NOT_FOUND, describe_ledger_error, fail, ledger_name, shown
from core.ledger.connection import Ledger, LedgerError, StorageError
from core.ledger.dialect import is_url
from core.ledger.page_records import SpecErrorEvent
from core.ledger.sql_store import SqlStore
from core.spec.loader import LoadedJob, load_dir
from core.spec.mission import check_missions
from core.spec.preflight import preflight
from core.spec.schedule import next_fire, once_slot
from core.spec.settings import SettingsError, load_settings


def _next_run(job: LoadedJob, now: float) -> float | None:
    spec = job.spec
    if spec.once:
        slot = once_slot(spec, now)
        return slot[1] if slot else None
    return next_fire(spec, now)


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _runtime_errors(ledger_place: str, limit: int) -> tuple[list[SpecErrorEvent], str | None]:
    ledger_path = ledger_name(ledger_place)
    if not is_url(ledger_place) and not Path(ledger_place).exists():
        return [], f"{ledger_path}: no ledger yet"
    try:
        with Ledger(ledger_place, read_only=True) as ledger:
            return SqlStore(ledger).spec_errors(limit=limit), None
    except (LedgerError, StorageError, OSError) as exc:  # a damaged ledger must not hide the folder's result
        return [], f"{ledger_path}: {describe_ledger_error(exc, read_only=True)}"
    except Exception as exc:  # noqa: BLE001 - whatever it is, the folder's result still counts
        return [], f"{ledger_path}: cannot read ledger: {exc}"


@click.command("check")
@click.argument("spec_dir", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON document: ok, errors, jobs, recorded errors.")
@click.option("--ledger", "ledger_path", type=click.Path(dir_okay=False), default=None,
              help="Also show spec errors a running runner recorded on hot reload.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10000),
              help="How many recorded errors to show.")
def check_cmd(spec_dir: Path, as_json: bool, ledger_path: str | None, limit: int) -> None:
    """Validate the job specs in DIR (and DIR/watchkeeper.toml).

    Every error is printed on its own line as
    FILE:LINE: job 'NAME': field 'FIELD': MESSAGE. A valid job is also checked against
    this machine: its cwd must be a folder and every program it starts (command,
    fallback, synthesize, tasks, verify) must be found and executable (JSON: these
    errors have "check": "preflight"). With errors, the last line counts the valid jobs
    (loaded and startable: JSON "valid_jobs"; "would_start" is false when the settings
    are invalid or no job is valid). Without errors, the valid jobs are
    listed with their schedule and next run. Exit status: 0 all valid, 1 errors found,
    2 DIR does not exist. Errors recorded in the ledger (--ledger) are shown but do
    not change the exit status: they may already be fixed.

    \b
    Example:
      watchkeeper check sample_jobs
      watchkeeper check sample_jobs --json | jq '.errors[].text'
      watchkeeper check sample_jobs --ledger watchkeeper.db
    """
    if not spec_dir.exists():
        fail(f"{spec_dir}: no such folder", EXIT_NOT_FOUND)
    if not spec_dir.is_dir():
        fail(f"{spec_dir}: not a folder (give the folder that holds the job specs)", EXIT_NOT_FOUND)
    result = load_dir(spec_dir)
    errors = [e.to_dict() for e in result.errors]
    # Valid specs that could not start here (missing cwd or program), before anything runs.
    for _name, job in sorted(result.jobs.items()):
        errors.extend({**e.to_dict(), "check": "preflight"} for e in preflight(job))
    # Mission definitions (DIR/missions/*.toml) and the worker jobs they name.
    errors.extend({**e.to_dict(), "check": "mission"} for e in check_missions(spec_dir, set(result.jobs)))
    settings_ok = True
    retention_line: str | None = None
    try:  # the folder's watchkeeper.toml and the WATCHKEEPER_* variables, as `run` will see them
        retention_line = load_settings(spec_dir).retention.summary()
    except SettingsError as exc:
        settings_ok = False  # `run` refuses to start (exit 3): no job would run at all
        problems = exc.problems or [{"file": str(spec_dir), "line": None, "field": None, "message": str(exc)}]
        for p in problems:
            where = p["file"] + (f":{p['line']}" if p["line"] else "")
            text = f"{where}: field '{p['field']}': {p['message']}" if p["field"] else f"{where}: {p['message']}"
            # values from the file or a variable: shown, never obeyed
            errors.append({"file": shown(p["file"]), "line": p["line"], "job": None, "field": p["field"],
                           "message": shown(p["message"]), "text": shown(text), "check": "settings"})
    now = time.time()
    jobs = [{"name": name, "kind": j.spec.kind, "schedule": j.spec.schedule_text(),
             "next_run": _next_run(j, now), "source": j.source, "line": j.line, "owner": j.spec.owner}
            for name, j in sorted(result.jobs.items())]
    recorded: list[SpecErrorEvent] = []
    ledger_note = None
    if ledger_path is not None:
        recorded, ledger_note = _runtime_errors(ledger_path, limit)
    # Valid jobs: those that loaded and passed the preflight; the others would fail to start.
    unstartable = {err["job"] for err in errors if err.get("check") == "preflight"}
    valid = len([j for j in jobs if j["name"] not in unstartable])
    if as_json:
        click.echo(json.dumps({"ok": not errors, "folder": str(spec_dir), "would_start": settings_ok and valid > 0,
                               "valid_jobs": valid,
                               "errors": errors, "jobs": jobs, "retention": retention_line,
                               "recorded_errors": [e.to_json() for e in recorded], "ledger_note": ledger_note}, indent=2))
    else:
        for err in errors:
            click.echo(shown(err["text"]))
        if errors and not settings_ok:
            click.echo(f"{len(errors)} error(s) in {spec_dir}; `watchkeeper run` would not start (invalid"
                       " settings, exit 3): no job would run until they are fixed.", err=True)
        elif errors and not valid:
            click.echo(f"{len(errors)} error(s) in {spec_dir}; no valid job: nothing would run until they are"
                       " fixed.", err=True)
        elif errors:
            more = len(jobs) - valid
            click.echo(f"{len(errors)} error(s) in {spec_dir}; {valid} valid job(s) would still run"
                       + (f"; {more} more would fail to start (preflight errors above)." if more else "."), err=True)
        else:
            _print_table(jobs)
            if retention_line is not None:
                click.echo(retention_line)
        if ledger_path is not None:
            _print_recorded(recorded, ledger_note)
    sys.exit(1 if errors else 0)


def _print_table(jobs: list[dict[str, Any]]) -> None:
    if not jobs:
        click.echo("no jobs found")
        return
    rows = [("JOB", "SCHEDULE", "NEXT RUN")] + [(shown(j["name"]), shown(j["schedule"]), _when(j["next_run"]))
                                               for j in jobs]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    for r in rows:
        click.echo(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}")
    click.echo(f"{len(jobs)} job(s) ok")


def _print_recorded(recorded: list[SpecErrorEvent], note: str | None) -> None:
    click.echo("")
    if note:
        click.echo(note)
        return
    if not recorded:
        click.echo("no spec errors recorded in the ledger")
        return
    click.echo("spec errors recorded by the runner (newest first):")
    for err in recorded:
        click.echo(f"  {_when(err.at)}  {shown(err.text)}")


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (check_cmd,)
