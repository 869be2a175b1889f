"""``watchkeeper mcp``: serve the mission tools (spawn_worker, ask_person, report,
close_mission, status) over MCP on stdio, so an external agent coordinates a mission while
Watchkeeper runs, verifies and records its workers. Stdout is the protocol channel: every
message for a person goes to stderr.
"""

from __future__ import annotations

import click

from console.cli.common import (
    EXIT_NOT_FOUND,
    fail,
    ledger_errors,
    ledger_option,
    open_ledger_at,
    open_settings,
    shown_lines,
)
from core.ledger.sql_store import as_store
from core.mission import actions as mactions


@click.command("mcp")
@click.option("--mission", "mission_id", type=click.IntRange(1), default=None,
              help="Coordinate this mission (started with --coordinator external).")
@click.option("--goal", default=None, help="Start a new mission with this goal, coordinated over MCP.")
@click.option("--worker", "workers", multiple=True, help="Worker job the new mission may spawn (repeatable).")
@click.option("--spec", "spec_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Mission definition for the new mission (workers, budget, owner).")
@click.option("--owner", default=None, help="Who the new mission's questions and report go to.")
@ledger_option
@ledger_errors
def mcp_cmd(mission_id: int | None, goal: str | None, workers: tuple[str, ...], spec_file: str | None,
            owner: str | None, ledger_path: str | None) -> None:
    """Serve the mission tools over MCP (stdio) for an external coordinator.

    \b
    Example (Claude Code):
      claude mcp add watchkeeper -- watchkeeper mcp --goal "Explain tides" \\
          --worker mission-researcher --worker mission-writer --ledger demo/watchkeeper.db
    """
    from core.mission.mcp_server import build_server  # the mcp package loads only here

    settings = open_settings(ledger=ledger_path)
    with open_ledger_at(settings.ledger, must_exist=mission_id is not None) as ledger:
        if mission_id is None:
            try:
                definition = mactions.find_definition(None, path=spec_file) if spec_file else None
                mission_id = mactions.start(ledger, goal, definition=definition, workers=list(workers) or None,
                                            owner=owner, coordinator="external", who=settings.operator)
            except mactions.MissionDefinitionError as exc:
                fail(shown_lines(str(exc)), EXIT_NOT_FOUND)
        if as_store(ledger).mission(mission_id) is None:
            fail(f"no mission {mission_id}", EXIT_NOT_FOUND)
    click.echo(f"watchkeeper mcp: coordinating mission {mission_id} over stdio", err=True)
    build_server(settings.ledger, mission_id, settings).run("stdio")


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (mcp_cmd,)
