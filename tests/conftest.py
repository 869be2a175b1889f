"""Shared fixtures. Tests are isolated from the developer's own configuration: no
WATCHKEEPER_* or ANTHROPIC_* variables leak in, and nothing reaches the network."""

from __future__ import annotations

import gc
import inspect
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.ledger.connection import Ledger
from core.ledger.dialect import close_pools
from tests.kit import postgres


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests run in xdist groups of their own under ``--dist loadgroup``: two ``heavy``
    groups (``_heavy_group``) hold the slow tests with real runners, agent workers, tmux and the
    browser (one at a time in each, so no more than two fight over a 2-core machine's CPU); the console driven with Pilot (snapshot
    tests, and every ``async`` test of a module that calls ``run_test``; marked slow here)
    is grouped per module (``pilot:<module>``): one group for all of them ran 10 minutes
    alone. The fast tests fill whichever worker is free; ``make test-fast`` runs them alone.

    PostgreSQL items (marker ``pg``) outside the representative modules
    (``tests.kit.postgres.REPRESENTATIVE``) are also ``soak``: ``make test`` runs the
    representative PostgreSQL lane, ``make soak`` all of it."""
    for item in items:
        if item.get_closest_marker("pg") is not None:
            module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
            if module not in postgres.REPRESENTATIVE:
                item.add_marker(pytest.mark.soak)
        if _drives_the_console(item):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group("pilot:" + item.nodeid.split("::", 1)[0]))
        elif item.get_closest_marker("slow") or item.get_closest_marker("soak"):
            item.add_marker(pytest.mark.xdist_group(_heavy_group(item)))


def _heavy_group(item: pytest.Item) -> str:
    """``heavy:runner`` (tests/runner, tests/sweep: real runners) or ``heavy:other`` (missions'
    agent workers, CLI processes, tmux, the browser). Two chains, not one: run one at a time,
    the heavy tests alone took about 230 s of wall on an idle 2-core machine, longer than the
    rest of the suite; two at once still leave a core to the Pilot and fast tests."""
    folder = item.nodeid.split("/", 2)[1] if item.nodeid.startswith("tests/") else ""
    return "heavy:runner" if folder in ("runner", "sweep") else "heavy:other"


def pytest_collection_finish(session: pytest.Session) -> None:
    """The garbage collector of each test process leaves alone what collection imported
    (``gc.freeze``: every module, the collected items) and runs less often: the Pilot tests
    allocate so much that it ran thousands of times per module and took about a fifth of
    their CPU; it now takes about a twentieth. Nothing here relies on collection timing."""
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


def _drives_the_console(item: pytest.Item) -> bool:
    """A snapshot test (``snap_compare`` drives the app with Pilot), or an ``async`` test in a
    module that starts the console with ``run_test``."""
    if "snap_compare" in getattr(item, "fixturenames", ()):
        return True
    fn = getattr(item, "function", None)
    module = getattr(item, "module", None)
    if fn is None or module is None or not inspect.iscoroutinefunction(fn):
        return False
    source = _SOURCES.get(module.__file__)
    if source is None:
        source = _SOURCES[module.__file__] = Path(module.__file__).read_text(encoding="utf-8")
    return "run_test(" in source


_SOURCES: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("WATCHKEEPER_") or key.startswith("ANTHROPIC_"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("USER", os.environ.get("USER", "tester") or "tester")


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Local time is UTC for the test (TZ=UTC, applied with ``time.tzset``); console test
    modules ask for it with ``pytestmark = pytest.mark.usefixtures("utc")``."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[postgres.Server]:
    """One throw-away PostgreSQL per test session (per xdist worker), see tests/kit/postgres.py."""
    why = postgres.available()
    if why is not None:
        pytest.skip(f"no PostgreSQL here: {why}")
    with postgres.serving() as server:
        yield server


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def ledger_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a test's ledger lives, once per backend: ``tmp_path / "wk.db"`` (SQLite) or the
    URL of a fresh database with the schema on the session's throw-away PostgreSQL."""
    if request.param == "sqlite":
        yield str(tmp_path / "wk.db")
        return
    server: postgres.Server = request.getfixturevalue("pg_server")
    url = server.fresh_database()
    try:
        yield url
    finally:
        close_pools()
        server.drop_database(url)


@pytest.fixture
def ledger(ledger_target: str) -> Iterator[Ledger]:
    """An empty ledger (schema applied) on each backend (``ledger_target``), closed after
    the test. A module that needs a filled one defines its own ``ledger``."""
    with Ledger(ledger_target) as led:
        yield led


@pytest.fixture
def rig(tmp_path):
    """Runner subprocesses on ``tmp_path`` (tests.kit.runners.Runners), all ended at teardown."""
    from tests.kit.runners import Runners

    r = Runners(tmp_path)
    yield r
    r.close()
