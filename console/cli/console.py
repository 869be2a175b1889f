"""CLI: ``up DIR`` (embedded runner + console in one process) and ``console`` (attach to a
ledger written by a separate ``watchkeeper run``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from console.cli.common import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    fail,
    open_ledger_at,
    open_settings,
    prepare_places,
)
from console.cli.runs import stop_mode, stop_options
from core.ledger.dialect import is_url
from core.spec.settings import Settings


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
                     help="Folder for the palette's screenshots [default: screenshots in the user's data folder, "
                          "~/.local/share/watchkeeper/screenshots on Linux]."),
        click.option("--web", is_flag=True,
                     help="Serve the console to browsers (textual-serve) instead of this terminal."),
        click.option("--bind", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
                     help="With --web: where to listen. Any address but loopback needs a token."),
        click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="With --web: TOML of [NAME] token = \"...\" (read_only = true to watch only); "
                          "without it a non-loopback bind prints a generated token once."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _app(settings: Settings, read_only: bool, screenshot_dir: str | None, *, watch_runner: bool = False,
         stop_runner=None, stop_mode: str = "leave"):
    from console.app import ConsoleConfig, WatchkeeperApp

    return WatchkeeperApp(ConsoleConfig(ledger=settings.ledger, operator=settings.operator,
                                        read_only=read_only, theme=settings.theme, refresh=settings.refresh,
                                        themes_dir=settings.themes_dir,
                                        screenshot_dir=Path(screenshot_dir).absolute() if screenshot_dir else None,
                                        watch_runner=watch_runner and not read_only,
                                        sinks=tuple(settings.notify or ()), owner=settings.runner_owner,
                                        stop_runner=stop_runner, stop_mode=stop_mode))


def _serve_web(settings: Settings, bind: str, token_file: Path | None, read_only: bool,
               config: str | None) -> None:
    from console.web import WebError, serve_console

    try:
        serve_console(ledger=settings.ledger if is_url(settings.ledger) else Path(settings.ledger).absolute(), bind=bind, token_file=token_file,
                      operator=settings.operator, read_only=read_only,
                      config=Path(config).absolute() if config else None, theme=settings.theme,
                      refresh=settings.refresh, echo=lambda line: click.echo(line))
    except WebError as exc:
        fail(str(exc), EXIT_USAGE)
    except OSError as exc:  # the port is taken, or the address is not this machine's
        fail(f"--bind {bind}: cannot listen ({exc.strerror or exc})", EXIT_USAGE)


@contextlib.contextmanager
def _signals_quit(app: Any, runner: Any) -> Iterator[None]:
    """While the console runs in ``up``: SIGTERM (``systemctl stop``, ``docker stop``), SIGHUP
    (the terminal or the SSH session closed) and a SIGINT sent from outside (the console
    reads Ctrl-C as a key) stop the runner cleanly, recorded with the signal's name, and close
    the console — instead of ending the process as a crash would (no stop recorded, the
    runner found gone, a runner gap)."""
    def on_signal(signum: int, _frame: Any) -> None:
        runner.request_stop(signal.Signals(signum).name)
        with contextlib.suppress(RuntimeError):  # before the console's loop started, or after
            asyncio.get_running_loop().call_soon_threadsafe(app.exit)

    sigs = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    before = {sig: signal.signal(sig, on_signal) for sig in sigs}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _check_web_flags(web: bool, bind: str, token_file: Path | None) -> None:
    if not web and (token_file is not None or bind != "127.0.0.1:8080"):
        fail("--bind and --token-file go with --web", EXIT_USAGE)


def log_beside(settings: Settings, suffix: str) -> Path:
    """The console's log file: beside a SQLite ledger; beside the artifacts folder of a
    PostgreSQL one (logs stay on the host)."""
    if is_url(settings.ledger):
        settings.artifacts_dir.parent.mkdir(parents=True, exist_ok=True)
        return settings.artifacts_dir.with_suffix(suffix)
    return Path(settings.ledger).with_suffix(suffix)


def _quiet_logging(path: Path) -> None:
    # Log lines on stderr would scribble over the console; send them to a file beside the ledger.
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)


@click.command("console")
@_console_options
def console_cmd(ledger_path: str | None, config: str | None, read_only: bool, no_mouse: bool,
                theme: str | None, refresh: float | None, operator: str | None,
                screenshot_dir: str | None, web: bool, bind: str, token_file: Path | None) -> None:
    """Open the console on a ledger written by a separate `watchkeeper run`.

    \b
    Keys: ? help, 1-4 views, enter detail, a ack, s snooze, r retry, x abandon, q quit.
    Several consoles may attach to one ledger at once.

    With --web the same console is served to browsers (one console per tab); on loopback
    (the default) no token is needed, any other --bind needs one (--token-file, or one is
    generated and printed once). A token's name is the operator its actions are
    attributed to.

    \b
    Example:
      watchkeeper console --ledger /var/lib/watchkeeper/ledger.db --read-only
      watchkeeper console --web --ledger /var/lib/watchkeeper/ledger.db   # http://127.0.0.1:8080/
    """
    _check_web_flags(web, bind, token_file)
    settings = open_settings(None, config, ledger=ledger_path, theme=theme, refresh=refresh, operator=operator)
    if not is_url(settings.ledger) and not Path(settings.ledger).exists():
        fail(f"no ledger at {settings.ledger}; start `watchkeeper run DIR` or pass --ledger", EXIT_NOT_FOUND)
    # Open it once here, so a file that is not a ledger, a newer schema or read-only
    # media is one clear line instead of a console that cannot draw anything.
    open_ledger_at(settings.ledger, read_only=read_only).close()
    if web:
        _serve_web(settings, bind, token_file, read_only, config)
        return
    _quiet_logging(log_beside(settings, ".console.log"))
    _app(settings, read_only, screenshot_dir, watch_runner=True).run(mouse=not no_mouse)

@click.command("up")
@click.argument("spec_dir", type=click.Path(exists=True, file_okay=False))
@_console_options
@stop_options
def up_cmd(spec_dir: str, ledger_path: str | None, config: str | None, read_only: bool, no_mouse: bool,
           theme: str | None, refresh: float | None, operator: str | None,
           screenshot_dir: str | None, web: bool, bind: str, token_file: Path | None,
           drain: bool, kill: bool) -> None:
    """Run the jobs in SPEC_DIR and open the console on them, in one process.

    Quitting the console (q, then y) stops the runner cleanly: it asks first, saying how
    many runs are in flight; no new run starts once confirmed. Running jobs keep running
    under their monitors and the next `up` or `run` re-attaches them (--drain waits up to
    shutdown_grace for them first, --kill ends them).

    With --web the console is served to browsers instead (see `watchkeeper console
    --help`); Ctrl-C stops the server and the runner.

    \b
    Example:
      watchkeeper up sample_jobs --ledger demo/watchkeeper.db
      watchkeeper up sample_jobs --web --bind 0.0.0.0:8080 --token-file ~/.config/watchkeeper/tokens.toml
    """
    from core.runner.runner import Runner

    _check_web_flags(web, bind, token_file)
    settings = open_settings(spec_dir, config, ledger=ledger_path, theme=theme, refresh=refresh, operator=operator)
    # create and migrate before either side opens it; a bad place is one line, exit 2
    prepare_places(settings.ledger, settings.artifacts_dir)
    from console.cli.runs import start_metrics

    # the [metrics] bind setting serves /metrics here as it does for `watchkeeper run`
    stop_metrics = start_metrics(settings.metrics.bind, settings.ledger, "metrics.bind")
    _quiet_logging(log_beside(settings, ".log"))
    def on_started() -> None:  # a browser console leaves the terminal free: say the runner is up, as `run` does
        from console.cli.runs import started_line

        click.echo(started_line(runner, settings), err=True)

    runner = Runner(spec_dir, settings, install_signal_handlers=False, stop_mode=stop_mode(drain, kill),
                    on_started=on_started if web else None)
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
        if web:
            # each tab is a console of its own on the ledger; Ctrl-C ends the server, then the runner
            _serve_web(settings, bind, token_file, read_only, str(Path(config).absolute()) if config else None)
        else:
            # Quitting asks first (runs in flight) and stops the scheduler before the console
            # closes, so no run starts while it does.
            app = _app(settings, read_only, screenshot_dir, stop_runner=lambda: runner.request_stop("console quit"),
                       stop_mode=runner.stop_mode)
            with _signals_quit(app, runner):
                app.run(mouse=not no_mouse)
    finally:
        runner.request_stop("web console stopped" if web else "console quit")
        thread.join(timeout=settings.shutdown_grace + 15)
        if stop_metrics is not None:
            stop_metrics()
    if failure:
        raise click.ClickException(f"runner failed: {failure[0]}")
    if thread.is_alive():
        click.echo("runner did not stop in time; exiting anyway", err=True)
    else:
        from console.cli.runs import print_stopped

        print_stopped(runner.stop_reason, runner.left_behind, runner.unrecorded_left)


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (console_cmd, up_cmd)
