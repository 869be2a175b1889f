"""The orphan sweep and the watch on the runner: declaring dead the runs nothing runs any
more (``sweep``), the runner gap seen from outside (``watch``), and ``watchkeeper doctor``'s
checks and repairs (``doctor``).

A process cannot report its own death, so these run outside the worker: in the runner's
periodic pass, in ``watchkeeper sweep`` from cron or a timer, and in a console. They must not
kill or orphan a run whose owner is alive (same host: its process; other hosts: its lease),
never delete work, and must not import the runner, missions or the console.
"""
