"""The ``watchkeeper`` command. Subcommands live in small modules, one per area; each defines
its click commands (and groups) at module level and lists them in ``COMMANDS``, which this
module adds to the group. Settings and the ledger are opened through ``console.cli.common``."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
from typing import Any

import click
from pydantic import ValidationError

from console.cli import (
    check,
    console,
    escalations,
    eval,
    exec_cmd,
    import_crontab,
    jobs,
    ledger_cmd,
    logs,
    mcp,
    mission,
    notify,
    prune,
    runs,
    service,
    sweep,
)
from core.ledger.connection import SCHEMA_VERSION
from core.spec.source_map import validation_line
from core.text import safe_text

#: The areas, each a module with a ``COMMANDS`` tuple (``--help`` lists commands by name, so
#: this order shows nowhere).
AREAS = (runs, jobs, check, sweep, escalations, console, prune, import_crontab, service, eval, mission, mcp,
         exec_cmd, notify, ledger_cmd, logs)


class _Group(click.Group):
    """The command group; a pydantic error no command turned into words still reaches the
    operator as one line naming the field (exit 2), never as pydantic's multi-line dump."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ValidationError as exc:
            click.echo(f"error: {safe_text(validation_line(exc))}", err=True)
            ctx.exit(2)


def _version() -> str:
    try:
        return importlib.metadata.version("watchkeeper")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(_version(), "-V", "--version",
                      message=f"%(prog)s %(version)s (ledger schema {SCHEMA_VERSION}, Python {platform.python_version()})",
                      help="Show the version (and the ledger schema it writes) and exit.")
@click.option("-v", "--verbose", count=True,
              help="Log output on stderr: errors only by default, -v adds warnings, -vv info, -vvv debug.")
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
    to_stderr.setLevel(logging.ERROR if verbose == 0 else level)
    logging.basicConfig(level=level, handlers=[to_stderr],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


for _area in AREAS:
    for _command in _area.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    if os.environ.get("NO_COLOR"):
        os.environ.setdefault("TERM_NO_COLOR", "1")
    cli(prog_name="watchkeeper")


if __name__ == "__main__":
    main()
