"""Learned duration ranges: what a normal run of a job takes, from its own history.

Robust statistics, so one hung run does not widen the range for ever: the median and the
median absolute deviation (MAD, scaled by 1.4826 to estimate a standard deviation) of the
durations of at least ``MIN_SAMPLES`` successful runs. The allowed band around the median is
the widest of ``K`` robust deviations, ``REL`` of the median and ``ABS_S`` seconds, so a job
with near-identical durations does not alert on ordinary jitter.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

MIN_SAMPLES = 10
#: Robust deviations a duration may stray from the median.
K = 4.0
#: Share of the median always tolerated (±50 %).
REL = 0.5
#: Seconds always tolerated: a short job's duration follows the machine's load more than
#: its own work (the sample disk-report, 0.8 s median, took 2.0 s on a busy 2-core host, and
#: nobody needs a page for that); a job is "slow" only when it ran this much longer too.
ABS_S = 5.0
MAD_SCALE = 1.4826
#: Most recent samples used: a job whose normal changed re-learns within this many runs.
WINDOW = 50


@dataclass(frozen=True)
class Baseline:
    """Learned range of one job's successful durations (seconds)."""

    median: float
    mad: float
    low: float
    high: float
    samples: int

    def classify(self, duration: float | None) -> str | None:
        """``"slow"`` above ``high``, ``"too_fast"`` below ``low``, else None."""
        if duration is None:
            return None
        if duration > self.high:
            return "slow"
        if duration < self.low:
            return "too_fast"
        return None

    def describe(self) -> str:
        return f"median {self.median:.1f}s, tolerated {self.low:.1f}-{self.high:.1f}s over {self.samples} runs"


def learn(durations: Iterable[float | None]) -> Baseline | None:
    """Baseline from durations (seconds, oldest first); None with fewer than ``MIN_SAMPLES``.

    Only the last ``WINDOW`` values count. ``low`` may be 0 (then nothing is too fast).
    """
    xs = [float(d) for d in durations if d is not None and d >= 0][-WINDOW:]
    if len(xs) < MIN_SAMPLES:
        return None
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    band = max(K * MAD_SCALE * mad, REL * med, ABS_S)
    return Baseline(median=med, mad=mad, low=max(0.0, med - band), high=med + band, samples=len(xs))


# -- learned shape of the work: output line shapes, work counts, file sizes ---------------------

#: Successful runs needed before output shapes, work counts and file sizes are judged (fewer:
#: nothing is known yet about what normal looks like, and the rules stay quiet).
MIN_WORK_SAMPLES = 5
#: A count is "far" from its learned range below ``median * LOW_FACTOR`` (and half the lowest
#: seen) or above ``median * HIGH_FACTOR`` (and twice the highest seen).
LOW_FACTOR = 0.1
HIGH_FACTOR = 10.0
#: A file is "far smaller than usual" below this share of its learned median size (and below
#: half the smallest size seen).
SHRINK_FACTOR = 0.25
#: A shape counts as "always printed" when it appeared in this share of learned successes.
ALWAYS_SHARE = 1.0


@dataclass(frozen=True)
class CountRange:
    """Learned values of one work count: the ``index``-th integer of lines of ``shape``."""

    shape: str
    index: int
    median: float
    low: int
    high: int
    samples: int

    def describe(self) -> str:
        return f"usually {self.low}-{self.high} (median {self.median:.0f}) over {self.samples} successes"


@dataclass(frozen=True)
class WorkBaseline:
    """What a normal success of one job prints and writes, learned from its successes.

    ``shapes``: masked output line shape → number of learned successes that printed it.
    ``counts``: work count ranges per (shape, index). ``sizes``: file path → sizes in bytes
    (one per success that reported it). ``examples``: shape → the line as last printed.
    ``samples``: successes learned from.
    """

    samples: int
    shapes: dict[str, int]
    counts: dict[tuple[str, int], CountRange]
    sizes: dict[str, list[int]]
    examples: dict[str, str]

    def known(self, shape: str) -> bool:
        return shape in self.shapes

    def always(self) -> list[str]:
        """Shapes every learned success printed; those carrying work counts first."""
        need = max(1, int(self.samples * ALWAYS_SHARE))
        got = [s for s, n in self.shapes.items() if n >= need]
        return sorted(got, key=lambda s: "<N>" not in s)

    def count_anomaly(self, shape: str, index: int, value: int) -> str | None:
        """``"zero_work"``, ``"work_count"`` or None for one count of a known shape."""
        rng = self.counts.get((shape, index))
        if rng is None or rng.samples < MIN_WORK_SAMPLES:
            return None
        if value == 0 and rng.low > 0:
            return "zero_work"
        if value < rng.median * LOW_FACTOR and value < rng.low * 0.5:
            return "work_count"
        if rng.median > 0 and value > rng.median * HIGH_FACTOR and value > rng.high * 2:
            return "work_count"
        return None

    def size_anomaly(self, path: str, size: int) -> tuple[str, str] | None:
        """``(kind, evidence)`` when ``size`` (bytes) is far below this file's learned sizes."""
        seen = self.sizes.get(path) or []
        if len(seen) < MIN_WORK_SAMPLES:
            return None
        med = statistics.median(seen)
        if size < med * SHRINK_FACTOR and size < min(seen) * 0.5:
            return "shrunken_file", f"usually {min(seen)}-{max(seen)} bytes (median {med:.0f}) over {len(seen)} successes"
        return None


def final_counts(lines: Iterable[tuple[str, tuple[int, ...], str]]) -> dict[tuple[str, int], int]:
    """The work counts of one run's output: for each ``(shape, index)``, the count on the LAST
    line of that shape. A shape printed once is a plain count ("exported 15234 rows"); one
    printed again and again is a progress counter ("tick 1" ... "tick 25"), whose last value
    is how far the run got: judging every line of it against the first one's range paged a
    ``work_count`` on every run of a job that counts its progress."""
    out: dict[tuple[str, int], int] = {}
    for shape, counts, _text in lines:
        for i, v in enumerate(counts):
            out[(shape, i)] = v
    return out


def learn_work(successes: Iterable[tuple[Iterable[tuple[str, tuple[int, ...], str]], dict[str, int]]]
               ) -> WorkBaseline | None:
    """Learn from successful runs, oldest first: each is ``(lines, sizes)`` where ``lines``
    yields ``(shape, counts, text)`` per output line and ``sizes`` maps file path → bytes.

    Only the last ``WINDOW`` successes count. None with fewer than ``MIN_WORK_SAMPLES``.
    """
    runs = list(successes)[-WINDOW:]
    if len(runs) < MIN_WORK_SAMPLES:
        return None
    shapes: dict[str, int] = {}
    values: dict[tuple[str, int], list[int]] = {}
    sizes: dict[str, list[int]] = {}
    examples: dict[str, str] = {}
    for lines, run_sizes in runs:
        run_lines = list(lines)  # read twice: shapes, then counts
        seen: set[str] = set()
        for shape, _counts, text in run_lines:
            examples[shape] = text
            if shape not in seen:
                seen.add(shape)
                shapes[shape] = shapes.get(shape, 0) + 1
        for key, v in final_counts(run_lines).items():
            values.setdefault(key, []).append(v)
        for path, size in run_sizes.items():
            sizes.setdefault(path, []).append(size)
    ranges = {key: CountRange(key[0], key[1], statistics.median(vs), min(vs), max(vs), len(vs))
              for key, vs in values.items()}
    return WorkBaseline(samples=len(runs), shapes=shapes, counts=ranges, sizes=sizes, examples=examples)
