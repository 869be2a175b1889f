"""Runner subprocesses for crash tests: each in its own session, all ended at teardown."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from core.ledger.connection import Ledger
from core.spec.settings import load_settings
from tests.kit.sweep import wait_for

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
FAST_TOML = "heartbeat = 0.2\nlease = 1.0\nsweep_interval = 0.2\nstart_timeout = 5.0\nshutdown_grace = 0.5\n"
QUICK_RETRY = "backoff = { initial = 0.1, factor = 1, max = 0.1, jitter = false }\n"


class Runners:
    """Runner subprocesses this test started (own session each); all ended at teardown."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.specs = tmp / "jobs"
        self.db = tmp / "wk.db"
        self.procs: list[subprocess.Popen] = []
        self._led: Ledger | None = None

    @property
    def led(self) -> Ledger:
        """One connection for the whole test, closed only after the runners stopped.

        A runner opens several connections, and each new ``Ledger`` in a process closes an fd
        on the file (``_create_private``), which drops that process's POSIX locks; a
        connection closed elsewhere then believes it is the last and removes the WAL. So the
        test never opens and closes connections while a runner runs.
        """
        if self._led is None:
            self._led = Ledger(self.db)
        return self._led

    def write(self, toml: str) -> None:
        self.specs.mkdir(exist_ok=True)
        (self.specs / "watchkeeper.toml").write_text(FAST_TOML)
        (self.specs / "jobs.toml").write_text(toml)

    def start(self) -> subprocess.Popen:
        log = open(self.tmp / f"runner{len(self.procs)}.log", "w")
        p = subprocess.Popen([PY, "-m", "console.cli", "run", str(self.specs), "--ledger", str(self.db), "--quiet"],
                             cwd=ROOT, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        self.wait_ready()
        return p

    def wait_ready(self) -> None:
        """Wait until a runner has created and migrated the ledger, registered itself and
        recorded the jobs of the spec folder (``jobs``): a mission's spawn_worker or a trigger
        made before that finds no such job.

        Opening the ledger while a runner is still creating it can leave that runner's
        connection failing with 'disk I/O error' (reported to the ledger's owner), so no
        test connection touches the file before this.
        """
        from core.spec.loader import load_dir
        names = sorted(load_dir(self.specs).jobs) if self.specs.is_dir() else []

        def ready() -> bool:
            if not Path(f"{self.db}-wal").exists():
                return False
            try:
                conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
                try:
                    if conn.execute("SELECT count(*) FROM runners").fetchone()[0] < len(self.procs):
                        return False
                    marks = ",".join("?" * len(names))
                    return not names or conn.execute(f"SELECT count(*) FROM jobs WHERE name IN ({marks})",
                                                     names).fetchone()[0] >= len(names)
                finally:
                    conn.close()
            except sqlite3.Error:
                return False
        assert wait_for(ready, timeout=15), "runner did not start"

    def settings(self):
        return load_settings(self.specs, ledger=str(self.db))

    def query(self, sql: str, params: tuple = ()) -> list[dict]:
        return [dict(r) for r in self.led.query(sql, params)]

    def runs(self, job: str) -> list[dict]:
        return self.query("SELECT * FROM runs WHERE job = ? ORDER BY attempt, id", (job,))

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGCONT)
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait(timeout=10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait(timeout=5)

    def close(self, *, kill_leftovers: bool = True) -> None:
        """Fixture teardown: stop every runner started, close the ledger, and with
        ``kill_leftovers`` SIGKILL the process groups jobs left behind (a runner killed with
        -9 leaves its jobs running; their pgids are in ``runs``)."""
        self.stop_all()
        if self._led is not None:
            self._led.close()
        if not kill_leftovers or not self.db.exists():
            return
        end_leftover_jobs(self.db)


def end_leftover_jobs(db: Path) -> int:
    """SIGKILL what the runners of ledger ``db`` started and left running (a runner killed
    with -9 leaves its jobs and monitors running): every live process whose environment names
    one of its runners (``WATCHKEEPER_RUNNER_ID``, a sh monitor's ``WKM_RUNNER``). Never a
    process group by a number read from the ledger: a job that ended long ago may have left
    its number to another test's process. Returns how many were killed."""
    import psutil

    with Ledger(db) as led:
        ours = {str(r["id"]) for r in led.query("SELECT id FROM runners")}
    me, killed = os.getpid(), 0
    for proc in psutil.process_iter():
        try:
            if proc.pid == me:
                continue
            env = proc.environ()
            if (env.get("WATCHKEEPER_RUNNER_ID") or env.get("WKM_RUNNER")) in ours:
                proc.kill()
                killed += 1
        except (psutil.Error, OSError):
            continue
    return killed
