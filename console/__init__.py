"""Watchkeeper's user side: the click CLI (``cli``), the Textual console (``app``, ``screens``,
``widgets``, one key registry in ``keys``, labels in ``labels``), the browser console
(``web``, textual-serve) and the Prometheus metrics (``metrics``).

No SQL and no database driver here (import-linter): every read goes through the ledger's
records and pages, every write through ``core.actions`` (``core.mission.actions`` for missions). Untrusted text (job
output, handoffs, LLM answers, names) is shown only through the one escaper
(``console.safe_text`` / ``console.cli.common.shown``, both over ``core.text.safe_text``).
"""
