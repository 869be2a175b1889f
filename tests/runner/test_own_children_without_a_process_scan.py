"""The runner finds its own children (the zombies it reaps as child subreaper, every sweep
pass) from ``/proc/self/task/*/children``, never by reading every process on the machine
(psutil's ``children()``), which cost an idle runner most of its CPU on a busy host."""

from __future__ import annotations

import subprocess
import threading

import psutil

from core.runner.reaper import own_children


def test_children_of_every_thread_are_found_without_psutil_scanning(monkeypatch):
    procs = [subprocess.Popen(["sleep", "5"])]
    t = threading.Thread(target=lambda: procs.append(subprocess.Popen(["sleep", "5"])))
    t.start()
    t.join()
    try:
        expected = sorted(c.pid for c in psutil.Process().children())
        assert {p.pid for p in procs} <= set(expected)

        def scan(*_a, **_k):
            raise AssertionError("psutil's children() reads every process's stat file")
        monkeypatch.setattr(psutil.Process, "children", scan)
        assert own_children() == expected
    finally:
        for p in procs:
            p.kill()
            p.wait()
