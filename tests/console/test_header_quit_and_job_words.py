"""Console defects a new user and an adversarial tester found (issue 13 review): evidence that
never says "printed nothing" for a run that printed, columns sized to content, `q` in `up`
asks first, next runs and success rates the CLI agrees with, the missions layout, a header
that keeps READ-ONLY, `x` refused on a finished run, hostile names shown escaped, one age
style."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from console.app import ConsoleConfig, WatchkeeperApp
from console.screens.main import MainScreen
from core.ledger.connection import Ledger
from core.supervisor.policy.words import next_run_word
from tests.kit import console_fixtures as cf
from tests.kit.pilot import TEST_REFRESH_S, screen_text, until

#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "wk.db"
    cf.build(path)
    return path


def make_app(path: Path, **kw) -> WatchkeeperApp:
    kw.setdefault("operator", "carol")
    kw.setdefault("clock", lambda: cf.NOW)
    return WatchkeeperApp(ConsoleConfig(ledger=path, refresh=TEST_REFRESH_S, **kw))


async def loaded(pilot) -> MainScreen:
    main = pilot.app.screen
    await until(pilot, lambda: isinstance(main, MainScreen) and main.polls > 0 and main.table.rows_data)
    return main


# 1. evidence ------------------------------------------------------------------------------------
async def test_preview_keeps_the_output_the_reason_quotes_across_ledger_changes(db, monkeypatch):
    with Ledger(db) as led:
        def tx(c):
            rid = cf.add_run(led, "myjob", state="failed", ended_at=cf.NOW - 1, exit_code=7, reason="exit_code",
                             verdict_reason='myjob exited with code 7; last output: "hi"')
            c.execute("UPDATE job_outcomes SET stdout_head = 'hi' WHERE run_id = ?", (rid,))
        led.write(tx)
    app = make_app(db)
    async with app.run_test(size=(120, 30)) as pilot:
        main = await loaded(pilot)
        await pilot.press("2")  # outcomes: newest first, myjob on top
        await until(pilot, lambda: main.table.VIEW == "outcomes" and main.table.current()
                    and main.table.current().job == "myjob")
        await until(pilot, lambda: "└ hi" in screen_text(app))
        assert "printed nothing" not in screen_text(app)
        # The ledger changes while the evidence cannot be read again: the line stays.
        from core.ledger import reads

        def broken(*a, **k):
            raise RuntimeError("database is locked")

        monkeypatch.setattr(reads, "run_evidence", broken)
        changes = main._changes
        with Ledger(db) as led:
            led.write(lambda c: c.execute("UPDATE jobs SET updated_at = updated_at + 1"))
        await until(pilot, lambda: main._changes > changes)
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "└ hi" in text and "no output recorded" not in text and "printed nothing" not in text


# 6 + 9. header -------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [80, 120])
async def test_header_keeps_read_only_and_uses_the_table_age_style(db, width):
    with Ledger(db) as led:  # a stalled runner: heartbeat 43 s old, process (ours) alive
        import os

        import psutil

        led.write(lambda c: c.execute(
            "UPDATE runners SET heartbeat_at = ?, pid = ?, pid_create_time = ?, hostname = ? WHERE id = 'r1'",
            (cf.NOW - 43, os.getpid(), psutil.Process().create_time(), __import__("core.liveness").liveness.hostname())))
    app = make_app(db, read_only=True, operator="root")
    async with app.run_test(size=(width, 24)) as pilot:
        await loaded(pilot)
        from console.widgets.header_bar import HeaderBar

        header = lambda: app.screen.query_one(HeaderBar).render().plain  # noqa: E731
        await until(pilot, lambda: "runner stalled for 43s" in header())
        text = header()
        assert "READ-ONLY" in text and len(text) <= width - 2
        if width == 120:
            assert "as root" in text


# 7. x on a finished run -------------------------------------------------------------------------
async def test_abandon_on_a_finished_run_is_refused_up_front(tmp_path):
    from console.screens.detail import DetailScreen
    from console.screens.dialogs import ConfirmScreen

    path = tmp_path / "wk.db"
    ids = cf.build(path)
    app = make_app(path)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await loaded(pilot)
        app.push_screen(DetailScreen(ids["ok_run"]))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        await pilot.press("x")
        await until(pilot, lambda: any("nothing to abandon" in n.message for n in app._notifications))
        assert not isinstance(app.screen, ConfirmScreen)
        assert any(f"run {ids['ok_run']} already ended" in n.message for n in app._notifications)


# 8. hostile names shown escaped ---------------------------------------------------------------
async def test_names_owners_files_and_output_show_escaped(db):
    name, owner, src = "bad\x1b[31mred\u202e", "[bold]own\u202eer", "/specs/\u202egnp.toml"
    with Ledger(db) as led:
        def tx(c):
            cf._job(led, name, "0 * * * *", owner=owner)
            rid = cf.add_run(led, name, state="failed", ended_at=cf.NOW - 1, exit_code=1, reason="exit_code")
            c.execute("UPDATE job_outcomes SET stdout_head = ? WHERE run_id = ?",
                      ("title \x1b]0;PWNED\x07 set", rid))
            cf.add_escalation(led, name, "retries_exhausted", "critical", run_id=rid, last_seen=cf.NOW)
            c.execute("UPDATE escalations SET owner = ? WHERE job = ?", (owner, name))
            c.execute("INSERT INTO invalid_specs (key, source, job, line, message, text, first_seen, last_seen)"
                      " VALUES (?,?,?,?,?,?,?,?)", (src + "#", src, "", 3, "bad", f"{src}:3: bad", cf.NOW, cf.NOW))
        led.write(tx)
    app = make_app(db)
    async with app.run_test(size=(160, 40)) as pilot:
        main = await loaded(pilot)
        cells = [[t.plain for t in main.table.cells(r)] for r in main.table.rows_data]
        assert any("[bold]own\\u202eer" in c and "bad\\x1b[31mred\\u202e" in c for c in cells)
        await pilot.press("2")
        await until(pilot, lambda: main.table.VIEW == "outcomes" and main.table.current()
                    and main.table.current().job == name)
        await until(pilot, lambda: "PWNED" in screen_text(app))
        text = screen_text(app)
        assert "bad\\x1b[31mred\\u202e" in text and "\\x1b]0;PWNED\\x07" in text
        await pilot.press("4")
        await until(pilot, lambda: main.table.VIEW == "jobs" and main.table.rows_data)
        await until(pilot, lambda: "\\u202egnp.toml" in screen_text(app))  # the invalid spec's file


# 2. columns sized to content --------------------------------------------------------------------
@pytest.mark.parametrize("width", [80, 120])
async def test_job_kind_and_owner_are_whole_before_the_why_takes_the_rest(db, width):
    with Ledger(db) as led:
        def tx(c):
            rid = cf.add_run(led, "self-destruct-test", state="failed", ended_at=cf.NOW - 2, exit_code=1,
                             reason="exit_code")
            cf.add_escalation(led, "self-destruct-test", "false_claim", "critical", run_id=rid, last_seen=cf.NOW,
                              reason="the handoff claims out/report.csv but the file does not exist " * 3)
            c.execute("UPDATE escalations SET owner = 'search-team@example.com' WHERE job = 'self-destruct-test'")
            cf.add_run(led, "orders-export-nightly", state="succeeded", ended_at=cf.NOW - 1, exit_code=0,
                       reason="exit_code")
        led.write(tx)
    app = make_app(db)
    async with app.run_test(size=(width, 24)) as pilot:
        main = await loaded(pilot)

        def shown(table) -> dict[str, int]:
            w = table.scrollable_content_region.width
            cols = ("sel",) + tuple(c.key for c in table._columns(w))
            return dict(zip(cols, table._column_widths(w), strict=True))

        widths = shown(main.table)
        assert widths["job"] >= len("self-destruct-test")
        assert widths["kind"] >= len("false_claim")
        assert widths["owner"] >= len("search-team")
        if width == 120:
            assert widths["why"] >= 20  # the why takes the rest
        await pilot.press("2")
        await until(pilot, lambda: main.table.VIEW == "outcomes" and main.table.rows_data)
        assert shown(main.table)["job"] >= len("orders-export-nightly")


# 3. q in up asks first ---------------------------------------------------------------------------
async def test_quit_in_up_asks_first_with_runs_in_flight_and_stops_the_runner_first(db):
    from console.screens.dialogs import ConfirmScreen

    with Ledger(db) as led:
        led.write(lambda c: [cf.add_run(led, "report", state="running", ended_at=None, lineage=f"fly{i}")
                             for i in range(2)])
    stopped: list[bool] = []
    app = make_app(db, stop_runner=lambda: stopped.append(app.is_running))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        text = " ".join(screen_text(app).split())
        assert "runs in flight" in text and "stop the runner" in text
        # the default stop leaves them to their monitors; the next runner re-attaches them
        assert "keep running under their monitors" in text and "interrupted" not in text
        assert app.is_running and not stopped
        await pilot.press("n")  # a second q (back, then quit) no longer stops anything unasked
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        assert not stopped
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: stopped)
    assert stopped == [True]  # the runner was told to stop while the console was still up


@pytest.mark.parametrize(("mode", "words"), [("drain", "waits for them to finish"), ("kill", "ended now (--kill)")])
async def test_quit_question_says_what_the_stop_mode_does_with_runs_in_flight(db, mode, words):
    from console.screens.dialogs import ConfirmScreen

    with Ledger(db) as led:
        led.write(lambda c: cf.add_run(led, "report", state="running", ended_at=None, lineage="fly"))
    app = make_app(db, stop_runner=lambda: None, stop_mode=mode)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        text = " ".join(screen_text(app).split())
        assert "runs in flight" in text and words in text and "monitors" not in text


async def test_quit_without_an_embedded_runner_quits_at_once(db):
    app = make_app(db)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running)


async def test_ctrl_c_quits_as_q_does_asking_first_in_up(db):
    """Textual answers ctrl+c with a hint to press another key; an operator's ctrl+c stops a
    terminal program, and in ``up`` it asks first, as ``q`` does."""
    from console.screens.dialogs import ConfirmScreen

    stopped: list[bool] = []
    app = make_app(db, stop_runner=lambda: stopped.append(True))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("ctrl+c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "stop the runner" in " ".join(screen_text(app).split()) and not stopped
        await pilot.press("y")
        await until(pilot, lambda: stopped)
    plain = make_app(db)
    async with plain.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not plain.is_running)


# 4. next runs and success rates agree with the CLI ------------------------------------------------
def _jobs_cli(path: Path, now: float) -> dict[str, str]:
    from click.testing import CliRunner

    from console.cli.main import cli

    out = CliRunner().invoke(cli, ["jobs", "--ledger", str(path)], catch_exceptions=False).output
    return {ln.split()[0]: ln for ln in out.splitlines()[1:] if ln and not ln.startswith(" ")}


def test_next_run_is_one_answer_for_breaker_pause_and_once(tmp_path):
    import json as _json

    from core.ledger import reads

    path = tmp_path / "wk.db"
    cf.build(path)
    now = time.time()
    with Ledger(path) as led:
        def tx(c):
            cf._job(led, "flaky", None, every=5)
            # 150 s: "in 2m" from here and from the CLI that reads the clock up to 29 s later.
            c.execute("UPDATE jobs SET breaker_state = 'open', breaker_until = ? WHERE name = 'flaky'", (now + 150,))
            cf._job(led, "held", None, every=5)
            c.execute("UPDATE jobs SET paused_at = ?, paused_by = 'operator:root' WHERE name = 'held'", (now - 10,))
            cf._job(led, "one-shot", None)
            spec = {"name": "one-shot", "command": ["true"], "once": True,
                    "at": __import__("datetime").datetime.fromtimestamp(now + 35, tz=__import__("datetime").UTC).isoformat()}
            c.execute("UPDATE jobs SET spec = ? WHERE name = 'one-shot'", (_json.dumps(spec),))
        led.write(tx)
        rows = {r.name: r for r in reads.jobs_page(led, now=now, limit=100).rows}
    assert rows["flaky"].next_run >= now + 150 and rows["flaky"].next_held == "breaker"
    assert rows["held"].next_run is None and next_run_word(None, "paused", now) == "paused"
    assert abs(rows["one-shot"].next_run - (now + 35)) < 1
    cli = _jobs_cli(path, now)
    for name in ("flaky", "held"):
        r = rows[name]
        assert next_run_word(r.next_run, r.next_held, now) in cli[name]
    assert "in 2m" in cli["flaky"] and "paused" in cli["held"] and "in 3" in cli["one-shot"]  # not "-"


def test_success_rate_counts_each_lineage_by_its_final_attempt(tmp_path):
    from core.ledger import reads

    path = tmp_path / "wk.db"
    cf.build(path)
    with Ledger(path) as led:
        def tx(c):
            cf._job(led, "rate-limited-agent", None, every=60)
            cf._job(led, "partial-job", None, every=60)
            for i in range(3):
                cf.add_run(led, "rate-limited-agent", state="failed", ended_at=cf.NOW - 100 + i * 10, attempt=1,
                           lineage=f"rl{i}", exit_code=1, status="failed")
                cf.add_run(led, "rate-limited-agent", state="succeeded", ended_at=cf.NOW - 95 + i * 10, attempt=2,
                           lineage=f"rl{i}", exit_code=0)
                cf.add_run(led, "partial-job", state="succeeded", ended_at=cf.NOW - 90 + i, lineage=f"p{i}",
                           exit_code=0, status="partial")
        led.write(tx)
        rows = {r.name: r for r in reads.jobs_page(led, now=cf.NOW, limit=100).rows}
        hist = reads.job_history(led, "rate-limited-agent", now=cf.NOW)
    assert rows["rate-limited-agent"].success_rate == 1.0
    assert rows["partial-job"].success_rate == 1.0
    assert reads.lineage_success_rate(hist.runs) == (1.0, 3)


def test_history_of_a_paused_job_has_no_next_run():
    from console.screens.history import next_run_text

    assert next_run_text(None, None, cf.NOW, "paused").startswith("none: paused")
    assert "trial run" in next_run_text(cf.NOW + 60, None, cf.NOW, "breaker")
