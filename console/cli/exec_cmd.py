"""``watchkeeper exec``: run one command as a recorded run, without a runner (cron adoption)."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import click
from pydantic import ValidationError

from console.cli.common import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    fail,
    ledger_name,
    open_ledger_at,
    open_settings,
    shown,
)
from console.cli.usable import ledger_problem
from core.ledger.dialect import is_url, mask_url
from core.ledger.records import Job
from core.ledger.sql_store import SqlStore
from core.spec.loader import LoadedJob, load_dir, resolve_cwd
from core.spec.model import JobSpec, spec_from_json
from core.spec.settings import Settings
from core.spec.source_map import validation_line
from core.text import quoted, stripped_line


def _job(name: str, argv: tuple[str, ...], jobs_dir: str | None,
         settings: Settings) -> tuple[LoadedJob, tuple[JobSpec, str | None] | None]:
    """The job to run (its command replaced by ``argv`` when one is given) and the ``jobs``
    row to record: from the spec folder; else the ledger's job when a spec file owns it (left
    as it is); else a job with defaults, run in this folder, that ``exec`` owns."""
    if jobs_dir is not None:
        loaded = load_dir(jobs_dir)
        lj = loaded.jobs.get(name)
        if lj is None:
            # Not found or unusable (exit 2, one line); exit 3 is for bad settings only.
            errors = [stripped_line(str(e)) for e in loaded.errors if e.job == name]
            why = (f"{jobs_dir}: job {quoted(name)} is invalid: {shown(errors[0])}" if errors
                   else f"{jobs_dir}: no job named {quoted(name)}")
            if argv:  # there is a command: it runs (fails open), unrecorded
                run_unrecorded(name, argv, None, why)
            fail(why, EXIT_NOT_FOUND)
        record: tuple[JobSpec, str | None] | None = (lj.spec, str(Path(lj.source).resolve()))
        base, source, line = lj.spec, lj.source, lj.line
    else:
        stored = _stored(settings, name)
        if stored is not None and stored.source:
            record, base, source, line = None, spec_from_json(stored.spec), stored.source, stored.source_line
        else:
            if not argv:
                fail("give the command after --, e.g. watchkeeper exec --job backup -- /usr/local/bin/backup.sh",
                     EXIT_USAGE)
            try:
                base = JobSpec(name=name, command=list(argv), cwd=os.getcwd())
            except ValidationError as exc:  # a bad --job name: the command runs, unrecorded
                run_unrecorded(name, argv, None, f"--job {quoted(name)}: {shown(validation_line(exc))}")
            # Relative paths in the command resolve against the folder exec was started in.
            record, source, line = (base, None), str(Path(os.getcwd()) / "(exec)"), None
    spec = base.model_copy(update={"command": list(argv)}) if argv else base
    if spec.command is None:
        fail(f"job {quoted(name)} has no command; give one after --", EXIT_USAGE)
    return LoadedJob(spec, source, line), record


def run_unrecorded(name: str, argv: tuple[str, ...], jobs_dir: str | None, why: str) -> NoReturn:
    """Run the command without recording it (its own process replaces this one, so its exit
    status, signals and output are exactly its own), after one ``warning:`` line saying why.
    The command is ``argv``, else the job's from ``--jobs``; exit 2 when there is none."""
    click.echo(f"warning: watchkeeper exec: {why}; running {shown(name)} unrecorded", err=True)
    cmd, cwd, env = list(argv), None, None
    if not cmd and jobs_dir is not None:
        lj = load_dir(jobs_dir).jobs.get(name)
        if lj is not None:
            cmd, cwd, env = lj.spec.argv(), resolve_cwd(lj), {**os.environ, **lj.spec.env}
    if not cmd:
        fail(f"job {quoted(name)}: no command to run without the ledger; give one after --", EXIT_USAGE)
    try:
        if cwd is not None:
            os.chdir(cwd)
        os.execvpe(cmd[0], cmd, env if env is not None else os.environ)
    except OSError as exc:
        click.echo(f"watchkeeper exec: {shown(cmd[0])}: {shown(exc.strerror or str(exc))}", err=True)
        raise SystemExit(127 if isinstance(exc, FileNotFoundError) else 126) from None


def pass_output_on(folder: str | None) -> None:
    """Copy the run's kept output (``stdout.log``, ``stderr.log`` in its artifacts ``folder``,
    each at most the output cap) to this process's stdout and stderr, bytes as the command
    wrote them: it is what cron would have mailed without the wrapper. A missing file is
    skipped (nothing was written, or the folder is gone); never raises for one."""
    if not folder:
        return
    for name, stream in (("stdout.log", sys.stdout), ("stderr.log", sys.stderr)):
        try:
            with open(Path(folder) / name, "rb") as fh:
                stream.flush()
                shutil.copyfileobj(fh, stream.buffer)
                stream.buffer.flush()
        except OSError:
            continue


def _stored(settings: Settings, name: str) -> Job | None:
    """The ledger's job ``name`` (``jobs``), None when unknown or there is no ledger yet."""
    if not is_url(settings.ledger) and not Path(settings.ledger).exists():
        return None
    led = open_ledger_at(settings.ledger)
    try:
        return SqlStore(led).job(name)
    finally:
        led.close()


# Its options are plain text, checked by exec itself: click's own checks (a path that must
# exist, a required option) end with a usage error before the command runs, and one wrong
# word in a crontab line must never stop the real job.
@click.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--job", "job_name", metavar="TEXT", default=None,
              help="Job name the run is recorded under (created on first use).  [required]")
@click.option("--ledger", "ledger_path", metavar="PATH", default=None,
              help="Ledger file or postgresql:// URL [default: $WATCHKEEPER_LEDGER or ./watchkeeper.db].")
@click.option("--config", "config_path", metavar="FILE", default=None,
              help="Settings file [default: watchkeeper.toml in the spec folder].")
@click.option("--jobs", "jobs_dir", metavar="DIRECTORY", default=None,
              help="Take the job's spec (timeout, retries, expect, verify, owner, intent) from this folder.")
@click.option("--output", "output", type=click.Choice(["failure", "always", "never"]), default="failure",
              show_default=True,
              help="When to pass the command's kept output on (stdout to stdout, stderr to stderr) once it"
                   " ended, so cron's MAILTO still gets it: only when the run failed, every time, or never.")
@click.option("--quiet", is_flag=True, help="Print nothing, even when the run fails (implies --output never).")
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def exec_cmd(job_name: str | None, ledger_path: str | None, config_path: str | None, jobs_dir: str | None,
             output: str, quiet: bool, argv: tuple[str, ...]) -> None:
    """Run CMD ARGS... as a recorded run of job NAME, without a runner, and exit with its status.

    The run is queued, spawned, captured, verified and judged like any runner's run: its
    output lands in the artifacts folder, a failure opens an escalation and notifies, and
    the command's exit status is passed through (128+N after signal N, 127 when it cannot
    start). The wrapper renews the run's lease while it runs, so if the wrapper is killed the
    sweep declares the run orphaned. A failed run prints the command's kept output (as the
    command wrote it, up to the output cap per stream) and then one line on stderr saying
    how it ended, so cron mails them; a run that succeeded prints nothing unless --output
    always (as chronic does: the mail comes when something needs a person).

    It fails open: when the ledger cannot be used (missing folder, unwritable, not a
    Watchkeeper ledger, locked for more than 5 s) or an option is wrong (no --job, a --jobs
    folder or --config file that is not there) the command still runs, unrecorded, after
    one `warning:` line on stderr, and its exit status is passed through. Ctrl-C (or SIGTERM)
    is passed to the command and its run recorded as abandoned, reason interrupted.

    \b
    Example (a crontab line):
      30 2 * * * watchkeeper exec --job backup --ledger /var/lib/wk/wk.db -- /usr/local/bin/backup.sh --full
    """
    from core.runner.execwrap import ExecWrapper  # the runner's executor: imported only to run

    # Fails open: whatever is wrong with the ledger or the options, the wrapped command still runs.
    if not job_name:
        run_unrecorded("the command", argv, None, "no --job NAME given (the run is recorded under it)")
    if jobs_dir is not None and not Path(jobs_dir).is_dir():
        run_unrecorded(job_name, argv, None, f"--jobs {shown(jobs_dir)}: no such folder")
    if config_path is not None and not Path(config_path).is_file():
        run_unrecorded(job_name, argv, jobs_dir, f"--config {shown(config_path)}: no such file")
    try:
        settings = open_settings(jobs_dir, config_path, ledger=ledger_path)
    except SystemExit:  # bad settings: said on stderr already
        run_unrecorded(job_name, argv, jobs_dir, "the settings cannot be loaded")
    problem = ledger_problem(settings.ledger)
    if problem is not None:
        run_unrecorded(job_name, argv, jobs_dir, f"ledger {shown(ledger_name(settings.ledger))}: {shown(problem)}")
    job, record = _job(job_name, argv, jobs_dir, settings)
    wrapper = ExecWrapper(job, settings, record=record)
    try:
        result = asyncio.run(wrapper.run())
    except Exception as exc:
        if wrapper.command_started:
            click.echo(f"warning: watchkeeper exec: recording the run of {shown(job_name)} failed"
                       f" ({shown(type(exc).__name__)}: {shown(str(exc))}); its exit status is unknown", err=True)
            raise SystemExit(1) from None
        run_unrecorded(job_name, argv, jobs_dir, f"the ledger failed ({shown(type(exc).__name__)}: {shown(str(exc))})")
    passed = not quiet and (output == "always" or (output == "failure" and result.exit_status != 0))
    if passed:
        pass_output_on(result.artifacts_dir)
    if result.exit_status != 0 and not quiet:
        why = result.reason or result.state
        # The job's last stderr line, unless its output was just passed on or the reason
        # already quotes it (a spawn failure's reason is its error, which is also what stderr
        # holds): said once, not twice.
        tail = [] if passed and result.artifacts_dir else [
            ln for ln in (result.stderr_tail or "").splitlines() if ln.strip() and ln.strip() not in why][-1:]
        click.echo(f"watchkeeper: {shown(job_name)} run {result.run_id} {result.state} ({shown(why)})"
                   + (f": {shown(tail[0])}" if tail else "")
                   + f" — {_me()} show {result.run_id} --ledger {shlex.quote(mask_url(str(settings.ledger)))}", err=True)
    raise SystemExit(result.exit_status)


def _me() -> str:
    """This ``watchkeeper`` as a command to run again from anywhere: its full path when it was
    started through one (cron's PATH is short, so a bare name in the mail may not be found),
    else ``watchkeeper``."""
    arg0 = sys.argv[0] if sys.argv else ""
    path = arg0 if os.sep in arg0 else (shutil.which(arg0) or "") if arg0 else ""
    if path and os.path.basename(path) == "watchkeeper" and os.access(path, os.X_OK):
        return shlex.quote(os.path.abspath(path))
    return "watchkeeper"


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (exec_cmd,)
