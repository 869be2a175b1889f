"""``make bench``: run every benchmark and print one table.

Each row: figure, value, baseline measured in the same run, ratio, goal, met/MISSED. A figure
that misses its goal says MISSED; a benchmark that fails says ERROR with its message.

    python -m bench [--quick] [--json PATH] [--only NAME ...]

``--quick`` runs short versions (fewer runs and trials, a 100,000-run console ledger instead of
1,000,000); ``--json PATH`` also writes the figures as JSON (``-`` for stdout).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bench.common import Figure, table


def _throughput(quick: bool) -> list[Figure]:
    from bench import throughput
    return throughput.run(quick)


def _idle(quick: bool) -> list[Figure]:
    from bench import runner_bench
    return runner_bench.idle(quick)


def _scale(quick: bool) -> list[Figure]:
    from bench import runner_bench
    return runner_bench.scale(quick)


def _ledger(quick: bool) -> list[Figure]:
    from bench import ledger_bench
    return ledger_bench.run(quick)


def _fanout(quick: bool) -> list[Figure]:
    from bench import fanout_bench
    return fanout_bench.run(quick)


def _missions(quick: bool) -> list[Figure]:
    from bench import mission_bench
    return mission_bench.run(quick)


def _tail(quick: bool) -> list[Figure]:
    from bench import tail_bench
    return tail_bench.run(quick)


def _detection(quick: bool) -> list[Figure]:
    """bench/detection.py (sweep engineer): its CASES, median of N trials each."""
    from bench import detection
    trials = 2 if quick else 5
    figs = []
    for name, fn, goal in detection.CASES:
        samples = []
        for i in range(trials):
            with tempfile.TemporaryDirectory(prefix="wk-bench-det-") as tmp:
                samples.append(fn(Path(tmp) / str(i)))
        med = statistics.median(samples)
        figs.append(Figure(f"detection: {name}", med, "s", None, "Airflow 300 s, Prefect 90 s defaults", None,
                           f"≤ {goal:g} s", med <= goal,
                           f"median of {trials}: min {min(samples):.3f}, max {max(samples):.3f} s"))
    return figs


def _judge(quick: bool) -> list[Figure]:
    from bench import judge_bench
    return judge_bench.run(quick)


def _console(quick: bool) -> list[Figure]:
    """bench/console_bench.py (console engineer): generate a ledger, measure in a child."""
    from bench import console_bench as cb
    runs = 100_000 if quick else 1_000_000
    with tempfile.TemporaryDirectory(prefix="wk-bench-console-") as tmp:
        path = Path(tmp) / "bench.db"
        gen_s = cb.generate(path, runs)
        f = cb.measure(path)
    lat = sorted(f["commit_to_screen_s"])
    pages = sorted(f["page_s"])
    page_ms, page_max_ms = sum(pages) / len(pages) * 1000, pages[-1] * 1000
    floor_ms = f["floor_s"] * 1000
    net_ms = page_ms - floor_ms
    where = f"{runs:,}-run ledger (generated in {gen_s:.0f} s)"
    return [
        Figure("console first paint", f["first_paint_s"], "s", 12.0, "DataTable, 100k rows in memory",
               12.0 / f["first_paint_s"], f"< {cb.GOAL_PAINT_S:g} s", f["first_paint_s"] < cb.GOAL_PAINT_S, where),
        Figure("console RSS after first paint", f["rss_after_paint_mb"], "MB", 139.0, "DataTable, 100k rows",
               139.0 / f["rss_after_paint_mb"], f"< {cb.GOAL_RSS_MB:g} MB", f["rss_after_paint_mb"] < cb.GOAL_RSS_MB),
        Figure("console RSS at end", f["rss_end_mb"], "MB", None, "", None, f"< {cb.GOAL_RSS_MB:g} MB",
               f["rss_end_mb"] < cb.GOAL_RSS_MB),
        # Net of what the Pilot harness itself costs per key press (an unbound key, measured
        # in the same run): that part is the test driver, not the console.
        Figure("console PgDn per page (net of Pilot's own key cost)", net_ms, "ms", floor_ms,
               "Pilot: one unbound key", None, f"< {cb.GOAL_PAGE_MS:g} ms", net_ms < cb.GOAL_PAGE_MS,
               f"gross {page_ms:.0f} ms per page (max {page_max_ms:.0f}); "
               f"{f['rows_loaded_after_scroll']} rows held after 60 pages"),
        Figure("console commit-to-screen (max)", lat[-1] * 1000, "ms", None, "", None,
               f"< {cb.GOAL_LATENCY_S * 1000:.0f} ms", lat[-1] < cb.GOAL_LATENCY_S,
               f"median {lat[len(lat) // 2] * 1000:.0f} ms over {len(lat)} commits"),
    ]


def _retention(quick: bool) -> list[Figure]:
    """bench/retention_bench.py: prune 1,000,000 runs to 100,000 beside a running runner."""
    from bench import retention_bench
    return retention_bench.run(quick)


BENCHES: dict[str, Callable[[bool], list[Figure]]] = {
    "throughput": _throughput,
    "idle": _idle,
    "scale": _scale,
    "ledger": _ledger,
    "detection": _detection,
    "fanout": _fanout,
    "missions": _missions,
    "tail": _tail,
    "judge": _judge,
    "console": _console,
    "retention": _retention,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short versions of every benchmark")
    ap.add_argument("--json", metavar="PATH", nargs="?", const="-", default=None,
                    help="JSON instead of the table on stdout; with PATH, the table and JSON written to PATH")
    ap.add_argument("--only", nargs="+", choices=sorted(BENCHES), default=None, help="run only these")
    a = ap.parse_args(argv)
    figures: list[Figure] = []
    errors: dict[str, str] = {}
    started = time.time()
    for name in a.only or list(BENCHES):
        t0 = time.perf_counter()
        print(f"[bench] {name} …", file=sys.stderr, flush=True)
        try:
            figs = BENCHES[name](a.quick)
        except (Exception, SystemExit) as exc:  # one broken benchmark must not hide the others
            traceback.print_exc()
            errors[name] = f"{type(exc).__name__}: {exc}"
            figs = [Figure(f"{name}: ERROR", None, "", note=errors[name][:300], goal="runs", met=False)]
        figures.extend(figs)
        print(f"[bench] {name} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    header = (f"Watchkeeper benchmarks{' (--quick)' if a.quick else ''} — {platform.node()}, "
              f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}")
    missed = [f for f in figures if f.met is False]
    out = f"{header}\n\n{table(figures)}\n\n" + (f"{len(missed)} figure(s) MISSED their goal: "
                                                 + "; ".join(f.name for f in missed) if missed
                                                 else "every goal met")
    if a.json != "-":
        print(out)
    if a.json:
        doc = {"quick": a.quick, "host": platform.node(), "python": platform.python_version(), "started": started,
               "figures": [f.to_dict() | {"result": f.verdict} for f in figures], "errors": errors}
        text = json.dumps(doc, indent=2)
        if a.json == "-":
            print(text)
        else:
            Path(a.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
