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


def _fleet(quick: bool) -> list[Figure]:
    from bench import fleet_bench
    return fleet_bench.run(quick)


def _idle(quick: bool) -> list[Figure]:
    from bench import runner_bench
    return runner_bench.idle(quick)


def _monitors(quick: bool) -> list[Figure]:
    from bench import monitor_bench
    return monitor_bench.run(quick)


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
    """bench/console_bench.py: generate a ledger, measure the console in a child process and a
    bare Textual app plus the direct page queries (the baselines) in the same run."""
    from bench import console_bench as cb
    runs = 100_000 if quick else 1_000_000
    with tempfile.TemporaryDirectory(prefix="wk-bench-console-") as tmp:
        path = Path(tmp) / "bench.db"
        gen_s = cb.generate(path, runs)
        base = cb.baseline(path)
        f = cb.measure(path)
    return _console_figures("console", f, base, f"{runs:,}-run ledger (generated in {gen_s:.0f} s)")


def _console_pg(quick: bool) -> list[Figure]:
    """The console bench on a 1,000,000-run PostgreSQL ledger (``--quick``: 100,000), filled by
    generating the SQLite ledger and ``ledger copy``; baselines on the same PostgreSQL ledger."""
    from bench import console_bench as cb
    from bench.common import pg_server
    runs = 100_000 if quick else 1_000_000
    with pg_server() as server, tempfile.TemporaryDirectory(prefix="wk-bench-console-pg-") as tmp:
        if server is None:
            return [Figure("console on PostgreSQL", None, "", note="skipped: no PostgreSQL server binaries"
                           " (make postgres installs them)")]
        url = server.fresh_database()
        fill = cb.generate_pg(url, runs, Path(tmp))
        base = cb.baseline(url)
        f = cb.measure(url)
    fill_s = fill["generate_s"] + fill["copy_s"]
    where = f"{runs:,}-run PostgreSQL ledger"
    figures = [Figure(f"console PostgreSQL: fill {runs:,} runs", fill_s, "s",
                      note=f"generate SQLite {fill['generate_s']:.0f} s + ledger copy {fill['copy_s']:.0f} s"
                           f" ({fill['rows']:,.0f} rows, {fill['rows'] / fill['copy_s']:,.0f} rows/s)")]
    return figures + _console_figures("console PostgreSQL", f, base, where)


def _console_figures(prefix: str, f: dict, base: dict, where: str) -> list[Figure]:
    from bench import console_bench as cb
    baselines = {
        "first paint": (base["bare_paint_s"] + base["first_page_s"], "bare Textual app's first paint + direct first page"),
        "PgDn per page (mean)": (base["bare_key_s"] + base["page_s"], "one key on a bare app + direct page query"),
        "G: jump to the last row": (base["bare_key_s"] + base["last_page_s"], "one key on a bare app + direct last page"),
        "RSS after first paint": (base["bare_rss_mb"], "bare Textual app"),
        "RSS at end": (base["bare_rss_mb"], "bare Textual app"),
        "commit → screen (max)": (cb.POLL_S, "one poll interval"),
    }
    figures = []
    for name, value, goal, unit in cb.goals(f, base):
        b, what = baselines[name]
        b_shown = b * 1000 if unit == "ms" else b
        figures.append(Figure(f"{prefix} {name}", value, unit, b_shown, what, b_shown / value if value else None,
                              f"≤ {goal:.2f} {unit} ({goal / b_shown:.1f}× baseline)", value <= goal, where))
    return figures


def _retention(quick: bool) -> list[Figure]:
    """bench/retention_bench.py: prune 1,000,000 runs to 100,000 beside a running runner."""
    from bench import retention_bench
    return retention_bench.run(quick)


BENCHES: dict[str, Callable[[bool], list[Figure]]] = {
    "throughput": _throughput,
    "idle": _idle,
    "fleet": _fleet,
    "scale": _scale,
    "monitors": _monitors,
    "ledger": _ledger,
    "detection": _detection,
    "fanout": _fanout,
    "missions": _missions,
    "tail": _tail,
    "judge": _judge,
    "console": _console,
    "console-pg": _console_pg,
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
