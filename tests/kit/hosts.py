"""Simulated hosts for fleet tests: each a runner in its own PID, mount and UTS namespace
(``unshare --pid --fork --mount-proc --uts``) with its own hostname and boot id
(``WATCHKEEPER_BOOT_ID``), all against one ledger. Process ids collide across them (each
namespace numbers from 1) as they do across real machines. Needs root (or user namespaces)
and ``unshare``; ``available()`` says why not."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def available() -> str | None:
    """None when namespaces can be made here, else why not."""
    if shutil.which("unshare") is None:
        return "no unshare"
    got = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--uts", "true"], capture_output=True)
    return None if got.returncode == 0 else f"unshare failed: {got.stderr.decode(errors='replace').strip()}"


class Host:
    """One simulated host: ``name`` (its hostname), the ``unshare`` process (``proc``) whose
    child is the namespace's pid 1 (a shell), whose child is the runner."""

    def __init__(self, name: str, spec_dir: Path, ledger: str, log: Path, *, env: dict[str, str] | None = None,
                 boot_id: str | None = None) -> None:
        """``boot_id``: this host life's boot id (default ``boot-<name>``); a host brought back
        after its namespace ended is a reboot, a new life: give it a new one."""
        self.name = name
        script = (f"hostname {shlex.quote(name)} && {shlex.quote(sys.executable)} -m console.cli run"
                  f" {shlex.quote(str(spec_dir))} --ledger {shlex.quote(ledger)} --quiet & wait")
        self.log = open(log, "a")
        self.proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount-proc", "--uts", "sh", "-c", script], cwd=ROOT,
            start_new_session=True, stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {}), "WATCHKEEPER_BOOT_ID": boot_id or f"boot-{name}"})

    def runner(self) -> psutil.Process | None:
        """The runner process (seen from outside the namespace), once it started."""
        try:
            for p in psutil.Process(self.proc.pid).children(recursive=True):
                if "console.cli" in " ".join(p.cmdline()) and "run" in p.cmdline():
                    return p
        except psutil.Error:
            return None
        return None

    def kill_runner(self) -> int:
        """SIGKILL the runner only (its runs' monitors stay, as after a crash); returns its pid
        as seen from outside."""
        p = self.runner()
        assert p is not None, f"no runner on {self.name}"
        p.send_signal(signal.SIGKILL)
        return p.pid

    def end(self) -> None:
        """End the whole namespace: killing its pid 1 kills everything in it."""
        try:
            for p in psutil.Process(self.proc.pid).children():
                p.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.log.close()
