"""Fan-out wall time: a 3-way fan-out whose sub-tasks sleep 1, 1.5 and 2 s, through the real
runner (parent queued → sub-tasks queued, run in parallel, settled → parent succeeded).

Baseline: the sum of the sub-task times (4.5 s, what running them one after another costs).
Goal: wall time ≈ the slowest sub-task (2 s); counted as met within slowest + 1 s.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from bench.common import Figure, RunnerThread, bench_main, median

SLEEPS = (1.0, 1.5, 2.0)
SLACK_S = 1.0


def one_trial(tmp: Path) -> float:
    from core.ledger.connection import Ledger
    from core.ledger.runs import trigger
    from core.spec.settings import load_settings

    spec_dir = tmp / "specs"
    spec_dir.mkdir()
    tasks = "".join(f'\n[[job.tasks]]\nname = "t{i}"\ncommand = ["/bin/sleep", "{s:g}"]\ntimeout = "30s"\n'
                    for i, s in enumerate(SLEEPS))
    (spec_dir / "fan.toml").write_text(
        '[[job]]\nname = "fan"\nkind = "fanout"\ntimeout = "60s"\nconcurrency = 3\n'
        'intent = "Three parallel sleeps."\nowner = "bench@example.org"\n' + tasks)
    settings = load_settings(spec_dir, ledger=str(tmp / "wk.db"), concurrency=8)
    with RunnerThread(spec_dir, settings), Ledger(settings.ledger) as led:
        t0 = time.time()
        run_id = trigger(led, "fan", actor="bench")
        deadline = time.monotonic() + 60
        while True:
            row = led.one("SELECT state, ended_at FROM runs WHERE id = ?", (run_id,))
            if row["state"] not in ("queued", "spawned", "running", "verifying"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("fan-out did not finish within 60 s")
            time.sleep(0.01)
        if row["state"] != "succeeded":
            raise RuntimeError(f"fan-out ended {row['state']}")
        return row["ended_at"] - t0


def run(quick: bool = False) -> list[Figure]:
    walls = []
    for _ in range(1 if quick else 3):
        with tempfile.TemporaryDirectory(prefix="wk-bench-fan-") as d:
            walls.append(one_trial(Path(d)))
    wall = median(walls)
    total, slowest = sum(SLEEPS), max(SLEEPS)
    return [Figure("fan-out wall time (3 tasks: 1, 1.5, 2 s)", wall, "s", total, "sum of sub-tasks", total / wall,
                   f"≈ slowest ({slowest:g} s, ≤ +{SLACK_S:g} s)", wall <= slowest + SLACK_S,
                   f"median of {len(walls)}: " + ", ".join(f"{w:.2f}" for w in walls))]


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.fanout_bench", run, argv)


if __name__ == "__main__":
    sys.exit(main())
