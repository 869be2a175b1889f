"""What screens and widgets need from the app, without importing the app.

``console.app`` composes the screens; the screens reach the app only through the
``ConsoleApp`` protocol and ``ConsoleConfig`` here, so the import graph stays a tree
(app → screens → widgets → context), never a circle (``tests/test_console_layers.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import themes
from console.reader import LedgerThread
from console.watcher import LedgerWatcher


@dataclass
class ConsoleConfig:
    """How the console runs. ``refresh`` is the ledger watcher's pulse in seconds (how often
    it reads when no commit wakes it: ``console.watcher``); ``clock`` returns
    Unix seconds (tests freeze it); ``themes_dir`` is a folder of user theme files (TOML,
    see ``themes/``); ``screenshot_dir`` is where the palette's "save screenshot" writes
    (default: the current folder)."""

    ledger: Path | str  # a SQLite file, or a postgresql:// URL
    operator: str
    read_only: bool = False
    theme: str = themes.DARK_NAME
    refresh: float = 0.25
    clock: Callable[[], float] = field(default=time.time)
    themes_dir: Path | None = None
    screenshot_dir: Path | None = None
    #: Open the ``runner_gap`` escalation when no runner is alive while one is expected
    #: (``watchkeeper console`` on its own; tests and ``up`` leave it off). ``sinks`` and
    #: ``owner`` are the settings' ``notify`` and ``runner_owner``.
    watch_runner: bool = False
    sinks: tuple = ()
    owner: str | None = None
    #: ``up`` only: stops the embedded runner (thread-safe; its scheduler starts no new run
    #: once called). When set, quitting asks first and calls it before the console closes.
    stop_runner: Callable[[], None] | None = None
    #: ``up`` only: what the runner's stop does with runs still going (core.runner.runner.STOP_MODES:
    #: "leave" them to their monitors, "drain" them, "kill" them); the quit question says so.
    stop_mode: str = "leave"


class ConsoleApp(Protocol):
    """The app as screens see it (``console.app.WatchkeeperApp`` implements it)."""

    config: ConsoleConfig
    reader: LedgerThread
    actor: LedgerThread
    counter: LedgerThread
    watcher: LedgerWatcher

    def now(self) -> float:
        """The console's clock (Unix seconds, UTC)."""
        ...
