"""Prometheus metrics read from the ledger (``watchkeeper run --metrics HOST:PORT``).

A scrape reads the ledger afresh (``core.ledger.gauges``): gauges are the ledger's present
state, whichever process wrote it; counters and histograms add up the audit trail's events
since this exporter started (a restart resets them, as Prometheus expects of a counter).
Labels are bounded — job, state, severity, kind, sink, result — never a run id.

Metric names (the manual's Metrics page lists them with a sample alert rule):

- ``watchkeeper_runs_total{job,state}``: runs that reached a final state;
- ``watchkeeper_run_duration_seconds{job}``: histogram of those runs' durations;
- ``watchkeeper_scheduler_start_lag_seconds``: histogram, a scheduled run's start after its slot was due;
- ``watchkeeper_judge_consults_total{result}``: Claude consults: answered, error, rejected;
- ``watchkeeper_escalations_open{severity,kind}``; ``watchkeeper_escalation_oldest_open_age_seconds{severity}``;
- ``watchkeeper_live_runs{state}``; ``watchkeeper_runner_heartbeat_age_seconds``; ``watchkeeper_runners_running``;
- ``watchkeeper_outbox_notifications{sink,state}``: pending and failed (given up) notifications;
- ``watchkeeper_ledger_read_ok``: 1 when this scrape read the ledger, 0 when it could not
  (the other figures are then absent or as of the last good read, never invented).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from core.ledger import gauges
from core.ledger.connection import Ledger

log = logging.getLogger("watchkeeper.metrics")

#: Run duration buckets, seconds: from a quick check to a nightly batch.
DURATION_BUCKETS = (0.5, 1, 5, 15, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 24 * 3600)
#: Scheduler start lag buckets, seconds.
LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300)
#: Events read per scrape at most; a backlog is caught up over the next scrapes.
EVENTS_PER_SCRAPE = 50000


class _Histogram:
    """Cumulative bucket counts and a sum, as Prometheus exposes a histogram."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        for i, b in enumerate(self.bounds):
            if value <= b:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for b, n in zip([*(str(float(b)) for b in self.bounds), "+Inf"], self.counts, strict=True):
            running += n
            out.append((b, running))
        return out


class LedgerCollector(Collector):
    """Collects the metrics from the ledger at ``path`` on every scrape (thread-safe: the
    HTTP server may scrape from several threads; one scrape reads at a time)."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self._lock = threading.Lock()
        self._cursor: int | None = None
        self._runs: dict[tuple[str, str], int] = defaultdict(int)
        self._durations: dict[str, _Histogram] = {}
        self._lag = _Histogram(LAG_BUCKETS)
        self._judge: dict[str, int] = {"answered": 0, "error": 0, "rejected": 0}
        self._present: gauges.Present | None = None

    def begin(self) -> None:
        """Counting starts here: events already in the ledger are not counted. Raises the
        ledger's error when it cannot be read."""
        with Ledger(self.path, read_only=True) as ledger:
            self._cursor = gauges.last_event_id(ledger)

    def _read(self) -> bool:
        try:
            with Ledger(self.path, read_only=True) as ledger:
                if self._cursor is None:
                    self._cursor = gauges.last_event_id(ledger)
                happened, self._cursor = gauges.happenings_after(ledger, self._cursor, EVENTS_PER_SCRAPE)
                self._present = gauges.present(ledger, self.clock())
        except Exception as exc:  # a locked, missing or broken ledger: say so in the scrape
            log.warning("metrics: cannot read the ledger %s: %s", self.path, exc)
            return False
        for h in happened:
            if h.what == "ended" and h.state is not None:
                self._runs[(h.job, h.state)] += 1
                if h.duration_s is not None:
                    self._durations.setdefault(h.job, _Histogram(DURATION_BUCKETS)).observe(h.duration_s)
            elif h.what == "spawned" and h.lag_s is not None:
                self._lag.observe(h.lag_s)
            elif h.what.startswith("judge_"):
                self._judge[h.what.removeprefix("judge_")] += 1
        return True

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            ok = self._read()
            yield GaugeMetricFamily("watchkeeper_ledger_read_ok", "1 when this scrape could read the ledger, else 0",
                                    value=1 if ok else 0)
            runs = CounterMetricFamily("watchkeeper_runs", "Runs that reached a final state, by job and state",
                                       labels=["job", "state"])
            for (job, state), n in sorted(self._runs.items()):
                runs.add_metric([job, state], n)
            yield runs
            dur = HistogramMetricFamily("watchkeeper_run_duration_seconds",
                                        "Duration of runs that reached a final state, by job", labels=["job"])
            for job, h in sorted(self._durations.items()):
                dur.add_metric([job], h.buckets(), h.total)
            yield dur
            lag = HistogramMetricFamily("watchkeeper_scheduler_start_lag_seconds",
                                        "How long after its slot was due a scheduled run was spawned")
            lag.add_metric([], self._lag.buckets(), self._lag.total)
            yield lag
            judge = CounterMetricFamily("watchkeeper_judge_consults",
                                        "Claude judge consults: answered, error (rules verdict stood), "
                                        "rejected (an escalation without a quote found in the evidence)",
                                        labels=["result"])
            for result, n in self._judge.items():
                judge.add_metric([result], n)
            yield judge
            yield from self._gauges()

    def _gauges(self) -> Iterator[Metric]:
        p = self._present
        if p is None:
            return
        esc = GaugeMetricFamily("watchkeeper_escalations_open", "Open escalations (not acknowledged, snoozed "
                                "or resolved), by severity and kind", labels=["severity", "kind"])
        for (severity, kind), n in sorted(p.open_escalations.items()):
            esc.add_metric([severity, kind], n)
        yield esc
        oldest = GaugeMetricFamily("watchkeeper_escalation_oldest_open_age_seconds",
                                   "Seconds since the oldest open escalation of each severity was first seen",
                                   labels=["severity"])
        for severity, age in sorted(p.oldest_open_s.items()):
            oldest.add_metric([severity], age)
        yield oldest
        live = GaugeMetricFamily("watchkeeper_live_runs", "Runs spawned, running or verifying", labels=["state"])
        for state in ("spawned", "running", "verifying"):
            live.add_metric([state], p.live_runs.get(state, 0))
        yield live
        if p.heartbeat_age_s is not None:
            yield GaugeMetricFamily("watchkeeper_runner_heartbeat_age_seconds",
                                    "Seconds since the freshest heartbeat of a runner that has not stopped",
                                    value=p.heartbeat_age_s)
        yield GaugeMetricFamily("watchkeeper_runners_running",
                                "Runners not stopped whose heartbeat is within their lease", value=p.runners_running)
        outbox = GaugeMetricFamily("watchkeeper_outbox_notifications",
                                   "Notifications pending delivery, and failed for good after their retries",
                                   labels=["sink", "state"])
        for (sink, state), n in sorted(p.outbox.items()):
            outbox.add_metric([sink, state], n)
        yield outbox


def serve_metrics(ledger: str | Path, host: str, port: int) -> Callable[[], None]:
    """Serve ``/metrics`` for ``ledger`` on ``host:port`` from a daemon thread; returns the
    function that stops it. Raises OSError when the address cannot be bound."""
    collector = LedgerCollector(ledger)
    collector.begin()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, thread = start_http_server(port, addr=host, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop
