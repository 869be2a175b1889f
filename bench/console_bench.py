"""Console benchmark: a generated 1,000,000-run ledger, the console's first paint time and
RSS, scrolling, and commit-to-screen latency.

Every goal is a ratio against a baseline measured in the same run on the same machine, so the
verdict does not depend on how fast the machine is (a 2-core CI host with a slow spawn is
judged against its own spawn):

- first paint ≤ 3 × (a bare Textual app's first paint from spawn + the direct first-page query);
- one PgDn ≤ 3 × (one key press on a bare Textual app + the direct query of a page there);
- G ≤ 3 × (one key press on a bare app + the direct query of the last page);
- RSS ≤ 2.5 × the bare Textual app's RSS;
- a commit shows within 2 poll intervals.

    python -m bench.console_bench [--runs N] [--ledger PATH] [--keep] [--postgres]

``--postgres`` measures the same on a PostgreSQL ledger (a throw-away server from
``tests/kit/postgres.py``): the SQLite ledger is generated as above and moved with
``watchkeeper ledger copy`` (``core.ledger.copy.copy_ledger``, PostgreSQL ``COPY``); the
baseline's direct queries then run on that PostgreSQL ledger, in the same run.

Figures come from a child process (so RSS is the console's own) running the app headless
at 120×40 with the default 0.25 s poll. First paint is what a user waits for: from the
moment the parent starts the child process (interpreter start, imports, ledger open, first
reads) to the first frame drawn with rows; the child also reports how that splits.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import GENERATED_STATES, INSERT_FINISHED_RUN, finished_run, insert_jobs
from core.ledger.connection import Ledger

#: Each goal is this many times its baseline (see the module docstring).
RATIO_PAINT = 3.0
RATIO_PAGE = 3.0
RATIO_RSS = 2.5
POLL_S = 0.25  # the console's default poll; a commit must show within two of them
GOAL_LATENCY_S = 2 * POLL_S


def generate(path: Path, runs: int, *, jobs: int = 50, seed: int = 7) -> float:
    """Write ``runs`` finished runs (with outcomes), ``jobs`` jobs and a few escalations.

    Returns seconds taken. Bulk inserts with executemany in one transaction; indexes exist
    from the schema, as in a real ledger.
    """
    rng = random.Random(seed)
    t0 = time.perf_counter()
    now = time.time()
    with Ledger(path) as db:
        c = db.conn
        c.execute("PRAGMA synchronous=OFF")
        c.execute("BEGIN")
        c.execute("INSERT INTO runners (id, hostname, pid, started_at, heartbeat_at, heartbeat_s, lease_s)"
                  " VALUES ('bench', 'bench', 1, ?, ?, 5, 30)", (now - 86400, now))
        names = insert_jobs(c, jobs, now)
        batch = 50_000
        for start in range(0, runs, batch):
            rows, outs = [], []
            for i in range(start, min(runs, start + batch)):
                job = names[i % jobs]
                state = rng.choice(GENERATED_STATES)
                ended = now - (runs - i) * 2.0
                rows.append(finished_run(i, job, state, ended))
                outs.append((i + 1, job, f"{job}:{i}", 1, state, "success" if state == "succeeded" else state,
                             9.0, 1 if state == "succeeded" else 0, None if state == "succeeded" else f"{state}",
                             ended, ended))
            c.executemany(INSERT_FINISHED_RUN, rows)
            c.executemany(
                "INSERT INTO job_outcomes (run_id, job, lineage, attempt, state, status, duration_s, silent,"
                " verdict_reason, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)", outs)
        c.executemany(
            "INSERT INTO escalations (dedup_key, job, kind, severity, state, count, first_seen, last_seen,"
            " latest_run_id, owner, reason, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [(f"{n}:failed", n, "failed", rng.choice(["critical", "warning", "info"]), "open", rng.randint(1, 50),
              now - 86400, now - rng.random() * 3600, runs - k, "ops", "exited 1", now)
             for k, n in enumerate(names)])
        c.execute("COMMIT")
    return time.perf_counter() - t0


def generate_pg(url: str, runs: int, scratch: Path) -> dict[str, float]:
    """Fill the empty PostgreSQL ledger at ``url`` with ``runs`` finished runs: generate the
    SQLite ledger (``generate``) in ``scratch`` and move it with ``ledger copy``.

    Returns ``{"generate_s", "copy_s", "rows"}`` (seconds; rows copied over all tables). The
    SQLite file is deleted afterwards.
    """
    from core.ledger.copy import copy_ledger

    src = scratch / "pg-source.db"
    gen_s = generate(src, runs)
    t0 = time.perf_counter()
    with Ledger(src) as s, Ledger(url) as d:
        report = copy_ledger(s, d)
    copy_s = time.perf_counter() - t0
    for f in scratch.glob("pg-source.db*"):
        f.unlink()
    return {"generate_s": gen_s, "copy_s": copy_s, "rows": float(report.total)}


CHILD = r"""
import time
T_START = time.time()  # wall clock: the parent compares it with its own spawn time
import asyncio, json, sys, threading
import psutil
from console.app import ConsoleConfig, WatchkeeperApp
from core.ledger.connection import Ledger
T_IMPORTED = time.time()


def visible_loaded(table):
    top = int(table.scroll_y)
    rows = range(top, min(table.total, top + table.page_height))
    return all(table.row_at(i) is not None for i in rows)


async def main(path):
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="bench"))
    out = {"t_start": T_START, "imports_s": T_IMPORTED - T_START}
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        while getattr(screen, "polls", 0) == 0 or not screen.table.rows_data:
            await asyncio.sleep(0.002)
            screen = app.screen
        await pilot.pause()  # the frame with rows is drawn
        out["t_paint"] = time.time()
        out["rss_after_paint_mb"] = psutil.Process().memory_info().rss / 2**20
        await pilot.press("2")
        while screen.table.VIEW != "outcomes" or not screen.table.rows_data:
            await asyncio.sleep(0.002)
        await pilot.pause()
        floor = []  # what Pilot itself costs per key: an unbound key, then a drawn frame
        for _ in range(20):
            t = time.perf_counter()
            await pilot.press("z")
            await pilot.pause()
            floor.append(time.perf_counter() - t)
        out["floor_s"] = sorted(floor)[len(floor) // 2]
        pages = []
        for _ in range(60):
            t = time.perf_counter()
            await pilot.press("pagedown")
            while not visible_loaded(screen.table):
                await asyncio.sleep(0.001)
            await pilot.pause()
            pages.append(time.perf_counter() - t)
        out["page_s"] = pages
        out["rows_loaded_after_scroll"] = len(screen.table.rows_data)
        out["cursor_after_scroll"] = screen.table.cursor_row
        t = time.perf_counter()
        await pilot.press("G")
        while not visible_loaded(screen.table) or screen.table.current() is None:
            await asyncio.sleep(0.001)
        await pilot.pause()
        out["end_s"] = time.perf_counter() - t
        out["end_row"] = screen.table.cursor_row
        await pilot.press("g")
        while not visible_loaded(screen.table):
            await asyncio.sleep(0.001)
        await pilot.pause()
        latencies = []
        for k in range(5):
            def commit(k=k):
                with Ledger(path) as db:
                    def tx(c):
                        rid = c.execute("SELECT MAX(id) FROM runs").fetchone()[0] + 1
                        c.execute("INSERT INTO runs (id, job, lineage, attempt, state, slot, trigger, not_before,"
                                  " created_at, ended_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                                  (rid, "job-000", f"lat{rid}", 1, "failed", f"lat{rid}", "schedule", time.time(),
                                   time.time(), time.time() + 3600, time.time()))
                        return rid
                    return db.write(tx)
            box = {}
            th = threading.Thread(target=lambda: box.setdefault("rid", commit()))
            th.start(); th.join()
            t = time.perf_counter()
            while not screen.table.rows_data or screen.table.rows_data[0].id != box["rid"]:
                await asyncio.sleep(0.002)
            await pilot.pause()
            latencies.append(time.perf_counter() - t)
            await asyncio.sleep(0.1 + 0.05 * k)  # commits land at different points of the poll cycle
        out["commit_to_screen_s"] = latencies
        out["rss_end_mb"] = psutil.Process().memory_info().rss / 2**20
    print(json.dumps(out))

asyncio.run(main(sys.argv[1]))
"""


#: The baseline: a bare Textual app (one Static) at the same size, started the same way. Its
#: first paint is Textual's own start-up on this machine; its key press is one unbound key
#: and the frame after it, what Pilot and Textual cost before the console does anything.
BASELINE_CHILD = r"""
import time
T_START = time.time()
import asyncio, json
import psutil
from textual.app import App
from textual.widgets import Static
T_IMPORTED = time.time()


class Bare(App):
    def compose(self):
        yield Static("bare")


async def main():
    app = Bare()
    out = {"t_start": T_START, "imports_s": T_IMPORTED - T_START}
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        out["t_paint"] = time.time()
        out["rss_mb"] = psutil.Process().memory_info().rss / 2**20
        keys = []
        for _ in range(20):
            t = time.perf_counter()
            await pilot.press("z")
            await pilot.pause()
            keys.append(time.perf_counter() - t)
        out["key_s"] = sorted(keys)[len(keys) // 2]
    print(json.dumps(out))

asyncio.run(main())
"""


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def direct_queries(path: Path | str, repeats: int = 5) -> dict:
    """The console's page reads run directly (no Textual): the first page of the escalations
    view (what the first frame shows, with a fresh connection each time, as a starting console
    opens one), a page of outcomes at an offset deep in the table (what a PgDn reads), and the
    last page (what G reads). Medians of ``repeats``, in seconds."""
    from core.ledger import reads

    first, page, last = [], [], []
    for _ in range(repeats):
        t = time.perf_counter()
        with Ledger(path) as led:
            reads.escalations_page(led)
            reads.summary(led, time.time())
            first.append(time.perf_counter() - t)
            total = reads.count_rows(led, "outcomes", now=time.time())
            t = time.perf_counter()
            reads.outcomes_page(led, offset=min(total, 2_000))
            page.append(time.perf_counter() - t)
            t = time.perf_counter()
            reads.outcomes_page(led, offset=max(0, total - reads.PAGE))
            last.append(time.perf_counter() - t)
    return {"first_page_s": _median(first), "page_s": _median(page), "last_page_s": _median(last)}


def baseline(path: Path | str) -> dict:
    """Baselines measured now, on this machine: the bare Textual app in a child process (first
    paint from spawn, RSS, one key press) and the direct queries on ``path``."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root))
    t_spawn = time.time()
    proc = subprocess.run([sys.executable, "-c", BASELINE_CHILD], capture_output=True, text=True, env=env,
                          timeout=300, cwd=root)
    if proc.returncode != 0:
        raise SystemExit(f"baseline child failed:\n{proc.stderr[-3000:]}")
    bare = json.loads(proc.stdout.strip().splitlines()[-1])
    out = {"bare_paint_s": bare["t_paint"] - t_spawn, "bare_rss_mb": bare["rss_mb"], "bare_key_s": bare["key_s"]}
    out.update(direct_queries(path))
    return out


def goals(figs: dict, base: dict) -> list[tuple[str, float, float, str]]:
    """(figure, value, goal, unit) for each ratio goal; values and goals in the unit shown."""
    pages = figs["page_s"]
    return [
        ("first paint", figs["first_paint_s"], RATIO_PAINT * (base["bare_paint_s"] + base["first_page_s"]), "s"),
        ("PgDn per page (mean)", sum(pages) / len(pages) * 1000,
         RATIO_PAGE * (base["bare_key_s"] + base["page_s"]) * 1000, "ms"),
        ("G: jump to the last row", figs["end_s"] * 1000,
         RATIO_PAGE * (base["bare_key_s"] + base["last_page_s"]) * 1000, "ms"),
        ("RSS after first paint", figs["rss_after_paint_mb"], RATIO_RSS * base["bare_rss_mb"], "MB"),
        ("RSS at end", figs["rss_end_mb"], RATIO_RSS * base["bare_rss_mb"], "MB"),
        ("commit → screen (max)", max(figs["commit_to_screen_s"]) * 1000, GOAL_LATENCY_S * 1000, "ms"),
    ]


def measure(path: Path | str) -> dict:
    """Run the console in a child process against ``path``; returns its figures."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root))
    t_spawn = time.time()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, env=env,
                          timeout=600, cwd=root)
    if proc.returncode != 0:
        raise SystemExit(f"console child failed:\n{proc.stderr[-3000:]}")
    figs = json.loads(proc.stdout.strip().splitlines()[-1])
    figs["first_paint_s"] = figs["t_paint"] - t_spawn  # what the user waits for
    figs["interpreter_s"] = figs["t_start"] - t_spawn
    figs["app_s"] = figs["t_paint"] - figs["t_start"] - figs["imports_s"]
    figs["scroll_60_pages_s"] = sum(figs["page_s"])  # bench/__main__.py reads this
    return figs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--ledger", type=Path, default=None, help="reuse or create this ledger")
    ap.add_argument("--keep", action="store_true", help="keep the generated ledger")
    ap.add_argument("--postgres", action="store_true", help="measure on a throw-away PostgreSQL ledger")
    args = ap.parse_args(argv)
    if args.postgres:
        return _main_pg(args.runs)
    tmp = None
    path = args.ledger
    if path is None:
        tmp = tempfile.mkdtemp(prefix="wk-console-bench-")
        path = Path(tmp) / "bench.db"
    if not path.exists():
        secs = generate(path, args.runs)
        print(f"generated {args.runs:,} runs in {secs:.1f} s ({path.stat().st_size / 2**20:.0f} MB)")
    rows = _report(baseline(path), measure(path))
    if tmp and not args.keep:
        for f in Path(tmp).iterdir():
            f.unlink()
        os.rmdir(tmp)
    return 0 if all(value <= goal for _, value, goal, _ in rows) else 1


def _main_pg(runs: int) -> int:
    from bench.common import pg_server

    with pg_server() as server, tempfile.TemporaryDirectory(prefix="wk-console-bench-pg-") as tmp:
        if server is None:
            print("skipped: no PostgreSQL server binaries (make postgres installs them)")
            return 0
        url = server.fresh_database()
        fill = generate_pg(url, runs, Path(tmp))
        print(f"filled PostgreSQL with {runs:,} runs in {fill['generate_s'] + fill['copy_s']:.1f} s "
              f"(generate {fill['generate_s']:.1f} s + ledger copy {fill['copy_s']:.1f} s, "
              f"{fill['rows']:,.0f} rows)")
        rows = _report(baseline(url), measure(url))
    return 0 if all(value <= goal for _, value, goal, _ in rows) else 1


def _report(base: dict, figs: dict) -> list[tuple[str, float, float, str]]:
    print(f"baseline: bare Textual app paints in {base['bare_paint_s']:.2f} s ({base['bare_rss_mb']:.0f} MB), "
          f"one key {base['bare_key_s'] * 1000:.0f} ms; direct first page {base['first_page_s'] * 1000:.1f} ms, "
          f"page {base['page_s'] * 1000:.1f} ms, last page {base['last_page_s'] * 1000:.1f} ms")
    rows = goals(figs, base)
    for name, value, goal, unit in rows:
        verdict = "ok" if value <= goal else "MISSED"
        print(f"{name:<28} {value:>9.2f} {unit:<3} goal ≤ {goal:>9.2f} {unit:<3} {verdict}")
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
