"""``watchkeeper ledger``: create a ledger's schema (``init``) and move a SQLite ledger into
PostgreSQL with its history (``copy``)."""

from __future__ import annotations

import click

from console.cli.common import EXIT_NOT_FOUND, describe_ledger_error, fail, ledger_name, open_ledger_at
from core.ledger.connection import SCHEMA_VERSION, LedgerError, StorageError
from core.ledger.copy import copy_ledger
from core.ledger.dialect import is_url


@click.group("ledger")
def ledger_group() -> None:
    """Create a ledger, or move one to PostgreSQL.

    \b
    A PostgreSQL ledger is named by a URL without a password: libpq reads it from
    PGPASSFILE (~/.pgpass), a service file (PGSERVICE) or PGPASSWORD. A URL that carries
    one is accepted but shown masked everywhere.

    \b
    Example:
      watchkeeper ledger init postgresql://wk@db1/watchkeeper
      watchkeeper ledger copy watchkeeper.db postgresql://wk@db1/watchkeeper
    """

@ledger_group.command("init")
@click.argument("target", metavar="PATH|URL")
def init_cmd(target: str) -> None:
    """Create (or migrate) the ledger's schema at PATH or a postgresql:// URL.

    \b
    Example:
      watchkeeper ledger init postgresql://wk@db1/watchkeeper
    """
    with open_ledger_at(target, must_exist=False) as led:
        version = led.schema_version
    click.echo(f"ledger {ledger_name(target)} ready (schema {version} of {SCHEMA_VERSION})")

@ledger_group.command("copy")
@click.argument("source", metavar="SQLITE_PATH", type=click.Path(exists=True, dir_okay=False))
@click.argument("target", metavar="URL")
def copy_cmd(source: str, target: str) -> None:
    """Copy a SQLite ledger, history included, into an empty PostgreSQL ledger.

    Every run, outcome, event, escalation and notification keeps its id, so baselines,
    the audit trail and open escalations carry over. Stop the runners on SOURCE first.

    \b
    Example:
      watchkeeper ledger copy /var/lib/watchkeeper/ledger.db postgresql://wk@db1/watchkeeper
    """
    if not is_url(target):
        fail(f"{target}: the destination must be a postgresql:// URL", EXIT_NOT_FOUND)
    with open_ledger_at(source) as src, open_ledger_at(target, must_exist=False) as dst:
        try:
            report = copy_ledger(src, dst)
        except (LedgerError, StorageError) as exc:
            fail(f"{ledger_name(target)}: {describe_ledger_error(exc)}", EXIT_NOT_FOUND)
    parts = ", ".join(f"{n} {t}" for t, n in report.rows.items() if n)
    click.echo(f"copied {report.total} row(s) from {source} to {ledger_name(target)}: {parts or 'nothing'}")


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (ledger_group,)
