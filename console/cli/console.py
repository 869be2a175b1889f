"""CLI: ``up DIR`` (embedded runner + console in one process) and ``console`` (attach to a
ledger written by a separate ``watchkeeper run``)."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import click

from console.cli.common import EXIT_CONFIG, EXIT_NOT_FOUND, fail, open_ledger_at, prepare_places
from core.spec.settings import Settings, SettingsError, load_settings


def _console_options(f: Any) -> Any:
    opts = [
        click.option("--ledger", "ledger_path", type=click.Path(dir_okay=False), default=None,
                     help="Ledger file [default: from settings, ./watchkeeper.db]."),
        click.option("--config", type=click.Path(dir_okay=False), default=None,
                     help="Settings file [default: <DIR>/watchkeeper.toml when present]."),
        click.option("--read-only", is_flag=True, help="Watch only: every action is refused with a message."),
        click.option("--no-mouse", is_flag=True, help="Leave the mouse to the terminal (select and copy text)."),
        click.option("--theme", default=None,
                     help="dark (default), light, high-contrast, or any Textual theme name."),
        click.option("--refresh", type=click.FloatRange(min=0.01, max=3600), default=None,
                     help="Poll interval in seconds [default 0.25]."),
        click.option("--as", "operator", default=None, help="Operator name on actions [default: $USER]."),
        click.option("--screenshot-dir", type=click.Path(file_okay=False), default=None,
                     help="Folder for the palette's screenshots [default: the current folder]."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _settings(spec_dir: str | None, ledger_path: str | None, config: str | None, theme: str | None,
              refresh: float | None, operator: str | None) -> Settings:
    try:
        return load_settings(spec_dir, config, ledger=ledger_path, theme=theme, refresh=refresh, operator=operator)
    except SettingsError as exc:
        fail(str(exc), EXIT_CONFIG)


def _app(settings: Settings, read_only: bool, screenshot_dir: str | None, *, watch_runner: bool = False,
         stop_runner=None):
    from console.app import ConsoleConfig, WatchkeeperApp

    return WatchkeeperApp(ConsoleConfig(ledger=Path(settings.ledger), operator=settings.operator,
                                        read_only=read_only, theme=settings.theme, refresh=settings.refresh,
                                        themes_dir=settings.themes_dir,
                                        screenshot_dir=Path(screenshot_dir).absolute() if screenshot_dir else None,
                                        watch_runner=watch_runner and not read_only,
                                        sinks=tuple(settings.notify or ()), owner=settings.runner_owner,
                                        stop_runner=stop_runner))


def _quiet_logging(path: Path) -> None:
    # Log lines on stderr would scribble over the console; send them to a file beside the ledger.
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)


def register(group: click.Group) -> None:
    @group.command("console")
    @_console_options
    def console_cmd(ledger_path: str | None, config: str | None, read_only: bool, no_mouse: bool,
                    theme: str | None, refresh: float | None, operator: str | None,
                    screenshot_dir: str | None) -> None:
        """Open the console on a ledger written by a separate `watchkeeper run`.

        \b
        Keys: ? help, 1-4 views, enter detail, a ack, s snooze, r retry, x abandon, q quit.
        Several consoles may attach to one ledger at once.

        \b
        Example:
          watchkeeper console --ledger /var/lib/watchkeeper/ledger.db --read-only
        """
        settings = _settings(None, ledger_path, config, theme, refresh, operator)
        if not Path(settings.ledger).exists():
            fail(f"no ledger at {settings.ledger}; start `watchkeeper run DIR` or pass --ledger", EXIT_NOT_FOUND)
        # Open it once here, so a file that is not a ledger, a newer schema or read-only
        # media is one clear line instead of a console that cannot draw anything.
        open_ledger_at(settings.ledger, read_only=read_only).close()
        _quiet_logging(Path(settings.ledger).with_suffix(".console.log"))
        _app(settings, read_only, screenshot_dir, watch_runner=True).run(mouse=not no_mouse)

    @group.command("up")
    @click.argument("spec_dir", type=click.Path(exists=True, file_okay=False))
    @_console_options
    def up_cmd(spec_dir: str, ledger_path: str | None, config: str | None, read_only: bool, no_mouse: bool,
               theme: str | None, refresh: float | None, operator: str | None,
               screenshot_dir: str | None) -> None:
        """Run the jobs in SPEC_DIR and open the console on them, in one process.

        Quitting the console (q, then y) stops the runner cleanly: it asks first, saying how
        many runs are in flight; no new run starts once confirmed, and running jobs get the
        shutdown grace.

        \b
        Example:
          watchkeeper up sample_jobs --ledger demo/watchkeeper.db
        """
        from core.runner.runner import Runner

        settings = _settings(spec_dir, ledger_path, config, theme, refresh, operator)
        # create and migrate before either side opens it; a bad place is one line, exit 2
        prepare_places(settings.ledger, settings.artifacts_dir)
        _quiet_logging(Path(settings.ledger).with_suffix(".log"))
        runner = Runner(spec_dir, settings, install_signal_handlers=False)
        failure: list[BaseException] = []

        def run_runner() -> None:
            try:
                asyncio.run(runner.run())
            except BaseException as exc:  # shown after the console closes
                failure.append(exc)
                logging.getLogger("watchkeeper.up").exception("runner stopped with an error")

        thread = threading.Thread(target=run_runner, name="wk-runner", daemon=True)
        thread.start()
        try:
            # Quitting asks first (runs in flight) and stops the scheduler before the console
            # closes, so no run starts while it does.
            _app(settings, read_only, screenshot_dir,
                 stop_runner=lambda: runner.request_stop("console quit")).run(mouse=not no_mouse)
        finally:
            runner.request_stop("console quit")
            thread.join(timeout=settings.shutdown_grace + 15)
        if failure:
            raise click.ClickException(f"runner failed: {failure[0]}")
        if thread.is_alive():
            click.echo("runner did not stop in time; exiting anyway", err=True)
        else:
            from console.cli.runs import print_stopped

            print_stopped(runner.stop_reason, runner.left_behind)
