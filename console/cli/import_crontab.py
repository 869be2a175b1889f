"""``watchkeeper import-crontab``: adopt an existing crontab, as job specs or rewritten to run
each line under ``watchkeeper exec``."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import click

from console.cli.common import EXIT_FINDINGS, EXIT_USAGE, fail
from core.ledger.dialect import is_url, mask_url
from core.spec import crontab
from core.text import safe_text


def _check_folder(folder: Path, refuse: Callable[[str], NoReturn]) -> None:
    """Refuse unless ``folder`` is (or can be made) a folder that takes files: made when
    missing, and one hidden probe file written and removed."""
    if folder.exists() and not folder.is_dir():
        refuse(f"--write {safe_text(str(folder))}: not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        refuse(f"--write {safe_text(str(folder))}: cannot create it ({safe_text(exc.strerror or str(exc))})")
    probe = folder / ".watchkeeper-import-probe"
    try:
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        with contextlib.suppress(OSError):
            probe.unlink()
        refuse(f"--write {safe_text(str(folder))}: cannot write there ({safe_text(exc.strerror or str(exc))})")


def _write_all(folder: Path, files: list[tuple[Path, str]], refuse: Callable[[str], NoReturn]) -> None:
    """Write every spec, or none: each goes to a hidden temporary file in ``folder`` first, and
    only when all are written are they renamed into place (a full disk or a read-only folder
    half-way leaves nothing behind, and no file it was told to ``--force`` over is lost)."""
    temps: list[tuple[Path, Path]] = []
    try:
        for path, body in files:
            tmp = folder / f".{path.name}.import-tmp"
            temps.append((tmp, path))
            tmp.write_text(body, encoding="utf-8")
    except OSError as exc:
        for tmp, _ in temps:
            with contextlib.suppress(OSError):  # never made (a read-only folder), or gone already
                tmp.unlink()
        refuse(f"--write {safe_text(str(folder))}: cannot write {safe_text(temps[-1][1].name)}"
               f" ({safe_text(exc.strerror or str(exc))}); no spec was written")
    for tmp, path in temps:
        os.replace(tmp, path)


def _watchkeeper_path() -> str:
    # cron's PATH is short: the rewritten lines name this very program by its full path.
    argv0 = Path(sys.argv[0])
    if argv0.name == "watchkeeper" and argv0.exists():
        return str(argv0.resolve())
    return shutil.which("watchkeeper") or "watchkeeper"


@click.command("import-crontab")
@click.argument("source", required=False, default="-", type=click.File("rb"))
# Paths are plain strings, checked below: click's own checks would fail before the crontab is
# read, and with --rewrite the crontab must go out unchanged whatever is wrong.
@click.option("--write", "write_dir", default=None, metavar="DIR",
              help="Write one job spec file per cron line into this folder (created if missing).")
@click.option("--rewrite", is_flag=True,
              help="Print the crontab rewritten so each line runs under `watchkeeper exec` (for `crontab -`).")
@click.option("--system/--user", "system", default=None,
              help="A system crontab (/etc/crontab, /etc/cron.d/*: a user column before the command) or a "
                   "user's [default: told by the file's path, else by its lines].")
@click.option("--ledger", "ledger_path", default=None, metavar="PATH|URL",
              help="Ledger the rewritten lines record into: a file (made absolute) or a postgresql:// URL.")
@click.option("--prefix", default="", help="Put this before every job name (e.g. 'host1-').")
@click.option("--force", is_flag=True,
              help="Overwrite spec files that exist already, and take six-field (Quartz) lines as cron reads them.")
def import_crontab_cmd(source, write_dir: str | None, rewrite: bool, system: bool | None, ledger_path: str | None,
                       prefix: str, force: bool) -> None:
    """Read a crontab (FILE, or - for stdin: `crontab -l | watchkeeper import-crontab`).

    With --write DIR, each line becomes a job spec: schedule, command (run through the
    crontab's SHELL), environment lines, MAILTO as owner, CRON_TZ as timezone, the folder
    cron runs it in (HOME, else the user's home) as cwd, the comment above as intent (not
    crontab's template comments), and in a system crontab the user column as the job's
    user. Names come from the program or script doing the work, unique within the import.
    With --rewrite, the crontab is printed with each line wrapped in
    `watchkeeper exec --job NAME` (after the user column in a system crontab), so cron keeps
    the schedule and every run is recorded; every other byte stays as it was (carriage
    returns, a missing last newline). Without either, the jobs found are listed. Lines that
    cannot be taken (@reboot, an unescaped %, a bad schedule, six time fields) are named with
    their line numbers on stderr; exit 1 then. When --rewrite cannot be done (a ledger that
    cannot record runs, a spec file in the way), the crontab is printed unchanged, so a
    `| crontab -` keeps it, and the reason goes to stderr (exit 2).

    \b
    Example:
      crontab -l | watchkeeper import-crontab --write jobs/
      crontab -l > crontab.orig
      watchkeeper import-crontab crontab.orig --write ~/jobs --rewrite --ledger /var/lib/watchkeeper/wk.db > crontab.new
      crontab crontab.new
      sudo watchkeeper import-crontab /etc/cron.d/backup --write /etc/watchkeeper/jobs
    """
    raw = source.read()

    def refuse(message: str, code: int = EXIT_USAGE) -> NoReturn:
        # With --rewrite the output usually goes straight into `crontab -`, which would install
        # an empty crontab from nothing: the crontab goes out as it came in, so it is kept.
        if rewrite:
            click.echo(raw, nl=False)
            message += " (the crontab was printed unchanged)"
        fail(message, code)

    if ledger_path is not None and not ledger_path.strip():
        refuse("--ledger is empty: give the ledger's path or postgresql:// URL, or leave the option out")
    if write_dir is not None and not write_dir.strip():
        refuse("--write is empty: give the folder the job specs go into")
    if write_dir is not None:
        # The folder first: the ledger check below creates a new ledger, and a refusal must
        # leave nothing behind.
        _check_folder(Path(write_dir).expanduser(), refuse)
    place = None
    if ledger_path:
        place = ledger_path if is_url(ledger_path) else str(Path(ledger_path).expanduser().absolute())
    if rewrite and place is not None and mask_url(place) != place:
        refuse(f"--ledger {safe_text(mask_url(place))}: the URL carries a password, which every rewritten line"
               " would show to `ps` and keep in the crontab; leave it out and let libpq find it (PGPASSFILE,"
               " ~/.pgpass, a service file)")
    if rewrite and place is not None:
        # Every rewritten line names this ledger: one that cannot record runs is refused here,
        # not found out at 3 a.m. (exec would still run the jobs, unrecorded).
        from console.cli.usable import ledger_problem

        problem = ledger_problem(place)
        if problem is not None:
            refuse(f"--ledger {safe_text(mask_url(place))}: {safe_text(problem)}; the rewritten lines would"
                   " run unrecorded")
    # Bytes in, bytes out: universal newlines would turn a Windows crontab's CRLF into LF.
    text = raw.decode("utf-8", "surrogateescape")
    src = getattr(source, "name", "-")
    from_file = src not in ("-", "<stdin>", b"<stdin>")
    name = str(Path(src).resolve()) if from_file else "stdin"
    fmt: crontab.Format | None = None if system is None else ("system" if system else "user")
    imp = crontab.parse(text, prefix=prefix, fmt=fmt, path=os.path.abspath(src) if from_file else None,
                        force=force)
    if imp.format == "system":
        click.echo(f"reading {safe_text(name)} as a system crontab (user column): {safe_text(imp.format_why)}",
                   err=True)
    for warn in imp.warnings:
        click.echo(f"warning: {safe_text(str(warn) if warn.line else warn.reason)}", err=True)
    if write_dir is not None:
        folder = Path(write_dir).expanduser()
        taken = [folder / f"{job.name}.toml" for job in imp.jobs]
        # Checked before any is written: a refusal half-way would leave half the specs behind.
        clash = next((p for p in taken if p.exists()), None) if not force else None
        if clash is not None:
            refuse(f"{safe_text(str(clash))} exists already (pass --force to overwrite, or --prefix to rename)")
        _write_all(folder, [(path, crontab.spec_toml(job, name)) for job, path in zip(imp.jobs, taken, strict=True)],
                   refuse)
        for job, path in zip(imp.jobs, taken, strict=True):
            click.echo(f"line {job.line}: wrote {path}", err=rewrite)
    if rewrite:
        if not ledger_path:
            # exec then takes $WATCHKEEPER_LEDGER or ./watchkeeper.db in the folder cron starts
            # it in: usually the user's home, a ledger no runner or console is looking at.
            click.echo("warning: no --ledger: the rewritten lines record their runs in ./watchkeeper.db of the"
                       " folder cron starts them in (usually the home folder); pass --ledger PATH", err=True)
        jobs = str(Path(write_dir).expanduser().absolute()) if write_dir else None
        text_out = crontab.rewrite(imp, watchkeeper=_watchkeeper_path(), ledger=place, jobs_dir=jobs)
        # Lines left as they were keep their bytes, even those that are not UTF-8.
        click.echo(text_out.encode("utf-8", "surrogateescape"), nl=False)
    elif write_dir is None:
        for job in imp.jobs:
            cmd = job.fields["command"] if isinstance(job.fields["command"], str) else job.fields["command"][-1]
            user = f"  as {job.fields['user']}" if job.fields.get("user") else ""
            click.echo(f"line {job.line}: {job.name}  {job.fields['schedule']}{safe_text(user)}  {safe_text(cmd)}")
    for bad in imp.refused:
        click.echo(f"skipped {safe_text(str(bad))}", err=True)
    if imp.refused:
        raise SystemExit(EXIT_FINDINGS)


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (import_crontab_cmd,)
