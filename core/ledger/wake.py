"""Wake-ups: tell a sleeping loop that another process committed to the ledger, without polling.

* SQLite: every commit writes the ledger's WAL file, so the feed watches the ledger's folder
  (not its sub-folders) for changes to ``<ledger>`` and ``<ledger>-wal`` with ``watchfiles``
  (inotify on Linux). Replaces the 0.25 s ``PRAGMA data_version`` poll.
* PostgreSQL: the ledger's triggers ``NOTIFY watchkeeper`` with the table's name when runs,
  jobs, missions, escalations, outbox rows, outcomes or spec errors change
  (``core.ledger.dialect.NOTIFY_TABLES``, ``change_tracking_sql``); the feed ``LISTEN``s on
  its own connection, so ``watchkeeper trigger`` on any host wakes every runner at once, and
  an acknowledge on one console reaches the others at once. A runner follows only the tables
  its loops read (``tables=dialect.WAKE_TABLES``): an escalation's acknowledge does not wake
  its dispatcher.

Either way an idle runner sleeps in the kernel. A feed wakes its loop once as soon as its watch
or its ``LISTEN`` is in place: a commit made between the loop's last read and that moment
would otherwise wait for the loop's idle timeout. A feed that loses its connection or its
watch logs one line, reconnects with backoff and then wakes its loop once the same way.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from core.ledger import dialect

log = logging.getLogger(__name__)

#: Milliseconds watchfiles waits between two looks for file events while idle (its own loop
#: checks the stop event every step): a commit wakes the runner within one to two steps.
#: 100 ms costs ~0.05% of a core (50 ms: ~0.1%); the 0.25 s data_version poll it replaces
#: cost more and woke no sooner.
STEP_MS = 100
#: Longest wait between two reconnect attempts of a feed, seconds.
MAX_BACKOFF_S = 10.0


async def follow(target: str | os.PathLike[str], on_change: Callable[[], None],
                 *, stop: asyncio.Event | None = None, tables: Collection[str] | None = None,
                 on_tables: Callable[[frozenset[str] | None], None] | None = None) -> None:
    """Call ``on_change()`` (on the running loop) after each commit another connection makes
    to the ledger at ``target`` (a SQLite path or a ``postgresql://`` URL), until cancelled
    or ``stop`` is set. ``tables``: on PostgreSQL, only commits that changed one of these
    wake (None: any that notifies); a SQLite commit always wakes (the WAL does not say
    what changed). ``on_tables``, when given, is called instead of ``on_change`` with the
    tables the commits changed (None: unknown — SQLite, or the feed was away). Never raises
    for a lost connection or watch: it retries."""
    def told(changed: frozenset[str] | None) -> None:
        if on_tables is not None:
            on_tables(changed)
        else:
            on_change()

    if dialect.is_url(target):
        await _follow_pg(str(target), told, stop, None if tables is None else frozenset(tables))
    else:
        await _follow_file(Path(target), lambda: told(None), stop)


async def _follow_file(path: Path, on_change: Callable[[], None], stop: asyncio.Event | None) -> None:
    import watchfiles

    path = path.absolute()
    names = {path.name, f"{path.name}-wal"}

    def ours(_change: watchfiles.Change, changed: str) -> bool:
        return os.path.basename(changed) in names

    loop = asyncio.get_running_loop()
    delay = 0.5
    while stop is None or not stop.is_set():
        try:
            # awatch makes its inotify watch before its first await, so this wake runs once
            # the watch is in place: nothing committed before it is missed.
            loop.call_soon(on_change)
            async for _ in watchfiles.awatch(path.parent, watch_filter=ours, debounce=STEP_MS, step=STEP_MS,
                                             recursive=False, stop_event=stop, rust_timeout=0):
                on_change()
                delay = 0.5
            return  # stop was set
        except (OSError, RuntimeError) as exc:  # folder gone, inotify limits: retry, say it once
            if delay == 0.5:
                log.warning("watching %s for commits failed (%s); retrying", path.parent, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_S)


async def _follow_pg(url: str, on_change: Callable[[frozenset[str] | None], None],
                     stop: asyncio.Event | None, tables: frozenset[str] | None) -> None:
    # The LISTEN connection's socket is watched by the event loop itself (add_reader), and
    # notifications are drained with libpq's own calls: psycopg's notifies() generator would
    # wake every 0.1 s to look, which an idle runner would pay for all day.
    import psycopg

    loop = asyncio.get_running_loop()
    delay = 0.5
    down = False
    while stop is None or not stop.is_set():
        conn = None
        fd = -1
        try:
            live: psycopg.Connection[Any] = await asyncio.to_thread(
                lambda: psycopg.connect(url, autocommit=True, application_name="watchkeeper-listen"))
            conn = live
            await asyncio.to_thread(live.execute, f"LISTEN {dialect.CHANNEL}")
            if down:
                log.warning("ledger %s: change feed back", dialect.mask_url(url))
                down = False
            on_change(None)  # a commit may have come before the LISTEN, or while we were away
            delay = 0.5
            pg = live.pgconn
            readable = asyncio.Event()
            fd = pg.socket
            loop.add_reader(fd, readable.set)
            while stop is None or not stop.is_set():
                waits = [asyncio.ensure_future(readable.wait())]
                if stop is not None:
                    waits.append(asyncio.ensure_future(stop.wait()))
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for w in waits:
                        w.cancel()
                if not readable.is_set():
                    return  # stopped
                readable.clear()
                pg.consume_input()  # raises when the server went away
                changed: set[str] = set()
                while (note := pg.notifies()) is not None:
                    changed.add(note.extra.decode(errors="replace"))
                if tables is not None:
                    changed &= tables
                if changed:
                    on_change(frozenset(changed))
                if live.broken or pg.status != 0:  # 0: CONNECTION_OK
                    raise psycopg.OperationalError("the LISTEN connection broke")
        except psycopg.Error as exc:
            if not down:
                log.warning("ledger %s: change feed lost (%s); retrying with backoff", dialect.mask_url(url),
                            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
                down = True
            await asyncio.sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, MAX_BACKOFF_S)
        finally:
            if fd >= 0:
                loop.remove_reader(fd)
            if conn is not None:
                conn.close()
