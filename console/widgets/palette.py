"""Command palette entries (ctrl+p or ``:``), from the one key registry (``console.keys``):
the actions of the screen the palette was opened on, plus what that screen adds through
``palette_extra()`` (the main screen: "Outcomes of job X" and "History of job X" for the
jobs loaded in the jobs view; job names are sanitised there).

This module imports no screen: a screen names its registry scope in ``SCOPE``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console import keys


class WatchkeeperCommands(Provider):
    """The current screen's actions and extra entries."""

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
            cmds += [(text, cb, "") for text, cb in extra()]
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
