"""Both per-run monitors under one test: the C one (``watchkeeper-monitor``, built by ``make``)
and the sh one (``core.monitor.SCRIPT``, used where the binary is absent)."""

from __future__ import annotations

import pytest

from core import monitor

KINDS = ("c", "sh")


def use(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Make this test's spawns (and the runners it starts, through the environment) use the
    ``kind`` monitor; a ``c`` test is skipped where no binary was built (no C compiler)."""
    if kind == "c" and monitor._program("") is None:
        pytest.skip("no watchkeeper-monitor binary (`make .venv/.installed` builds it with cc)")
    monkeypatch.setenv(monitor.CHOICE, kind)
