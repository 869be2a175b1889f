"""The monitor's output says it went over its cap only when it did: a job printing one short
line is not over (the sh monitor leaves an empty tail file behind: its tail drain starts when
the head part ends, which must not count as going over); a job writing past the cap while it
still runs is, under both monitors."""

from __future__ import annotations

import subprocess

import pytest

from core import monitor
from tests.kit import monitors
from tests.kit.sweep import wait_for


@pytest.fixture(params=monitors.KINDS)
def kind(request, monkeypatch):
    monitors.use(monkeypatch, request.param)
    return request.param


def _start(art, cap, cmd):
    monitor.prepare(art)
    return subprocess.Popen(monitor.argv(art, cap, ["sh", "-c", cmd]), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def test_a_short_line_is_not_over_the_cap(tmp_path, kind):
    proc = _start(tmp_path, 8192, "echo sixteen-bytes-line")
    assert proc.wait(timeout=20) == 0
    if kind == "sh":
        assert (tmp_path / "stdout.tail").exists()  # the empty leftover that once fooled `logs -f`
    assert not monitor.over_cap(tmp_path, "stdout")
    assert not monitor.over_cap(tmp_path, "stderr")


def test_output_past_the_cap_is_over_it_while_the_job_runs_and_after(tmp_path, kind):
    gate = tmp_path / "gate"
    proc = _start(tmp_path, 8192, f"head -c 20000 /dev/zero; until [ -e {gate} ]; do sleep 0.02; done")
    try:
        assert wait_for(lambda: monitor.over_cap(tmp_path, "stdout"), timeout=20)
        assert monitor.exit_status(tmp_path) is None
    finally:
        gate.touch()
    assert proc.wait(timeout=20) == 0
    assert monitor.over_cap(tmp_path, "stdout")
