"""Watchkeeper engine: specs, ledger, lifecycle, runner, sweep, verify, supervisor, notify.

Nothing in this package imports Textual or the console (an import-linter contract in
pyproject.toml enforces it).
"""

__version__ = "0.1.0"
