"""Snapshots of each main view at 80×24 and 120×40, dark and light; high contrast; the
escalations view reduced to 256 and 16 colours in every theme. Time is frozen
(``console_fixtures.NOW``, TZ=UTC) so ages and clocks are deterministic."""

from __future__ import annotations

import io
import time

import pytest
from rich.color import ColorSystem
from rich.console import Console
from rich.segment import Segment
from rich.style import Style

from console.app import ConsoleConfig, WatchkeeperApp
from tests.kit import console_fixtures as cf

#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


VIEWS = {"escalations": "1", "outcomes": "2", "orphans": "3", "jobs": "4"}


@pytest.mark.parametrize("theme", ["dark", "light"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_main_views(snap_compare, tmp_path, view, size, theme):
    path = tmp_path / "wk.db"
    cf.build(path)
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", theme=theme, clock=lambda: cf.NOW,
                                       refresh=3600))

    async def ready(pilot):
        screen = pilot.app.screen
        deadline = time.monotonic() + 10
        while screen.polls == 0 and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await pilot.press(VIEWS[view])
        while (screen.table.VIEW != view or not screen.table.rows_data) and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_run_detail(snap_compare, tmp_path):
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", clock=lambda: cf.NOW, refresh=3600))

    async def ready(pilot):
        from console.screens.detail import DetailScreen

        deadline = time.monotonic() + 10
        while pilot.app.screen.polls == 0 and time.monotonic() < deadline:
            await pilot.pause(0.02)
        pilot.app.push_screen(DetailScreen(ids["failed_run"]))
        while not (isinstance(pilot.app.screen, DetailScreen) and pilot.app.screen.detail) \
                and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)


class ReducedColourApp(WatchkeeperApp):
    """Screenshots as a terminal limited to ``system`` colours shows them (SSH often gives
    256; ``TERM=screen``/``xterm`` gives 16): every colour is reduced the way Rich reduces
    it before writing to such a terminal, then drawn with the export palette."""

    def __init__(self, config: ConsoleConfig, system: ColorSystem) -> None:
        super().__init__(config)
        self.system = system

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        width, height = self.size
        console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                          color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
        console.print(self.screen._compositor.render_update(full=True, screen_stack=self._background_screens,
                                                            simplify=simplify))

        def reduce(style: Style | None) -> Style | None:
            if style is None:
                return None
            return style + Style(color=style.color.downgrade(self.system) if style.color else None,
                                 bgcolor=style.bgcolor.downgrade(self.system) if style.bgcolor else None)
        console._record_buffer[:] = [Segment(s.text, reduce(s.style), s.control) for s in console._record_buffer]
        return console.export_svg(title=title or self.title)


async def _ready(pilot, view: str = "escalations") -> None:
    screen = pilot.app.screen
    deadline = time.monotonic() + 10
    while screen.polls == 0 and time.monotonic() < deadline:
        await pilot.pause(0.02)
    await pilot.press(VIEWS[view])
    while (screen.table.VIEW != view or not screen.table.rows_data) and time.monotonic() < deadline:
        await pilot.pause(0.02)
    await pilot.press("j")  # the cursor row on a row with colour, so cursor vs row shows
    await pilot.pause(0.1)


@pytest.mark.parametrize("view", ["escalations", "outcomes"])
def test_high_contrast(snap_compare, tmp_path, view):
    path = tmp_path / "wk.db"
    cf.build(path)
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", theme="high-contrast", clock=lambda: cf.NOW,
                                       refresh=3600))
    assert snap_compare(app, terminal_size=(80, 24), run_before=lambda p: _ready(p, view))


@pytest.mark.parametrize("theme", ["dark", "light", "high-contrast"])
@pytest.mark.parametrize("colours", [ColorSystem.STANDARD, ColorSystem.EIGHT_BIT], ids=["16", "256"])
def test_escalations_in_reduced_colours(snap_compare, tmp_path, theme, colours):
    path = tmp_path / "wk.db"
    cf.build(path)
    app = ReducedColourApp(ConsoleConfig(ledger=path, operator="ana", theme=theme, clock=lambda: cf.NOW,
                                         refresh=3600), colours)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_ready)


def test_no_color_keeps_every_state_word(tmp_path, monkeypatch):
    """NO_COLOR: Textual's monochrome filter; the states still read as words and symbols."""
    import asyncio

    monkeypatch.setenv("NO_COLOR", "1")
    path = tmp_path / "wk.db"
    cf.build(path)
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", clock=lambda: cf.NOW, refresh=3600))
    assert app.no_color

    async def run() -> str:
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot)
            return app.export_screenshot()
    svg = asyncio.run(run()).replace("&#160;", " ")
    for word in ("▲ CRIT", "◆ WARN", "● open", "✓ acked", "runner up"):
        assert word in svg
