"""Hot reload: watch_specs sees edits; an invalid edit keeps the last good spec."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.ledger.connection import Ledger
from core.ledger.jobs import load_jobs, recent_spec_errors, sync_jobs
from core.runner.reload import reload_dir, watch_specs
from core.spec.loader import LoadResult, load_dir


async def _wait_for(results: list[LoadResult], pred, timeout: float = 10.0) -> LoadResult:
    # A bound on waiting, not a speed assertion: inotify normally answers in milliseconds.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        for r in results:
            if pred(r):
                return r
        await asyncio.sleep(0.02)
    raise AssertionError(f"no reload matched; got {results!r}")


async def test_edit_then_invalid_edit(tmp_path: Path):
    specs = tmp_path / "jobs"
    specs.mkdir()
    spec = specs / "a.toml"
    spec.write_text('name = "a"\ncommand = "true"\ntimeout = "10s"\n')
    with Ledger(tmp_path / "ledger.db") as ledger:
        sync_jobs(ledger, load_dir(specs))
        results: list[LoadResult] = []

        def on_change(result: LoadResult) -> None:
            results.append(result)
            sync_jobs(ledger, result)

        stop = asyncio.Event()
        task = asyncio.create_task(watch_specs(specs, on_change, stop, debounce_ms=50))
        await asyncio.sleep(0.3)  # let the watcher start before the first edit
        spec.write_text('name = "a"\ncommand = "true"\ntimeout = "20s"\n')
        await _wait_for(results, lambda r: "a" in r.jobs and r.jobs["a"].spec.timeout == 20.0)
        assert load_jobs(ledger)["a"].timeout == 20.0

        spec.write_text('name = "a"\ncommand = "true"\ntimeout = "soon"\n')
        await _wait_for(results, lambda r: bool(r.errors))
        assert load_jobs(ledger)["a"].timeout == 20.0
        (err,) = recent_spec_errors(ledger)
        assert err.field == "timeout" and err.file == str(spec)

        stop.set()
        await asyncio.wait_for(task, 5)


async def test_callback_error_does_not_stop_the_watch(tmp_path: Path):
    calls: list[int] = []

    def on_change(result: LoadResult) -> None:
        calls.append(len(result.jobs))
        if len(calls) == 1:
            raise RuntimeError("boom")

    stop = asyncio.Event()
    task = asyncio.create_task(watch_specs(tmp_path, on_change, stop, debounce_ms=50))
    await asyncio.sleep(0.3)
    (tmp_path / "a.toml").write_text('name = "a"\ncommand = "true"\n')
    await _wait_for([calls], lambda c: len(c) >= 1)  # type: ignore[list-item]
    await asyncio.sleep(0.2)
    (tmp_path / "b.toml").write_text('name = "b"\ncommand = "true"\n')
    await _wait_for([calls], lambda c: 2 in c)  # type: ignore[list-item]
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_editor_temp_files_and_settings_are_ignored(tmp_path: Path):
    calls: list[LoadResult] = []
    stop = asyncio.Event()
    task = asyncio.create_task(watch_specs(tmp_path, calls.append, stop, debounce_ms=50))
    await asyncio.sleep(0.3)
    (tmp_path / ".a.toml.swp").write_text("x")
    (tmp_path / "watchkeeper.toml").write_text("lease = 30\n")
    (tmp_path / "z.toml").write_text('name = "z"\ncommand = "true"\n')
    await _wait_for([calls], lambda c: len(c) >= 1)  # type: ignore[list-item]
    stop.set()
    await asyncio.wait_for(task, 5)
    assert all(set(r.jobs) == {"z"} for r in calls)


def test_reload_dir_of_missing_folder_is_an_error_not_a_crash(tmp_path: Path):
    res = reload_dir(tmp_path / "nope")
    assert res.jobs == {} and len(res.errors) == 1


async def test_an_edit_between_the_first_load_and_the_watch_starting_is_reloaded(tmp_path: Path):
    # A loaded machine can start the watch well after the runner's first load: an edit made
    # in between changed nothing the watch sees, so it must compare with the first load.
    from core.runner.reload import signature

    specs = tmp_path / "jobs"
    specs.mkdir()
    spec = specs / "a.toml"
    spec.write_text('name = "a"\ncommand = "true"\nevery = "soon"\n')
    before = signature(specs)
    assert load_dir(specs).errors  # what the first load saw
    spec.write_text('name = "a"\ncommand = "true"\nevery = "1h"\n')  # fixed before the watch
    results: list[LoadResult] = []
    stop = asyncio.Event()
    task = asyncio.create_task(watch_specs(specs, results.append, stop, debounce_ms=50,
                                           loaded_signature=before))
    await _wait_for(results, lambda r: "a" in r.jobs and not r.errors)
    stop.set()
    await asyncio.wait_for(task, 5)
