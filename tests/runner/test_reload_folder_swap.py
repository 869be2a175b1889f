"""Hot reload survives the spec folder being deleted and recreated, or swapped."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from core.runner.reload import reload_dir, watch_specs
from core.spec.loader import LoadResult


async def _wait_for(results: list[LoadResult], pred, timeout: float = 15.0) -> LoadResult:
    # A bound on waiting, not a speed assertion.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        for r in results:
            if pred(r):
                return r
        await asyncio.sleep(0.02)
    raise AssertionError(f"no reload matched; got {results!r}")


def _job(folder: Path, name: str) -> None:
    (folder / f"{name}.toml").write_text(f'name = "{name}"\ncommand = "true"\n')


async def test_deleted_and_recreated_folder_is_watched_again(tmp_path: Path):
    spec = tmp_path / "spec"
    spec.mkdir()
    _job(spec, "a")
    results: list[LoadResult] = []
    stop = asyncio.Event()
    task = asyncio.create_task(watch_specs(spec, results.append, stop, debounce_ms=50, folder_poll_s=0.2))
    await asyncio.sleep(0.4)

    shutil.rmtree(spec)
    missing = await _wait_for(results, lambda r: r.folder_missing)
    assert missing.jobs == {} and len(missing.errors) == 1
    assert "folder missing" in missing.errors[0].message and missing.errors[0].file == str(spec)
    await asyncio.sleep(0.5)
    assert sum(r.folder_missing for r in results) == 1  # reported once, not every poll

    spec.mkdir()
    _job(spec, "c")
    await _wait_for(results, lambda r: set(r.jobs) == {"c"})

    # and the new folder is really watched: a later edit arrives too
    await asyncio.sleep(0.3)
    _job(spec, "d")
    await _wait_for(results, lambda r: set(r.jobs) == {"c", "d"})
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_atomic_folder_swap_is_followed(tmp_path: Path):
    spec = tmp_path / "spec"
    spec.mkdir()
    _job(spec, "a")
    results: list[LoadResult] = []
    stop = asyncio.Event()
    task = asyncio.create_task(watch_specs(spec, results.append, stop, debounce_ms=50, folder_poll_s=0.2))
    await asyncio.sleep(0.4)
    new = tmp_path / "spec.new"
    new.mkdir()
    _job(new, "b")
    old = tmp_path / "spec.old"
    os.rename(spec, old)
    os.rename(new, spec)  # as close to atomic as two renames get
    shutil.rmtree(old)
    await _wait_for(results, lambda r: set(r.jobs) == {"b"})
    await asyncio.sleep(0.3)
    _job(spec, "e")
    await _wait_for(results, lambda r: set(r.jobs) == {"b", "e"})
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_stop_while_the_folder_is_missing(tmp_path: Path):
    results: list[LoadResult] = []
    stop = asyncio.Event()
    task = asyncio.create_task(watch_specs(tmp_path / "never", results.append, stop, folder_poll_s=0.2))
    await _wait_for(results, lambda r: r.folder_missing)
    stop.set()
    await asyncio.wait_for(task, 5)


def test_reload_dir_of_missing_folder_is_flagged(tmp_path: Path):
    res = reload_dir(tmp_path / "nope")
    assert res.folder_missing and res.jobs == {} and "folder missing" in res.errors[0].message
