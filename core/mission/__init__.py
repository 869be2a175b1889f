"""Missions: agent workers and coordinators on the runner, ledger and supervisor.

``agent`` is the agent worker process (``kind = "agent"``); ``worker`` the runner's hooks
for agent and mission runs; ``engine`` the mission engine that settles workers, wakes
the coordinator and enforces budgets; ``actions`` what people and external coordinators do;
``protocol`` the coordinator's tools; ``mcp_server`` the same tools over MCP.
"""
