"""A real runner in a background thread, for end-to-end tests with real processes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.ledger.connection import Ledger
from core.runner.runner import Finished, Runner
from core.spec.settings import Settings, load_settings

FAST = {"heartbeat": 0.2, "lease": 1.0, "sweep_interval": 0.2, "start_timeout": 5.0, "shutdown_grace": 1.0}


def write_specs(folder: Path, text: str, name: str = "jobs.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def fast_settings(tmp: Path, **overrides: Any) -> Settings:
    """Short heartbeat/lease/sweep settings on ``tmp / "wk.db"`` (or ``ledger=`` a URL)."""
    return load_settings(None, **{"ledger": str(tmp / "wk.db"), **FAST, **overrides})


class RunnerThread:
    """Start a Runner in its own thread and event loop; ``stop()`` ends it cleanly."""

    def __init__(self, spec_dir: Path, settings: Settings, *, subreaper: bool = False) -> None:
        self.finished: list[Finished] = []
        # Not a child subreaper by default: that flag would stay on the whole test session's
        # process. Tests of escaped processes run `watchkeeper run` as a subprocess instead.
        self.runner = Runner(spec_dir, settings, install_signal_handlers=False, on_finished=self.finished.append,
                             subreaper=subreaper)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        try:
            asyncio.run(self.runner.run())
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def __enter__(self) -> RunnerThread:
        self.thread.start()
        if not self.runner.started.wait(10):
            raise RuntimeError("runner did not start")
        return self

    def stop(self, timeout: float = 20) -> None:
        self.runner.request_stop()
        self.thread.join(timeout)
        if self.error:
            raise self.error
        if self.thread.is_alive():  # say where the stop hangs, not only that threads were left
            import io
            import sys
            import traceback

            frame = sys._current_frames().get(self.thread.ident or -1)
            where = "".join(traceback.format_stack(frame)) if frame is not None else "(no frame)"
            loop = self.runner._loop
            if loop is not None:  # the tasks it waits on (read from outside the loop: best effort)
                out = io.StringIO()
                for task in list(asyncio.all_tasks(loop)):
                    task.print_stack(limit=8, file=out)
                where += "\n" + out.getvalue()
            raise AssertionError(f"the runner did not stop within {timeout:g}s; its thread is at:\n{where}")

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for(pred: Callable[[], Any], timeout: float = 15, every: float = 0.05) -> Any:
    """Poll ``pred`` until it returns something truthy; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(every)


def terminal_runs(db: Path, job: str | None = None) -> list[dict[str, Any]]:
    with Ledger(db) as led:
        sql = ("SELECT * FROM runs WHERE state IN ('succeeded','failed','blocked','timed_out','orphaned','abandoned')")
        params: tuple[Any, ...] = ()
        if job:
            sql += " AND job = ?"
            params = (job,)
        return [dict(r) for r in led.query(sql + " ORDER BY id", params)]


def query(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    with Ledger(db) as led:
        return [dict(r) for r in led.query(sql, params)]
