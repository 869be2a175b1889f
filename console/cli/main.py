"""The ``watchkeeper`` command. Subcommands live in small modules, one per area; each defines
its click commands (and groups) at module level and lists them in ``COMMANDS``. This module
names each area's commands (``AREAS``) and imports an area only when one of its commands runs
or ``--help`` lists them: every CLI call (a cron wrapper's ``exec``, a ``trigger``) would
otherwise pay for importing all of them, the console and the mission engine included (about a
second of CPU). Settings and the ledger are opened through ``console.cli.common``."""

from __future__ import annotations

import importlib
import logging
import os
import platform
import sys
from typing import Any

import click

from core.ledger.connection import OPERATOR_LINE
from core.processes import restore_job_signals

#: Each area module (``console/cli/<area>.py``) and the names of the commands in its
#: ``COMMANDS``, so a command's module is imported only when it runs (``--help`` lists commands
#: sorted by name, so this order shows nowhere). tests/cli/test_one_cli_style.py checks that
#: the names match what each module defines.
AREAS: dict[str, tuple[str, ...]] = {
    "runs": ("run", "runs", "show", "trigger", "abandon", "retry"),
    "jobs": ("jobs", "pause", "resume"),
    "check": ("check",),
    "sweep": ("sweep", "status", "doctor"),
    "escalations": ("escalations", "ack", "snooze", "resolve", "tail", "report"),
    "console": ("console", "up"),
    "prune": ("prune",),
    "import_crontab": ("import-crontab",),
    "service": ("service",),
    "eval": ("eval",),
    "mission": ("mission",),
    "mcp": ("mcp",),
    "exec_cmd": ("exec",),
    "notify": ("notify",),
    "ledger_cmd": ("ledger",),
    "logs": ("logs",),
}
_AREA_OF = {name: area for area, names in AREAS.items() for name in names}


class _Group(click.Group):
    """The command group: it imports a command's area module when the command is first asked
    for (click's lazy-loading pattern), and a pydantic error no command turned into words still
    reaches the operator as one line naming the field (exit 2), never as pydantic's multi-line
    dump."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *_AREA_OF})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _AREA_OF:
            area = importlib.import_module(f"console.cli.{_AREA_OF[cmd_name]}")
            for command in area.COMMANDS:
                self.add_command(command)
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            # Only a command that imported pydantic can raise its error: a command that did
            # not is spared the import.
            pydantic = sys.modules.get("pydantic")
            if pydantic is None or not isinstance(exc, pydantic.ValidationError):
                raise
            from core.spec.source_map import validation_line
            from core.text import safe_text

            click.echo(f"error: {safe_text(validation_line(exc))}", err=True)
            ctx.exit(2)


def _version() -> str:
    import importlib.metadata  # only for -V: the import costs every other call tens of ms

    try:
        return importlib.metadata.version("watchkeeper")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``-V``: click's ``version_option`` made lazy, so the package metadata and the ledger
    module (for its schema version) are read only when asked."""
    if not value or ctx.resilient_parsing:
        return
    from core.ledger.connection import SCHEMA_VERSION

    click.echo(f"{ctx.find_root().info_name} {_version()} (ledger schema {SCHEMA_VERSION}, "
               f"Python {platform.python_version()})", color=ctx.color)
    ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version (and the ledger schema it writes) and exit.")
@click.option("-v", "--verbose", count=True,
              help=("Log output on stderr: errors (and the ledger lost or back, one line each) by default,"
                    " -v adds warnings, -vv info, -vvv debug."))
def cli(verbose: int) -> None:
    """Watchkeeper: know, without watching, that unattended work really happened.

    \b
    Example:
      watchkeeper check sample_jobs      # validate job specs
      watchkeeper run sample_jobs        # headless runner
      watchkeeper runs --limit 20        # what happened
    """
    # The log keeps warnings (up/console send it to a file beside the ledger), but stderr
    # shows only errors unless -v: a command's own output is its one line, not log noise
    # (a breaker warning, a notifier's complaint) that cron would mail along with it.
    level = max(logging.WARNING - 10 * max(verbose - 1, 0), logging.DEBUG)
    to_stderr = logging.StreamHandler()
    to_stderr.setLevel(logging.WARNING if verbose == 0 else level)
    if verbose == 0:  # errors, and the few warnings an operator must see (the ledger lost, back)
        to_stderr.addFilter(lambda r: r.levelno >= logging.ERROR or bool(getattr(r, OPERATOR_LINE, False)))
    logging.basicConfig(level=level, handlers=[to_stderr],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main() -> None:
    restore_job_signals()  # the jobs it starts get SIGINT and SIGQUIT as a terminal gives them
    if os.environ.get("NO_COLOR"):
        os.environ.setdefault("TERM_NO_COLOR", "1")
    cli(prog_name="watchkeeper")


if __name__ == "__main__":
    main()
