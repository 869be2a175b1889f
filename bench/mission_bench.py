"""Mission hand-off latency: a five-step scripted pipeline (each worker sleeps 0.5 s) through
the real runner. For each step, the time from a worker run's end to the next worker's run
being queued: the supervisor program settles and verifies the worker, wakes the coordinator
(one scripted turn: a Python process) and queues the next worker.

Baseline: the mission loop's idle interval (``MISSION_IDLE_S``), what a hand-off would cost
if the program only polled instead of being woken when a run finishes. Goal: median below
it. Also counted: coordinator turns taken, which must equal the steps + 1 (no turn is spent
while waiting).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Figure, RunnerThread, bench_main, median

STEPS = 5
WORK_S = 0.5
COORDINATOR = """
import json, sys
doc = json.load(sys.stdin)
n = len(doc["workers"])
if n < {steps}:
    call = {{"name": "spawn_worker", "input": {{"worker": "step", "task": f"step {{n + 1}}"}}}}
    print(json.dumps({{"tool_calls": [call]}}))
else:
    print(json.dumps({{"tool_calls": [{{"name": "report", "input": {{"text": "done"}}}},
                                    {{"name": "close_mission", "input": {{}}}}]}}))
"""
WORKER = ("import json, os, time; time.sleep({work}); json.dump({{'status': 'success', 'result': 'ok', "
          "'confidence': 1.0}}, open(os.environ['WATCHKEEPER_HANDOFF'], 'w'))")


def one_trial(tmp: Path) -> tuple[list[float], int, float]:
    from core.ledger import missions as ml
    from core.ledger.connection import Ledger
    from core.mission import actions as mactions
    from core.spec.mission import load_mission_file
    from core.spec.settings import load_settings

    spec_dir = tmp / "specs"
    (spec_dir / "missions").mkdir(parents=True)
    (spec_dir / "missions" / "coordinator.py").write_text(COORDINATOR.format(steps=STEPS))
    (spec_dir / "missions" / "chain.toml").write_text(
        f'name = "chain"\ncoordinator = "scripted"\ncommand = ["{sys.executable}", "coordinator.py"]\n'
        'workers = ["step"]\n[budget]\nturns = 20\n')
    (spec_dir / "step.toml").write_text(
        f'name = "step"\ncommand = ["{sys.executable}", "-c", {json.dumps(WORKER.format(work=WORK_S))}]\n'
        'timeout = "30s"\n')
    settings = load_settings(spec_dir, ledger=str(tmp / "wk.db"))
    definition = load_mission_file(spec_dir / "missions" / "chain.toml").missions["chain"]
    with RunnerThread(spec_dir, settings), Ledger(settings.ledger) as led:
        t0 = time.time()
        mid = mactions.start(led, "a chain", definition=definition, who="bench")
        deadline = time.monotonic() + 120
        while ml.get(led.conn, mid)["state"] != "awaiting_approval":
            if time.monotonic() > deadline:
                raise RuntimeError("mission did not finish within 120 s")
            time.sleep(0.02)
        wall = time.time() - t0
        runs = led.query("SELECT created_at, ended_at FROM runs WHERE job = 'step' ORDER BY id")
        turns = ml.get(led.conn, mid)["turns"]
    gaps = [b["created_at"] - a["ended_at"] for a, b in zip(runs, runs[1:], strict=False)]
    return gaps, turns, wall


def run(quick: bool = False) -> list[Figure]:
    from core.runner.runner import MISSION_IDLE_S

    gaps: list[float] = []
    turns: list[int] = []
    walls: list[float] = []
    for _ in range(1 if quick else 3):
        with tempfile.TemporaryDirectory(prefix="wk-bench-mission-") as d:
            g, t, w = one_trial(Path(d))
            gaps += g
            turns.append(t)
            walls.append(w)
    hand = median(gaps)
    return [
        Figure(f"mission hand-off (worker end → next worker queued, {STEPS}-step chain)", hand, "s", MISSION_IDLE_S,
               "polling interval", MISSION_IDLE_S / hand if hand else None, f"< {MISSION_IDLE_S:g} s",
               hand < MISSION_IDLE_S, f"{len(gaps)} hand-offs: max {max(gaps):.3f} s; wall {median(walls):.2f} s "
               f"for {STEPS * WORK_S:g} s of work"),
        Figure("coordinator turns per mission (steps + 1 expected)", float(max(turns)), "turns", float(STEPS + 1),
               "one turn per result", None, f"= {STEPS + 1}", all(t == STEPS + 1 for t in turns),
               "no turn is spent while workers run"),
    ]


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.mission_bench", run, argv)


if __name__ == "__main__":
    sys.exit(main())
