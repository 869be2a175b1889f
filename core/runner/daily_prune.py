"""The runner's own retention (on by default; ``retention.enabled = false`` turns it off):
prune once per ``retention.interval`` (a day by default) in a pool thread, in the same short batches as ``watchkeeper prune``.

When the last prune happened is kept in the ledger (``meta``), so a restarting runner does not
prune again early, and two runners on one ledger do not both prune the same day.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from core.ledger import retention
from core.ledger.connection import Ledger, StorageError
from core.runner.waits import wait_event
from core.spec.settings import Settings

log = logging.getLogger(__name__)

#: Longest sleep between checks, seconds (so a changed interval or a restart is noticed).
CHECK_EVERY_S = 300.0
#: Wait after the runner starts before the first check, seconds (startup work goes first).
FIRST_CHECK_S = 60.0


class DailyPrune:
    """``tick(now)`` prunes when due and returns the report (None when not due or off);
    ``loop(stop)`` calls it from the runner's event loop in a pool thread.

    Args:
        settings: the runner's settings (``retention``, ``artifacts_dir``).
        ledger: gives the calling thread its ledger connection (the runner's serialised one,
            so a batch queues behind the runner's own writes instead of racing them).
        actor: recorded on the ``runs_pruned`` events, e.g. ``runner:<id>``.
    """

    def __init__(self, settings: Settings, ledger: Callable[[], Ledger], *, actor: str) -> None:
        self.settings = settings
        self.ledger = ledger
        self.actor = actor
        self.last: retention.PruneReport | None = None

    def tick(self, now: float | None = None) -> retention.PruneReport | None:
        ret = self.settings.retention
        if not ret.active:
            return None
        led = self.ledger()
        if not retention.prune_due(led, ret.interval, now=now):
            return None
        rep = retention.prune_with(led, ret, self.settings.artifacts_dir, actor=self.actor,
                                   now=time.time() if now is None else now)
        self.last = rep
        log.warning("retention: pruned %d run(s) (+%d sub-tasks), %d events; ledger+artifacts %d → %d bytes;"
                    " longest write %.0f ms", rep.runs, rep.subtasks, rep.events, rep.size_before, rep.size_after,
                    rep.max_tx_s * 1000)
        for err in rep.artifact_errors[:5]:
            log.warning("retention: %s", err)
        return rep

    async def loop(self, stop: asyncio.Event) -> None:
        """Check now and then until ``stop`` is set; a failed prune is logged and tried at the
        next check (nothing was lost: a batch either committed or did not)."""
        wait = FIRST_CHECK_S
        while not stop.is_set():
            if await wait_event(stop, wait):
                return
            wait = min(CHECK_EVERY_S, self.settings.retention.interval)
            try:
                await asyncio.to_thread(self.tick)
            except StorageError as exc:  # locked, or the ledger out of reach: one line, no traceback
                log.warning("retention prune failed (%s); trying again at the next check", exc)
            except Exception:
                log.exception("retention prune failed; trying again at the next check")
