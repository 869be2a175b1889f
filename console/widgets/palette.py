"""Command palette entries (ctrl+p or ``:``): every view, every action, and "show outcomes
of job X" for the jobs loaded in the jobs view. Job names are ledger text, so they are
sanitised before they reach the palette."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.safe_text import one_line


class WatchkeeperCommands(Provider):
    """Views and actions of the main screen."""

    def _main(self):
        from console.screens.main import MainScreen

        for screen in reversed(self.app.screen_stack):
            if isinstance(screen, MainScreen):
                return screen
        return None

    def _commands(self) -> list[tuple[str, Callable, str]]:
        main = self._main()
        if main is None:
            return []
        cmds: list[tuple[str, Callable, str]] = [
            ("View: escalations", partial(main.run_action, "view('escalations')"), "1"),
            ("View: outcomes", partial(main.run_action, "view('outcomes')"), "2"),
            ("View: live & orphans", partial(main.run_action, "view('orphans')"), "3"),
            ("View: jobs", partial(main.run_action, "view('jobs')"), "4"),
            ("Acknowledge selected escalation(s)", partial(main.run_action, "acknowledge"), "a"),
            ("Snooze selected escalation(s)", partial(main.run_action, "snooze"), "s"),
            ("Resolve selected escalation(s)", partial(main.run_action, "resolve"), "R"),
            ("Retry selected run", partial(main.run_action, "retry"), "r"),
            ("Abandon selected run", partial(main.run_action, "abandon"), "x"),
            ("Filter…", partial(main.run_action, "filter"), "/"),
            ("Pause / resume live updates", partial(main.run_action, "pause"), "p"),
            ("Follow selected row on/off", partial(main.run_action, "follow"), "f"),
            ("Help: all keys", partial(main.run_action, "help"), "?"),
        ]
        jobs = main.query_one("#jobs")
        for row in jobs.rows_data[:200]:
            name = one_line(row["name"], 60)
            cmds.append((f"Outcomes of job {name}", partial(self._job_outcomes, main, str(row["name"])), ""))
        return cmds

    async def _job_outcomes(self, main, name: str) -> None:
        await main.show_job_outcomes(name)

    async def discover(self) -> Hits:
        for text, cb, key in self._commands():
            yield DiscoveryHit(text, cb, help=f"key {key}" if key else None)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, cb, key in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), cb, text=text, help=f"key {key}" if key else None)
