"""Prometheus metrics from the ledger: counters count what happened after the exporter
started, gauges are the ledger now, labels never carry a run id, and an unreadable ledger is
a scrape that says so."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from console.metrics import LedgerCollector
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf


def _scrape(collector: LedgerCollector) -> dict[str, list]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def _value(samples, name, **labels):
    found = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert found, f"no {name} {labels}"
    return found[0]


def test_counters_start_at_the_exporter_and_gauges_are_the_ledger_now(tmp_path):
    path = tmp_path / "wk.db"
    cf.build(path)  # history before the exporter started: not counted
    collector = LedgerCollector(path, clock=lambda: cf.NOW)
    collector.begin()
    with Ledger(path) as db:
        db.conn.execute("BEGIN")
        for i in range(3):
            cf.add_run(db, "backup-db", state="failed", ended_at=cf.NOW - 10 - i, exit_code=1, lineage=f"new-{i}")
        cf.add_run(db, "sync-mail", state="succeeded", ended_at=cf.NOW - 5, exit_code=0, lineage="new-ok")
        db.conn.execute("COMMIT")
    m = _scrape(collector)
    assert _value(m["watchkeeper_runs"], "watchkeeper_runs_total", job="backup-db", state="failed") == 3
    assert _value(m["watchkeeper_runs"], "watchkeeper_runs_total", job="sync-mail", state="succeeded") == 1
    assert len(m["watchkeeper_runs"]) == 2  # the history before begin() is not counted
    dur = m["watchkeeper_run_duration_seconds"]
    assert _value(dur, "watchkeeper_run_duration_seconds_count", job="backup-db") == 3
    assert _value(dur, "watchkeeper_run_duration_seconds_bucket", job="backup-db", le="15.0") == 3  # 12.5 s each
    assert _value(dur, "watchkeeper_run_duration_seconds_bucket", job="backup-db", le="5.0") == 0
    # the fixture's open escalations: one critical (first seen 1 h 5 min ago), one warning
    assert _value(m["watchkeeper_escalations_open"], "watchkeeper_escalations_open",
                  severity="critical", kind="failed") == 1
    age = _value(m["watchkeeper_escalation_oldest_open_age_seconds"],
                 "watchkeeper_escalation_oldest_open_age_seconds", severity="critical")
    assert age == 300 + 3600
    assert _value(m["watchkeeper_live_runs"], "watchkeeper_live_runs", state="running") == 1
    assert _value(m["watchkeeper_ledger_read_ok"], "watchkeeper_ledger_read_ok") == 1
    # scraped again: nothing new happened, nothing counted twice
    again = _scrape(collector)
    assert _value(again["watchkeeper_runs"], "watchkeeper_runs_total", job="backup-db", state="failed") == 3
    # no label is a run id
    for samples in m.values():
        for s in samples:
            assert set(s.labels) <= {"job", "state", "severity", "kind", "sink", "result", "le"}


def test_an_unreadable_ledger_is_a_scrape_that_says_so(tmp_path):
    path = tmp_path / "wk.db"
    cf.build(path)
    collector = LedgerCollector(path)
    collector.begin()
    path.unlink()
    (tmp_path / "wk.db").write_text("not a ledger")
    m = _scrape(collector)
    assert _value(m["watchkeeper_ledger_read_ok"], "watchkeeper_ledger_read_ok") == 0


def test_the_figures_read_the_same_on_either_backend(ledger_target):
    from core.ledger import gauges

    cf.build(ledger_target)
    with Ledger(ledger_target, read_only=True) as db:
        now = gauges.present(db, cf.NOW)
        happened, cursor = gauges.happenings_after(db, 0)
    assert now.open_escalations == {("critical", "failed"): 1, ("warning", "orphaned"): 1}
    assert now.oldest_open_s == {"critical": 3900.0, "warning": 4500.0}
    assert now.live_runs == {"running": 1}
    ended = [h for h in happened if h.what == "ended"]
    assert len(ended) == 31 and {h.duration_s for h in ended if h.state != "orphaned"} == {12.5}
    assert cursor > 0
