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
#: Seconds always tolerated (sub-second jobs jitter by more than their own duration).
ABS_S = 1.0
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
        return f"median {self.median:.1f}s, range {self.low:.1f}-{self.high:.1f}s over {self.samples} runs"


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
