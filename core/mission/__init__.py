"""Missions: agent workers and coordinators on the runner, ledger and supervisor.

``agent`` is the agent worker process (``kind = "agent"``); ``worker`` the runner's hooks
for agent and mission runs; ``engine`` the mission engine that settles workers, wakes
the coordinator and enforces budgets; ``actions`` what people and external coordinators do;
``protocol`` the coordinator's tools; ``mcp_server`` the same tools over MCP.

A coordinator plans; it never decides delivery: every worker's run is verified and judged
like any other, and a mission closes only after a person approves its report. Nothing here
deletes work (abort keeps every output and artifact), writes SQL, or imports the runner or
the console.
"""
