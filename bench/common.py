"""Shared shape of a benchmark figure: value, baseline measured in the same run, ratio, goal."""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class Figure:
    """One measured figure.

    ``ratio`` is value/baseline (or baseline/value for lower-is-better figures, so that a
    ratio above 1 always means "better than the baseline"). ``met`` is None when the figure
    has no goal (informational), else whether the goal was reached.
    """

    name: str
    value: float | None
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    ratio: float | None = None
    goal: str = ""
    met: bool | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def verdict(self) -> str:
        return "-" if self.met is None else ("met" if self.met else "MISSED")


#: What a generated ledger's finished runs end as: 85 % succeeded, the rest failed, timed
#: out or orphaned (drawn with ``rng.choice``).
GENERATED_STATES = ["succeeded"] * 17 + ["failed", "timed_out", "orphaned"]
#: Rows from ``finished_run`` go into ``runs`` with this statement (``executemany``).
INSERT_FINISHED_RUN = (
    "INSERT INTO runs (id, job, lineage, attempt, state, slot, trigger, not_before, created_at,"
    " started_at, ended_at, updated_at, exit_code) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)")


def insert_jobs(conn: sqlite3.Connection, count: int, now: float) -> list[str]:
    """Insert ``count`` jobs named ``job-000``… (every minute, owner ``ops``, ``updated_at``
    ``now`` in Unix seconds) for a generated ledger; returns their names."""
    names = [f"job-{i:03d}" for i in range(count)]
    conn.executemany(
        "INSERT INTO jobs (name, spec, spec_hash, schedule_text, owner, updated_at) VALUES (?,?,?,?,?,?)",
        [(n, json.dumps({"name": n, "command": ["true"], "every": 60.0}), "h", "every 1m", "ops", now)
         for n in names])
    return names


def finished_run(i: int, job: str, state: str, ended: float) -> tuple[Any, ...]:
    """The ``runs`` row (``INSERT_FINISHED_RUN``) of generated run ``i + 1``: attempt 1 of its
    own lineage, scheduled, queued 10 s and started 9 s before ``ended`` (Unix seconds), exit
    0 when it succeeded else 1."""
    return (i + 1, job, f"{job}:{i}", 1, state, f"s{i}", "schedule", ended - 10, ended - 10,
            ended - 9, ended, ended, 0 if state == "succeeded" else 1)


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        s = f"{value:,.0f}"
    elif abs(value) >= 100:
        s = f"{value:.0f}"
    elif abs(value) >= 10:
        s = f"{value:.1f}"
    else:
        s = f"{value:.3g}"
    return f"{s} {unit}".strip()


def table(figures: list[Figure]) -> str:
    """A plain text table: figure, value, baseline, ratio, goal, met/MISSED."""
    rows = [("figure", "value", "baseline", "ratio", "goal", "result")]
    for f in figures:
        base = fmt(f.baseline, f.unit) + (f" ({f.baseline_name})" if f.baseline_name else "") if f.baseline is not None \
            else (f.baseline_name or "-")
        rows.append((f.name, fmt(f.value, f.unit), base, f"{f.ratio:.2f}x" if f.ratio is not None else "-",
                     f.goal or "-", f.verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    notes = [f"  * {f.name}: {f.note}" for f in figures if f.note]
    return "\n".join(lines + ([""] + notes if notes else []))


class RunnerThread:
    """An embedded ``core.runner.runner.Runner`` in its own thread and event loop (for benchmarks)."""

    def __init__(self, spec_dir, settings) -> None:
        import asyncio
        import threading

        from core.runner.runner import Runner
        self.runner = Runner(spec_dir, settings, install_signal_handlers=False)
        self.errors: list[BaseException] = []

        def main() -> None:
            try:
                asyncio.run(self.runner.run())
            except BaseException as exc:  # surfaced by stop()
                self.errors.append(exc)
        self.thread = threading.Thread(target=main, daemon=True, name="bench-runner")

    def start(self) -> RunnerThread:
        self.thread.start()
        if not self.runner.started.wait(30):
            raise RuntimeError("runner did not start")
        return self

    def stop(self) -> None:
        self.runner.request_stop()
        self.thread.join(60)
        if self.errors:
            raise self.errors[0]

    def __enter__(self) -> RunnerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def bench_main(prog: str, run: Callable[[bool], list[Figure]], argv: list[str] | None = None) -> int:
    """The ``python -m bench.<module> [--quick] [--json]`` entry shared by the benchmark
    modules: run, then print the table (or the figures as JSON)."""
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--quick", action="store_true", help="a short version")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args(argv)
    figs = run(a.quick)
    print(json.dumps([f.to_dict() for f in figs], indent=2) if a.json else table(figs))
    return 0


@contextlib.contextmanager
def pg_server() -> Iterator[Any]:
    """A throw-away PostgreSQL server (``tests.kit.postgres.Server``) for one benchmark, or None
    when the server binaries are missing; stopped (pools closed first) on the way out."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests.kit import postgres

    if postgres.available() is not None:
        yield None
        return
    with postgres.serving() as server:
        yield server
