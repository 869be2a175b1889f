"""Shared fixtures. Tests are isolated from the developer's own configuration: no
WATCHKEEPER_* or ANTHROPIC_* variables leak in, and nothing reaches the network."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.ledger.connection import Ledger


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests (real processes, Pilot, tmux) share one xdist group, so under
    ``--dist loadgroup`` at most one of them runs at a time while the other worker takes the
    fast ones: two heavy tests never fight over a 2-core machine's CPU and time out."""
    for item in items:
        if item.get_closest_marker("slow") or item.get_closest_marker("soak"):
            item.add_marker(pytest.mark.xdist_group("heavy"))


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


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    """An empty ledger at ``tmp_path / "wk.db"`` (schema applied), closed after the test. A
    module that needs a filled one defines its own ``ledger``."""
    with Ledger(tmp_path / "wk.db") as led:
        yield led


@pytest.fixture
def rig(tmp_path):
    """Runner subprocesses on ``tmp_path`` (tests.kit.runners.Runners), all ended at teardown."""
    from tests.kit.runners import Runners

    r = Runners(tmp_path)
    yield r
    r.close()
