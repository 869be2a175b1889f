"""Runs that end together share one look at the runner's process tree.

As child subreaper the runner ends whatever a run left outside its process group
(``core.runner.reaper``). Finding it means reading every process's parent pid, which cost
more than the rest of a short run put together when each run looked on its own. Here a run
that ended asks for a look *taken after it asked* (so a stray re-parented at its end is
seen), and every run asking while one look is under way shares the next one: at most one
look runs at a time, in a pool thread, however many runs end.
"""

from __future__ import annotations

import asyncio

import psutil

from core.runner.reaper import Reaper


class TreeScans:
    """Shared ``Reaper.tree_by_run`` looks for the event loop (see the module docstring)."""

    def __init__(self, reaper: Reaper) -> None:
        self.reaper = reaper
        self.looks = 0  # how many looks were taken (for benchmarks and tests)
        self._waiting: list[asyncio.Future[dict[str, list[psutil.Process]]]] = []
        self._task: asyncio.Task[None] | None = None

    async def after_now(self) -> dict[str, list[psutil.Process]]:
        """A ``tree_by_run`` taken after this call. Raises ``psutil.Error`` when the tree
        cannot be read (the caller falls back to the reaper's own look)."""
        fut: asyncio.Future[dict[str, list[psutil.Process]]] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._look(), name="stray-scan")
        return await fut

    async def _look(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []  # who asks from now on waits for the next look
            try:
                tree = await asyncio.to_thread(self.reaper.tree_by_run)
            except Exception as exc:  # every waiter hears of it
                for fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            self.looks += 1
            for fut in batch:
                if not fut.done():
                    fut.set_result(tree)
