"""The self-rescheduling ledger poll shared by the screens that show live data, and the
header those screens keep live with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from console import keys
from console.context import ConsoleApp
from console.screens.operator_actions import refuse_read_only
from console.widgets.header_bar import HeaderBar
from core.ledger import reads

#: Seconds between forced refreshes when nothing was committed (the runner status moves;
#: ages tick on their own, every second, without a read).
IDLE_REFRESH_S = 5.0


class PollingScreen:
    """Mixin for a Textual ``Screen``: ``_tick`` calls ``poll()`` while the screen is on
    top, then schedules itself again after ``wk.config.refresh`` seconds. One read at a
    time, never overlapping; a failing read never ends the console (``poll`` marks the data
    stale itself); covered by a dialog, it re-reads when uncovered."""

    _data_version: int | None = None
    polls: int = 0  # completed polls, for tests waiting on a live update

    @property
    def wk(self) -> ConsoleApp:
        """The console app, typed (screens reach it through this protocol, not app.py)."""
        return cast(ConsoleApp, self.app)  # type: ignore[attr-defined]

    def read_only_hides(self, action: str) -> bool:
        """True for an action that writes the ledger (``console.keys.ACTING``) on a read-only
        console: hidden from the footer and the palette, its key does nothing."""
        return self.wk.config.read_only and action in keys.ACTING

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not self.read_only_hides(action)

    def on_key(self, event: Any) -> None:
        # A hidden action's key does nothing on its own; on a read-only console the operator
        # is told why instead (the key is not passed on).
        if self.wk.config.read_only and event.key in keys.acting_keys(getattr(self, "SCOPE", "")):
            event.stop()
            refuse_read_only(self)  # type: ignore[arg-type]

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


class LiveHeader:
    """Mixin for a detail screen with a ``HeaderBar``: the header figures are read with the
    screen's own data (``header_read`` in the read thread) and shown with ``header_show``; a
    failed read shows ``STALE since`` (``header_stale``). A runner killed with SIGKILL writes
    nothing, so its status is read on every poll, not only when the ledger changed."""

    summary: reads.Summary | None = None
    stale_since: float | None = None
    _data_version: int | None = None  # shared with PollingScreen, which forgets it on resume

    @staticmethod
    def header_read(ledger: Any, now: float, changed: bool) -> tuple[reads.Summary | None, tuple[bool, str]]:
        """(summary when ``changed`` else None, runner status) — call in the read thread."""
        if changed:
            summary = reads.summary(ledger, now)
            return summary, (summary.runner_up, summary.runner_text)
        return None, reads.runner_status(ledger, now)

    def header_show(self, got: tuple[reads.Summary | None, tuple[bool, str]] | None = None) -> None:
        """Take what ``header_read`` returned (if anything) and draw the header."""
        if got is not None:
            self.stale_since = None
            summary, runner = got
            if summary is not None:
                self.summary = summary
            elif self.summary is not None:
                self.summary = replace(self.summary, runner_up=runner[0], runner_text=runner[1])
        cfg = self.wk.config  # type: ignore[attr-defined]
        self.query_one(HeaderBar).show(self.summary, stale_since=self.stale_since, paused=False,  # type: ignore[attr-defined]
                                       follow=getattr(self, "following", False), read_only=cfg.read_only,
                                       operator=cfg.operator)

    def header_start(self) -> None:
        """On mount: draw the header with the figures of the screen underneath (when it has
        any) until this screen's first read."""
        stack = self.app.screen_stack  # type: ignore[attr-defined]
        self.summary = getattr(stack[-2] if len(stack) > 1 else None, "summary", None)
        self.header_show()

    async def live_read(self, read: Callable[[Any, float], Any], *, have: bool, force: bool) -> tuple[bool, Any]:
        """One poll of the screen's data with the header: in the read thread, ``read(ledger,
        now)`` (``now``: Unix seconds) when the ledger's ``data_version`` moved since the last
        poll, when nothing is shown yet (``have`` False) or when ``force``d; the header figures
        always (``header_read``). Returns ``(True, data)``, or ``(False, None)`` when nothing
        changed; counts the poll (``polls``) and draws the header. A failed read marks the
        header stale and re-raises, for the screen to say so when it has nothing to show."""
        seen = None if force or not have else self._data_version
        now = self.wk.now()  # type: ignore[attr-defined]

        def fetch(ledger: Any) -> tuple[int, Any, bool, Any]:
            dv = ledger.data_version()
            if dv == seen:
                return dv, None, False, self.header_read(ledger, now, False)
            return dv, read(ledger, now), True, self.header_read(ledger, now, True)

        try:
            dv, data, changed, header = await self.wk.reader.call(fetch)  # type: ignore[attr-defined]
        except Exception:
            self.header_stale(now)
            raise
        self._data_version = dv
        self.polls += 1  # type: ignore[attr-defined]
        self.header_show(header)
        return changed, data

    def header_stale(self, now: float) -> None:
        """The read failed: say since when the data is stale (the next poll tries again)."""
        if self.stale_since is None:
            self.stale_since = now
        self.header_show()
