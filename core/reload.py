"""Hot reload of the spec folder with watchfiles.

``watch_specs`` waits for changes to ``*.toml`` job files, reloads the whole folder and
hands the fresh ``LoadResult`` to a callback. The runner's callback calls
``core.jobs.sync_jobs``, so an edited spec applies from the job's next run and an invalid
edit keeps the last good spec (and records a ``spec_error`` event).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path

from watchfiles import Change, awatch

from core.settings import CONFIG_NAME
from core.specs import LoadResult, SpecError, load_dir

log = logging.getLogger(__name__)


def _is_spec_file(change: Change, path: str) -> bool:
    # Editors write temp files (.swp, ~, .tmp) beside the spec; only finished *.toml count.
    name = os.path.basename(path)
    return name.endswith(".toml") and name != CONFIG_NAME and not name.startswith(".")


def reload_dir(spec_dir: str | os.PathLike[str]) -> LoadResult:
    """``load_dir`` that never raises: a vanished folder becomes one error."""
    try:
        return load_dir(spec_dir)
    except FileNotFoundError as exc:
        return LoadResult(errors=[SpecError(str(spec_dir), None, None, None, str(exc))],
                          bad_files={str(spec_dir)})


async def watch_specs(spec_dir: str | os.PathLike[str], on_change: Callable[[LoadResult], None],
                      stop_event: asyncio.Event, *, debounce_ms: int = 300,
                      force_polling: bool | None = None) -> None:
    """Call ``on_change(load_dir(spec_dir))`` after each burst of changes to job files.

    Args:
        spec_dir: the folder of job specs.
        on_change: called in the event loop with the fresh result; an exception it raises
            is logged and the watch goes on (one bad reload must not stop later ones).
        stop_event: set it to return (checked at least every 50 ms).
        debounce_ms: changes within this many milliseconds are grouped into one reload
            (an editor's save is often a delete + create + modify).
        force_polling: passed to watchfiles (None: its own choice; True for filesystems
            without inotify).

    Returns when ``stop_event`` is set.
    """
    root = Path(spec_dir)
    async for changes in awatch(root, stop_event=stop_event, debounce=debounce_ms, step=50,
                                watch_filter=_is_spec_file, recursive=False,
                                force_polling=force_polling):
        log.info("spec folder changed (%d files), reloading", len(changes))
        result = reload_dir(root)
        try:
            on_change(result)
        except Exception:
            log.exception("reload callback failed; watching on")
