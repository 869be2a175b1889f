"""``watchkeeper logs RUN_ID [-f] [--stderr]``: a run's output, followed live like ``tail -f``.

The output is read from the files the run's monitor writes (``core.monitor``), so it can be
read while the run goes on, whichever runner (if any) watches it. With ``-f`` new bytes are
printed as they arrive until the run ends, then its verdict line. Job output is untrusted:
escape sequences and control characters are shown escaped (``shown_lines``), never obeyed.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from console.cli.common import (
    EXIT_NOT_FOUND,
    ID,
    fail,
    ledger_errors,
    ledger_option,
    open_ledger,
    shown,
    shown_lines,
)
from console.cli.runs import finished_line
from core import monitor
from core.ledger.lifecycle import TERMINAL
from core.ledger.sql_store import SqlStore

#: Seconds between two looks at the output file and the run's state while following.
FOLLOW_POLL_S = 0.2


def _emit(data: bytes) -> None:
    if data:
        click.echo(shown_lines(data.decode("utf-8", errors="replace")), nl=False)


@click.command("logs")
@click.argument("run_id", type=ID)
@ledger_option
@click.option("-f", "--follow", is_flag=True, help="Keep printing new output until the run ends, then its verdict.")
@click.option("--stderr", "stream", flag_value="stderr", default="stdout", help="The run's stderr instead of stdout.")
@ledger_errors
def logs_cmd(run_id: int, ledger_path: str | None, follow: bool, stream: str) -> None:
    """Print RUN_ID's output (stdout, or --stderr), kept as its head and tail when over the
    output cap. -f follows a running job live, like `tail -f`, and prints the run's verdict
    line when it ends. Escape sequences in the output are shown escaped.

    \b
    Example:
      watchkeeper logs 42 -f
    """
    with open_ledger(ledger_path, read_only=True) as ledger:
        store = SqlStore(ledger)
        run = store.run(run_id)
        if run is None:
            fail(f"no run {run_id} (see `watchkeeper runs`)", EXIT_NOT_FOUND)
        art = Path(run.artifacts_dir) if run.artifacts_dir else None
        if not follow or run.state in TERMINAL:
            data = monitor.read_output(art, stream) if art else b""
            _emit(data)
            if not data and art is not None:
                other = "stderr" if stream == "stdout" else "stdout"
                try:
                    size = (art / f"{other}.log").stat().st_size  # its size: no need to read it
                except OSError:
                    size = 0
                if size:  # an empty answer must not read as "the job printed nothing"
                    flag = "--stderr" if other == "stderr" else "without --stderr"
                    click.echo(f"[watchkeeper: run {run_id} wrote nothing to {stream}; {size} byte(s) on {other}"
                               f" ({flag})]", err=True)
            if follow:
                _verdict(store, run_id)
            return
        offset = 0
        said_cap = False
        seen_over = 0  # consecutive looks finding the stream over its cap
        while True:
            if art is None:  # queued or spawned: its folder is known once it runs
                run = store.run(run_id)
                art = Path(run.artifacts_dir) if run is not None and run.artifacts_dir else None
            if art is not None:
                offset = _print_new(art / f"{stream}.log", offset)
                seen_over = seen_over + 1 if monitor.over_cap(art, stream) else 0
                # twice in a row: the job's end can start the tail drain a moment before
                # the monitor writes ``exit``
                if not said_cap and seen_over >= 2:
                    said_cap = True
                    click.echo(f"[watchkeeper: {stream} went over its cap; its last part is shown when the run"
                               " ends]", err=True)
            run = store.run(run_id)
            if run is None or run.state in TERMINAL:
                break
            time.sleep(FOLLOW_POLL_S)
        if art is not None:  # what the end added: the folded tail, or the last bytes
            _print_new(art / f"{stream}.log", offset)
        _verdict(store, run_id)


def _print_new(path: Path, offset: int) -> int:
    """Print what ``path`` holds past ``offset``; returns the new offset."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return offset
    _emit(data)
    return offset + len(data)


def _verdict(store: SqlStore, run_id: int) -> None:
    run = store.run(run_id)
    if run is None:
        return
    ended = run.ended_at or time.time()
    line = finished_line(ended, f"{run.job}/{run.task}" if run.task else run.job, run.attempt, run.state,
                         (run.ended_at - run.started_at) if run.ended_at and run.started_at else None,
                         run.exit_code, run.signal, run.reason)
    click.echo(f"run {run_id}: {line.strip()}" + ("" if run.state in TERMINAL else f" ({shown(run.state)})"))


#: The commands this module adds to ``watchkeeper`` (console.cli.main).
COMMANDS: tuple[click.Command, ...] = (logs_cmd,)
