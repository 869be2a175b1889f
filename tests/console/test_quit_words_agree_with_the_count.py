"""The quit question in ``up`` says what happens to the runs in flight in words that agree
with their number: "1 run in flight: it keeps running", "3 runs in flight: they keep running"."""

from __future__ import annotations

from console.app import quit_detail


def test_one_run_is_it_and_several_are_they():
    one = quit_detail(1, "leave")
    assert one.startswith("1 run in flight: it keeps running under its monitor;")
    assert "re-attaches it and records how it ends." in one
    several = quit_detail(3, "leave")
    assert several.startswith("3 runs in flight: they keep running under their monitors;")
    assert "re-attaches them and records how they end." in several
    assert quit_detail(1, "kill").startswith("1 run in flight: it is ended now (--kill)")
    assert quit_detail(2, "drain").startswith("2 runs in flight: the runner waits for them to finish")
    assert quit_detail(0, "leave").startswith("No run is in flight.")


async def test_the_confirm_dialog_rereads_a_live_detail_while_it_is_up():
    from textual.app import App
    from textual.widgets import Static

    from console.screens.dialogs import ConfirmScreen

    counts = iter([0, 0, 2])
    answers: list[bool | None] = []

    async def live() -> str:
        return quit_detail(next(counts, 2), "leave")

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(ConfirmScreen("Quit and stop the runner?", quit_detail(0, "leave"), live_detail=live),
                             answers.append)

    app = Host()
    async with app.run_test() as pilot:
        screen = app.screen
        assert isinstance(screen, ConfirmScreen)
        screen.LIVE_DETAIL_S = 0.01  # instance only: the class keeps its one second
        screen.on_mount()
        detail = screen.query_one("#detail", Static)
        for _ in range(200):
            if "2 runs in flight" in str(detail.render()):
                break
            await pilot.pause(0.02)
        assert "2 runs in flight: they keep running" in str(detail.render())
        await pilot.press("n")
        await pilot.pause()
    assert answers == [False]
