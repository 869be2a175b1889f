"""The Textual console app: thin. Screens hold the views, ``core`` holds the data."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from textual.app import App

import themes
from console.reader import LedgerThread
from console.screens.dialogs import HelpScreen
from console.screens.main import MainScreen
from console.widgets.palette import WatchkeeperCommands


@dataclass
class ConsoleConfig:
    """How the console runs. ``refresh`` is the poll interval in seconds; ``clock`` returns
    Unix seconds (tests freeze it)."""

    ledger: Path
    operator: str
    read_only: bool = False
    theme: str = themes.DARK.name
    refresh: float = 0.25
    clock: Callable[[], float] = field(default=time.time)


class WatchkeeperApp(App):
    """Watchkeeper's operations console."""

    TITLE = "Watchkeeper"
    COMMANDS = App.COMMANDS | {WatchkeeperCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, config: ConsoleConfig) -> None:
        super().__init__()
        self.config = config
        for theme in themes.THEMES.values():
            self.register_theme(theme)
        name = themes.resolve(config.theme)
        self.theme = name if name in self.available_themes else themes.DARK.name
        self.reader = LedgerThread(config.ledger, read_only=config.read_only, name="read")
        self.actor = LedgerThread(config.ledger, read_only=config.read_only, name="act")
        # Row counts (scrollbar size) may take a while on a filtered 1,000,000-run ledger:
        # their own thread, so they never delay a poll.
        self.counter = LedgerThread(config.ledger, read_only=True, name="count")

    def now(self) -> float:
        return self.config.clock()

    def on_mount(self) -> None:
        self.push_screen(MainScreen())

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def on_unmount(self) -> None:
        self.reader.close()
        self.actor.close()
        self.counter.close()
