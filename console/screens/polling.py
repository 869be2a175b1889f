"""The self-rescheduling ledger poll shared by the screens that show live data."""

from __future__ import annotations

#: Seconds between forced refreshes when nothing was committed (the runner status moves;
#: ages tick on their own, every second, without a read).
IDLE_REFRESH_S = 5.0


class PollingScreen:
    """Mixin for a Textual ``Screen``: ``_tick`` calls ``poll()`` while the screen is on
    top, then schedules itself again after ``wk.config.refresh`` seconds. One read at a
    time, never overlapping; a failing read never ends the console (``poll`` marks the data
    stale itself); covered by a dialog, it re-reads when uncovered."""

    _data_version: int | None = None

    async def poll(self) -> None:  # pragma: no cover - each screen defines it
        raise NotImplementedError

    def on_screen_resume(self) -> None:
        self._data_version = None  # something may have changed while covered: re-read

    async def _tick(self) -> None:
        try:
            if self.is_current:  # type: ignore[attr-defined]
                await self.poll()
        except Exception:  # never let a poll end the console
            pass
        finally:
            if self.is_attached:  # type: ignore[attr-defined]
                self.set_timer(self.wk.config.refresh, self._tick)  # type: ignore[attr-defined]
