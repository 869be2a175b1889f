"""Each CLI call imports only the area module of its command (``console.cli.main.AREAS``): a
cron wrapper's ``watchkeeper exec`` or a ``trigger`` does not pay for importing the console,
the mission engine, the Claude client or the notifiers it never uses."""

from __future__ import annotations

import json
import subprocess
import sys

#: Packages that no command below needs while it starts.
HEAVY = ("textual", "anthropic", "apprise", "psycopg", "mcp", "prometheus_client", "console.app",
         "core.mission.engine")

PROBE = """
import json, sys
import click
from console.cli.main import cli
cli.get_command(click.Context(cli), sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


def loaded_for(command: str) -> list[str]:
    """Module names imported by ``watchkeeper`` to find ``command``, in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", PROBE, command], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    return json.loads(out)


def test_exec_and_trigger_import_their_area_and_nothing_heavy():
    for command, area, other in (("exec", "console.cli.exec_cmd", "console.cli.mission"),
                                 ("trigger", "console.cli.runs", "console.cli.escalations")):
        modules = loaded_for(command)
        assert area in modules and other not in modules, command
        heavy = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
        assert heavy == [], f"{command} imports {heavy[:5]}"
