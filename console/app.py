"""The Textual console app: thin. Screens hold the views, ``core`` holds the data.

Imports go one way: this module composes the screens; they reach it only through
``console.context`` (``ConsoleApp``), so there is no app ↔ screens ↔ palette circle.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import platformdirs
from textual.app import App, SystemCommand
from textual.screen import Screen

import themes
from console.context import ConsoleConfig
from console.reader import LedgerThread
from console.screens.dialogs import ConfirmScreen, HelpScreen
from console.screens.main import MainScreen
from console.screenshots import without_web_fonts
from console.watcher import LedgerWatcher
from console.widgets.palette import WatchkeeperCommands
from core.ledger import reads

__all__ = ["ConsoleConfig", "WatchkeeperApp"]

#: Seconds between the console's runner-gap checks (``ConsoleConfig.watch_runner``).
RUNNER_GAP_CHECK_S = 5.0



def quit_detail(n: int | None, stop_mode: str) -> str:
    """What quitting ``up`` does to the ``n`` runs in flight (None: count unknown) under
    ``stop_mode`` (``drain``, ``kill``, else they are left to their monitors), in words that
    agree with the count ("1 run in flight: it keeps running …")."""
    if n == 0:
        return "No run is in flight. No new run starts until watchkeeper runs again."
    one = n == 1
    flying = "Runs in flight (count unknown)" if n is None else f"{n} run{'' if one else 's'} in flight"
    subj, obj = ("it", "it") if one else ("they", "them")
    return {
        "drain": f"{flying}: the runner waits for {obj} to finish (--drain) before it stops.",
        "kill": f"{flying}: {subj} {'is' if one else 'are'} ended now (--kill), recorded as killed by this stop.",
    }.get(stop_mode, f"{flying}: {subj} keep{'s' if one else ''} running under {'its monitor' if one else 'their monitors'};"
                     f" the next `watchkeeper up` or `run` on this ledger re-attaches {obj} and records how"
                     f" {subj} end{'s' if one else ''}.") + " No new run starts."


class WatchkeeperApp(App):
    """Watchkeeper's operations console (implements ``console.context.ConsoleApp``)."""

    TITLE = "Watchkeeper"
    COMMANDS = App.COMMANDS | {WatchkeeperCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, config: ConsoleConfig) -> None:
        super().__init__()
        self.config = config
        self.theme_errors: list[str] = []  # user theme files that did not load (shown once mounted)
        aliases = dict(themes.ALIASES)
        loaded = list(themes.BUILTIN)
        if config.themes_dir is not None:
            user, self.theme_errors = themes.load_dir(Path(config.themes_dir))
            loaded += user
        for t in loaded:
            self.register_theme(t.theme)
            aliases.update({a: t.theme.name for a in t.aliases})
        name = themes.resolve(config.theme, aliases)
        if name not in self.available_themes:
            self.theme_errors.append(f"unknown theme {config.theme!r}: using {themes.DARK_NAME}")
            name = themes.DARK_NAME
        self.theme = name
        self.reader = LedgerThread(config.ledger, read_only=config.read_only, name="read")
        self.actor = LedgerThread(config.ledger, read_only=config.read_only, name="act")
        # Row counts (scrollbar size) may take a while on a filtered 1,000,000-run ledger:
        # their own thread, so they never delay a poll.
        self.counter = LedgerThread(config.ledger, read_only=True, name="count")
        # The one place that decides when the ledger is read again; screens react to it.
        self.watcher = LedgerWatcher(config.ledger, self.reader, clock=self.now, pulse_s=config.refresh,
                                     screens=lambda: self.screen_stack)

    def now(self) -> float:
        return self.config.clock()

    def on_mount(self) -> None:
        self.push_screen(MainScreen())
        self.run_worker(self.watcher.run(), name="ledger watcher", group="ledger-watcher", exit_on_error=False)
        if self.config.watch_runner:
            self.set_interval(RUNNER_GAP_CHECK_S, self.check_runner_gap)
        for err in self.theme_errors:
            self.notify(err, severity="warning", markup=False, timeout=10)

    async def check_runner_gap(self) -> None:
        """Open (or resolve) the ``runner_gap`` escalation like any watcher does
        (``core.supervisor.supervisor.check_runner_gap``), on the acting thread. A failed
        write is tried again next time; the header shows the gap either way."""
        # Imported here: the supervisor (with the notifiers and settings models) is not needed
        # to draw the first screen, and most consoles never run this check.
        from core.supervisor.supervisor import check_runner_gap

        cfg = self.config
        try:
            await self.actor.call(lambda led: check_runner_gap(led, sinks=cfg.sinks, owner=cfg.owner))
        except Exception:  # never let the check end the console
            pass

    async def action_quit(self) -> None:
        """Quit; in ``up`` (``config.stop_runner`` set) ask first, saying how many runs are in
        flight, and stop the runner's scheduler before the console closes (no new run starts
        after the answer). What happens to runs in flight follows ``config.stop_mode``: by default
        they keep running under their monitors and the next runner re-attaches them."""
        stop = self.config.stop_runner
        if stop is None:
            self.exit()
            return
        if isinstance(self.screen, ConfirmScreen):
            return

        async def detail() -> str:
            try:
                n: int | None = await self.reader.call(reads.runs_in_flight)
            except Exception:  # cannot read: still ask, without a figure
                n = None
            return quit_detail(n, self.config.stop_mode)

        def answered(yes: bool | None) -> None:
            if yes:
                stop()  # the scheduler first: nothing new starts while the console closes
                self.exit()

        # The count is read again while the dialog is up: runs start and end meanwhile, and
        # the answer must be given to what quitting will really leave behind.
        self.push_screen(ConfirmScreen("Quit and stop the runner?", await detail(), live_detail=detail), answered)

    def action_help_quit(self) -> None:
        """ctrl+c, where no text field takes it: quit as ``q`` does (asking first in ``up``).
        Textual's own answer is a hint to press another key; operators press ctrl+c to stop a
        terminal program, and `up` asks before it stops anything."""
        self.call_next(self.action_quit)

    def open_job_history(self, job: str) -> None:
        """Push the job history screen for ``job``: the palette's "History of job X", offered
        on every screen (``console.widgets.palette``)."""
        from console.screens.history import JobHistoryScreen

        self.push_screen(JobHistoryScreen(job))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_missions(self) -> None:
        from console.screens.missions import MissionsScreen  # loaded when first opened
        self.push_screen(MissionsScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # Textual's own "Screenshot" writes to a Downloads folder that may not exist and
        # does not say where; ours (below) does both.
        for cmd in super().get_system_commands(screen):
            if cmd.title != "Screenshot":
                yield cmd
        yield SystemCommand("Screenshot", f"Save an SVG screenshot of this screen in {self.screenshot_folder()}",
                            lambda: self.set_timer(0.1, self.action_screenshot))

    def screenshot_folder(self) -> Path:
        """Where screenshots go: ``--screenshot-dir``, else ``screenshots`` in the user's data
        folder (``platformdirs``: ~/.local/share/watchkeeper/screenshots on Linux) — never the
        current folder, which may be a repository."""
        return self.config.screenshot_dir or platformdirs.user_data_path("watchkeeper") / "screenshots"

    def save_screenshot(self, filename: str | None = None, path: str | None = None,
                        time_format: str | None = None) -> str:
        """Textual's SVG screenshot (returns its path), without the export's web font sources
        (cdnjs): a screenshot opened offline or on an air-gapped machine calls out nowhere."""
        saved = super().save_screenshot(filename, path, time_format)
        svg = Path(saved)
        svg.write_text(without_web_fonts(svg.read_text(encoding="utf-8")), encoding="utf-8")
        return saved

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """The palette's "Save screenshot": an SVG in ``screenshot_folder()`` (created when
        missing), and the notification says where."""
        folder = Path(path) if path else self.screenshot_folder()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            saved = self.save_screenshot(filename, str(folder))
        except OSError as exc:
            self.notify(f"screenshot not saved: {exc}", severity="error", markup=False)
            return
        self.notify(f"screenshot saved to {Path(saved).resolve()}", markup=False, timeout=8)

    def on_unmount(self) -> None:
        self.reader.close()
        self.actor.close()
        self.counter.close()
