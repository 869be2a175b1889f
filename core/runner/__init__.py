"""The embedded runner: the asyncio loops that turn schedules into queued runs (``scheduler``),
claim them (``dispatcher``), run each one to its outcome under a per-run monitor (``executor``,
``spawn``, ``capture``, ``handoff``, ``fanout``), enforce deadlines (``watchdog``), heartbeat,
re-attach the runs an earlier runner left (``reattach``), reload specs (``reload``), and
``watchkeeper exec`` (``execwrap``), all composed by ``runner.Runner``.

It writes the ledger only through the store and ``core.ledger`` functions, never with SQL of
its own; it judges nothing itself (it calls the supervisor); and nothing of a run may depend
on the runner staying alive: a run outlives its runner (docs/architecture.md, "Run
lifecycle"). It must not import the console.
"""
