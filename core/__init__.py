"""Watchkeeper's engine: everything that runs, records and judges unattended work.

Subsystems are folders: ``spec`` (job specs and settings), ``ledger`` (the store),
``runner``, ``sweep``, ``supervisor`` and ``mission``; beside them the closed vocabulary
(``vocabulary``), the one escaper (``text``), operator actions (``actions``), process and
host liveness (``processes``, ``liveness``, ``runas``) and the per-run ``monitor``.

It must never import Textual or the console (an import-linter contract in pyproject.toml
enforces it); the layers contract there keeps each subsystem to the ones below it
(runner > mission > sweep > supervisor > actions > ledger > spec > vocabulary).
"""

__version__ = "0.1.0"
