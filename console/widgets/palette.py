"""Command palette entries (ctrl+p or ``:``), from the one key registry (``console.keys``):
the actions of the screen the palette was opened on, "History of job X" for every job in the
ledger on every screen (the app's ``open_job_history``), plus what that screen adds through
``palette_extra(jobs)`` (the main screen: "Outcomes of job X"). The job names are read from
the ledger each time the palette opens (sanitised for display; the raw name is acted on).

This module imports no screen: a screen names its registry scope in ``SCOPE``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console import keys
from console.safe_text import escaped_line
from core.ledger.runs import job_names

#: The most jobs the palette lists (each twice on the main screen: outcomes and history).
JOBS_OFFERED = 500


class WatchkeeperCommands(Provider):
    """The current screen's actions, the job entries and the screen's extra entries."""

    jobs: list[str] = []

    async def startup(self) -> None:
        """Read the job names once per opening (the app's reader thread: never the UI's)."""
        reader = getattr(self.app, "reader", None)
        try:
            self.jobs = (await reader.call(job_names))[:JOBS_OFFERED] if reader is not None else []
        except Exception:  # a ledger that cannot be read now: the actions are still offered
            self.jobs = []

    def _commands(self) -> list[tuple[str, Callable, str]]:
        screen = self.screen
        scope = getattr(screen, "SCOPE", "")
        # What the screen hides (check_action False: another view's action, or any action that
        # writes on a read-only console) is not offered here either.
        check = getattr(screen, "check_action", None)
        cmds: list[tuple[str, Callable, str]] = [
            (text, partial(screen.run_action, action), key) for text, action, key in keys.palette(scope)
            if check is None or check(action, ()) is not False]
        extra = getattr(screen, "palette_extra", None)
        if extra is not None:
            cmds += [(text, cb, "") for text, cb in extra(self.jobs)]
        history = getattr(self.app, "open_job_history", None)
        if history is not None:
            cmds += [(f"History of job {escaped_line(name, 60)}", partial(history, name), "") for name in self.jobs]
        return cmds

    async def discover(self) -> Hits:
        for text, cb, key in self._commands():
            yield DiscoveryHit(text, cb, help=f"key {key}" if key else None)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, cb, key in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), cb, text=text, help=f"key {key}" if key else None)
