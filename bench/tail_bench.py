"""``watchkeeper tail`` commit-to-line latency.

Starts ``watchkeeper tail --ledger X`` as a subprocess (its own process group), commits an
escalation with ``core.ledger.escalations.raise_escalation`` inside a ``Ledger.write``, and measures
from the commit returning to the line arriving on tail's stdout. Median of 10 (3 with
--quick). Goal: ≤ 0.5 s (the same live-update goal as the console).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Figure, bench_main, median

GOAL_S = 0.5


def _read_line(proc: subprocess.Popen, buf: bytearray, timeout: float) -> tuple[bytes, float] | None:
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([fd], [], [], left)
        if r:
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            buf += chunk
    at = time.time()
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line, at


def measure(trials: int, tmp: Path) -> list[float]:
    from core.ledger.connection import Ledger
    from core.ledger.escalations import raise_escalation

    db = tmp / "wk.db"
    Ledger(db).close()
    env = {**os.environ, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "tail", "--ledger", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    buf = bytearray()
    out = []
    try:
        time.sleep(1.5)  # let it import and reach its poll loop
        with Ledger(db) as led:
            for i in range(trials + 1):  # the first one is a warm-up
                job = f"bench-job-{i}"
                led.write(lambda conn, job=job: raise_escalation(
                    conn, job=job, kind="failed", severity="critical", reason="bench", run_id=None, owner=None))
                committed = time.time()
                got = _read_line(proc, buf, 10.0)
                if got is None:
                    raise RuntimeError("watchkeeper tail printed nothing within 10 s")
                line, at = got
                if job.encode() not in line:
                    raise RuntimeError(f"unexpected tail line: {line[:200]!r}")
                if i:
                    out.append(at - committed)
                time.sleep(0.137 * (1 + i % 3))  # spread commits over tail's poll phase
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return out


def run(quick: bool = False) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="wk-bench-tail-") as d:
        lat = measure(3 if quick else 10, Path(d))
    m = median(lat)
    return [Figure("tail commit-to-line latency", m * 1000, "ms", None, "", None, f"≤ {GOAL_S * 1000:.0f} ms",
                   m <= GOAL_S, f"median of {len(lat)}; max {max(lat) * 1000:.0f} ms")]


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.tail_bench", run, argv)


if __name__ == "__main__":
    sys.exit(main())
