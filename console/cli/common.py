"""Helpers shared by the CLI areas: exit codes, one-line errors, the one place that opens the
settings (``open_settings``) and the ledger (``open_ledger``, ``open_ledger_at``) with a clear
message instead of a traceback, the options every area repeats, and bounded parameter types.

Error style everywhere: ``error: …`` on stderr, then exit with

- 0 ok, 1 findings / a lost race, 2 not found or unusable (or a usage error, as click
  does), 3 bad settings.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from core.ledger.connection import (
    SCHEMA_VERSION,
    Ledger,
    LedgerError,
    SchemaTooNew,
    StorageDamaged,
    StorageError,
    StorageUnavailable,
    describe_error,
)
from core.ledger.dialect import is_url, mask_url
from core.spec.model import DURATION_LIMIT_MESSAGE, parse_duration
from core.spec.settings import Settings, SettingsError, load_settings
from core.text import invisible, quoted, safe_text

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_NOT_FOUND = 2
EXIT_CONFIG = 3
#: Bad arguments (click's own usage errors exit 2 as well).
EXIT_USAGE = 2
#: Largest id SQLite can store (an INTEGER PRIMARY KEY is a signed 64-bit integer).
MAX_ID = 2**63 - 1

F = TypeVar("F", bound=Callable[..., Any])

#: The ledger the current command opened (a path, or a masked URL), for messages about errors
#: that surface later.
_current_ledger: Path | str | None = None


def ledger_name(place: str | Path) -> str:
    """How a ledger is named to people: the path, or the URL with any password masked."""
    return mask_url(str(place)) if is_url(place) else str(place)


def shown(value: Any, width: int | None = None) -> str:
    """The CLI's one escaper for untrusted text on one line (job output, worker-supplied
    reasons, handoff fields, names, owners, spec values): whitespace runs become one space;
    control characters (ESC of CSI/OSC sequences, BEL, C1), bidi and other format characters
    and invisible fillers are shown escaped (``\\x1b``, ``\\u202e``) through
    ``core.spec.model.safe_text`` — never obeyed by the terminal, never hidden. Cut to
    ``width`` characters with an ellipsis. None → ""."""
    if value is None:
        return ""
    text = safe_text(" ".join(str(value).split()), also=invisible)
    if width is not None and len(text) > width:
        text = text[: max(0, width - 1)] + "…"
    return text


def shown_lines(value: Any) -> str:
    """``shown`` for multi-line text (output heads and tails): newlines and tabs stay."""
    return "" if value is None else safe_text(value, keep="\n\t", also=invisible)


def fail(message: str, code: int = EXIT_NOT_FOUND) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    raise SystemExit(code)


#: A short, human explanation of why a ledger cannot be used (``core.ledger.connection``).
describe_ledger_error = describe_error


def open_settings(spec_dir: str | Path | None = None, config: str | Path | None = None,
                  **overrides: Any) -> Settings:
    """The settings every command works with (``core.spec.settings.load_settings``):
    ``SPEC_DIR/watchkeeper.toml`` or ``config``, then ``WATCHKEEPER_*`` variables, then
    ``overrides`` given on the command line (a None override is ignored, e.g. ``ledger=None``
    without --ledger). Bad settings exit 3 (``EXIT_CONFIG``) with one line naming the file,
    line and field."""
    try:
        return load_settings(spec_dir, config, **overrides)
    except SettingsError as exc:
        fail(str(exc), EXIT_CONFIG)


def open_ledger(ledger_path: str | None, *, must_exist: bool = True, read_only: bool = False) -> Ledger:
    """Open the ledger named by --ledger, else $WATCHKEEPER_LEDGER, else the default (see
    ``open_settings``), or exit 2 with one clear line (missing, not a ledger, newer schema,
    unreadable); exit 3 on bad settings."""
    settings = open_settings(ledger=ledger_path)
    return open_ledger_at(settings.ledger, read_only=read_only, must_exist=must_exist)


def open_ledger_at(path: str | Path, *, read_only: bool = False, must_exist: bool = True) -> Ledger:
    """Open the ledger at ``path`` or exit 2 with one clear line.

    Read-only opens (``read_only=True``) never create, migrate or write; a database without
    Watchkeeper's schema is refused rather than shown as empty.
    """
    global _current_ledger
    if is_url(path):
        return _open_url(str(path), read_only=read_only)
    p = Path(path)
    _current_ledger = p
    if must_exist and not p.exists():
        fail(f"no ledger at {p} (start a runner, or pass --ledger)")
    if (must_exist or p.exists()) and not p.is_file():  # a folder where the ledger goes, however it was named
        fail(f"{p}: not a Watchkeeper ledger (not a regular file)")
    return _open(p, str(p), read_only=read_only, no_schema="not a Watchkeeper ledger (no Watchkeeper schema)")


def _open_url(url: str, *, read_only: bool) -> Ledger:
    """``open_ledger_at`` for a PostgreSQL ledger: one line naming the masked URL on failure."""
    global _current_ledger
    name = _current_ledger = mask_url(url)
    return _open(url, name, read_only=read_only, no_schema="no Watchkeeper schema yet (run `watchkeeper ledger init URL`)")


def _open(target: Path | str, name: str, *, read_only: bool, no_schema: str) -> Ledger:
    """Open ``target`` (a SQLite path or a PostgreSQL URL); any failure is one line naming
    ``name`` (the path, or the URL with its password masked). A reader also needs the current
    schema: ``no_schema`` says what to do when there is none."""
    try:
        ledger = Ledger(target, read_only=read_only)
    except (StorageError, LedgerError, OSError) as exc:
        fail(f"{name}: {describe_ledger_error(exc, read_only=read_only)}")
    if read_only:
        try:
            version = ledger.schema_version
        except (StorageError, OSError) as exc:
            ledger.close()
            fail(f"{name}: {describe_ledger_error(exc, read_only=True)}")
        if version < SCHEMA_VERSION:
            ledger.close()
            if version == 0:
                fail(f"{name}: {no_schema}")
            fail(f"{name}: written by an older Watchkeeper (schema {version} < {SCHEMA_VERSION}); "
                 "start `watchkeeper run` on it once to migrate")
    return ledger


def _probe_write(folder: Path) -> None:
    """Create ``folder`` if needed and write, flush to disk and remove a small file in it:
    a full disk or a read-only mount shows only on a write. Raises OSError."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    probe = folder / f".watchkeeper-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        try:
            if os.write(fd, b"x" * 4096) != 4096:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


def prepare_places(ledger: str | Path, artifacts: str | Path | None) -> None:
    """Make sure the places a runner writes to are usable before anything starts, or exit 2
    with one line naming the path and the cause (read-only file system, permission denied,
    no space left on the device, a file where a folder should be): the ledger's folder (a
    probe write), the ledger itself (created and migrated), then the artifacts folder. A full
    artifacts disk is one warning line, not an exit: the ledger still records every run."""
    if is_url(ledger):
        open_ledger_at(ledger, must_exist=False).close()  # only the artifacts folder is local
    else:
        ledger = Path(ledger)
        try:
            _probe_write(ledger.parent)
        except OSError as exc:
            fail(f"{ledger.parent}: ledger folder unusable ({exc.strerror or exc})")
        open_ledger_at(ledger, must_exist=False).close()
    if artifacts is None:
        return
    try:
        _probe_write(Path(artifacts))
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            # Every run is still recorded in the ledger; only its output capture degrades (and
            # says so per run), so a runner restarted on a full artifacts disk keeps watching.
            click.echo(f"warning: {artifacts}: artifacts folder full ({exc.strerror or exc}); runs are still"
                       " recorded in the ledger, their output capture degrades", err=True)
            return
        fail(f"{artifacts}: artifacts folder unusable ({exc.strerror or exc})")


def open_ledger_prefer_write(path: str | Path) -> Ledger:
    """Writable when possible (so side duties like the runner-gap check can record), else
    read-only when the ledger is on read-only media; exits 2 with one line otherwise."""
    if is_url(path):
        return open_ledger_at(path)
    p = Path(path)
    if not p.exists():
        fail(f"no ledger at {p} (start a runner, or pass --ledger)")
    try:
        return Ledger(p)
    except SchemaTooNew as exc:
        fail(f"{p}: {describe_ledger_error(exc)}")
    except (StorageUnavailable, PermissionError):
        return open_ledger_at(p, read_only=True)
    except (StorageError, LedgerError, OSError) as exc:
        fail(f"{p}: {describe_ledger_error(exc)}")


def ledger_errors(fn: F) -> F:
    """Decorate a command so a ledger error raised while it works becomes one line, exit 2."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (StorageDamaged, LedgerError) as exc:
            where = f"{_current_ledger}: " if _current_ledger is not None else ""
            fail(f"{where}{describe_ledger_error(exc)}")
    return wrapper  # type: ignore[return-value]


class DurationType(click.ParamType):
    """A duration such as ``30m``, ``2h``, ``7d`` or seconds; finite, at most 10 years."""

    name = "duration"

    def __init__(self, *, positive: bool = False, unit_required: bool = False) -> None:
        self.positive = positive
        self.unit_required = unit_required

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        if self.unit_required and isinstance(value, str) and re.fullmatch(r"\s*\d+(\.\d+)?\s*", value):
            # A bare 30 would be 30 seconds: almost never what a snooze meant.
            self.fail(f"{quoted(value)}: give a unit, e.g. {value.strip()}m, {value.strip()}h, 1d or 1w", param, ctx)
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            text = str(exc)
            if DURATION_LIMIT_MESSAGE in text:
                text = f"{quoted(value)}: {DURATION_LIMIT_MESSAGE}"
            self.fail(text, param, ctx)
        if seconds < 0 or (self.positive and seconds == 0):
            self.fail(f"{quoted(value)}: must be {'more than' if self.positive else 'at least'} 0 seconds", param, ctx)
        return seconds


DURATION = DurationType()
POSITIVE_DURATION = DurationType(positive=True)
#: A duration an operator types for a while (``snooze --for``): a unit is required.
WHILE = DurationType(positive=True, unit_required=True)


class IdType(click.IntRange):
    """A run or escalation id: a whole number from 1 to ``MAX_ID``; anything else is a usage
    error (exit 2) saying what was wanted (``'abc' is not a run id (the ID `watchkeeper runs`
    lists)``) rather than click's "not a valid integer range"."""

    def __init__(self, noun: str, lister: str) -> None:
        super().__init__(1, MAX_ID)
        self.noun, self.lister = noun, lister
        self.name = noun.split(" ", 1)[1]

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.startswith("#"):
            value = value[1:]  # listings show "#17"
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(f"{quoted(value)} is not {self.noun} (the ID `watchkeeper {self.lister}` lists:"
                      " a whole number from 1)", param, ctx)


#: A run's id (``show``, ``logs``, ``abandon``, ``retry``).
ID = IdType("a run id", "runs")
#: An escalation's id (``ack``, ``snooze``, ``resolve``).
ESCALATION_ID = IdType("an escalation id", "escalations")


# The options every area repeats, written once so their names, types and help read the same
# in every command.
def ledger_option(f: Any) -> Any:
    """``--ledger PATH|URL`` → ``ledger_path`` (str or None: $WATCHKEEPER_LEDGER, then
    ./watchkeeper.db); a ``postgresql://`` URL names a PostgreSQL ledger."""
    return click.option("--ledger", "ledger_path", type=click.Path(dir_okay=False), default=None,
                        help="Ledger file or postgresql:// URL [default: $WATCHKEEPER_LEDGER or ./watchkeeper.db].")(f)


def config_option(f: Any) -> Any:
    """``--config FILE`` → ``config_path`` (str or None: watchkeeper.toml in the spec folder)."""
    return click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True), default=None,
                        help="Settings file [default: watchkeeper.toml in the spec folder].")(f)


def as_option(f: Any) -> Any:
    """``--as NAME`` → ``operator`` (str or None: the settings' operator, $USER by default)."""
    return click.option("--as", "operator", default=None,
                        help="Name recorded in the audit trail [default: $USER].")(f)


def yes_option(f: Any) -> Any:
    """``--yes``/``-y`` → ``yes`` (bool): do not ask before a destructive action."""
    return click.option("--yes", "-y", "yes", is_flag=True, help="Do not ask first.")(f)


def confirm_or_exit(question: str, declined: str) -> None:
    """Ask ``question`` (already escaped; default no) before a destructive action; a no
    prints ``declined`` (e.g. "not abandoned") on stderr and exits 1 (``EXIT_FINDINGS``)."""
    if not click.confirm(question, default=False):
        click.echo(declined, err=True)
        raise SystemExit(EXIT_FINDINGS)
