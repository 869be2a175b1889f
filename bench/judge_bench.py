"""The judge's cost of reading the work: one judgement with a full history, per outcome.

Since baselines are recomputed at every judgement (nothing extra is stored), the question is
whether that stays cheap. Two figures, each against a baseline measured in the same run:

* ``judge_run`` end to end on a ledger whose job has ``HISTORY_LIMIT`` (60) judged outcomes
  with 40-line outputs and a measured file: read history from ``job_outcomes``, learn line
  shapes, work counts, file sizes and durations, apply the rules, write the verdict. Baseline:
  the same with empty outputs (durations only, what the judge read before). Goal ≤ 50 ms
  (p50), so the supervisor keeps up with a job finishing every second with room to spare.
* ``rules.evaluate`` alone on facts already in memory, with the history's masked lines cached
  (consecutive judgements of one job; goal ≤ 10 ms) and cold (the first judgement of a job
  after a start, or eval/replay of a new job: 60 × 40 lines to mask; goal ≤ 250 ms).
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Figure, bench_main

GOAL_JUDGE_MS = 50.0
GOAL_EVAL_MS = 10.0
GOAL_COLD_MS = 250.0
LINES = 40


def _output(rng: random.Random, i: int, rich: bool) -> str:
    if not rich:
        return ""
    lines = [f"2026-03-01T02:{i % 60:02d}:{j % 60:02d}Z step {j}: fetched page {j} ({rng.randint(90, 100)} records)"
             for j in range(LINES - 2)]
    lines += [f"exported {rng.randint(12_000, 16_000)} rows to /srv/exports/orders-{i}.csv",
              f"uploaded in {rng.uniform(1, 4):.1f}s"]
    return "\n".join(lines) + "\n"


def _ledger(path: Path, rich: bool, n: int) -> list[int]:
    from core.ledger.connection import Ledger
    from core.supervisor import supervisor
    from tests.kit.supervisor import add_job, new_run, to_verifying

    rng = random.Random(7)
    ids = []
    with Ledger(path / "wk.db") as led:
        add_job(led, path, name="export")
        for i in range(n):
            rid = new_run(led, "export")
            to_verifying(led, rid, stdout=_output(rng, i, rich), duration_s=rng.uniform(40, 50))
            t0 = time.perf_counter()
            supervisor.settle(led, rid, settings=None)
            ids.append(rid)
            if i >= 60:
                _TIMES.setdefault(rich, []).append(time.perf_counter() - t0)
    return ids


_TIMES: dict[bool, list[float]] = {}


def _evaluate_ms(rich: bool, trials: int, *, cold: bool) -> float:
    from core.supervisor import evidence
    from core.supervisor.rules import OutcomeFacts, evaluate

    rng = random.Random(3)
    hist = [OutcomeFacts(run_id=i, job="export", duration_s=rng.uniform(40, 50), stdout=_output(rng, i, rich))
            for i in range(60)]
    case = OutcomeFacts(run_id=99, job="export", duration_s=45.0, stdout=_output(rng, 99, rich))
    samples = []
    for _ in range(trials):
        if cold:
            evidence._lines.cache_clear()
        t0 = time.perf_counter()
        evaluate(case, hist, None)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


def run(quick: bool = False) -> list[Figure]:
    n = 80 if quick else 120
    _TIMES.clear()
    with tempfile.TemporaryDirectory(prefix="wk-bench-judge-") as d:
        for rich in (False, True):
            sub = Path(d) / ("rich" if rich else "plain")
            sub.mkdir()
            _ledger(sub, rich, n)
    rich_ms = statistics.median(_TIMES[True]) * 1000
    plain_ms = statistics.median(_TIMES[False]) * 1000
    trials = 10 if quick else 40
    ev_rich, ev_plain = _evaluate_ms(True, trials, cold=False), _evaluate_ms(False, trials, cold=False)
    ev_cold = _evaluate_ms(True, trials, cold=True)
    return [
        Figure("judge: settle + judge_run with a 60-outcome history", rich_ms, "ms", plain_ms,
               "same, empty outputs (durations only)", plain_ms / rich_ms, f"≤ {GOAL_JUDGE_MS:g} ms",
               rich_ms <= GOAL_JUDGE_MS, f"p50 of {len(_TIMES[True])} judgements, {LINES}-line outputs"),
        Figure("judge: rules.evaluate, history already masked", ev_rich, "ms", ev_plain, "same, durations only",
               ev_plain / ev_rich, f"≤ {GOAL_EVAL_MS:g} ms", ev_rich <= GOAL_EVAL_MS,
               f"median of {trials}; a job's consecutive judgements (the supervisor)"),
        Figure("judge: rules.evaluate, nothing masked yet", ev_cold, "ms", ev_plain, "same, durations only",
               ev_plain / ev_cold, f"≤ {GOAL_COLD_MS:g} ms", ev_cold <= GOAL_COLD_MS,
               f"median of {trials}; first judgement of a job after a start, eval, replay"),
    ]


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.judge_bench", run, argv)


if __name__ == "__main__":
    sys.exit(main())
