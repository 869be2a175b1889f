"""The ``watchkeeper`` command: ``main`` builds the click group; each area module (``runs``,
``jobs``, ``escalations``, ``mission`` ...) defines its commands at module level and lists
them in ``COMMANDS``; ``common`` opens the settings and the ledger, names exit codes and
holds the shared options.

A command must not open settings or a ledger any other way than through ``common``, must
not print a traceback for bad input (one ``error:`` line and an exit code instead), and must
not write SQL: it calls ``core``.
"""
