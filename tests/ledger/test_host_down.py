"""A host whose runners all stopped heartbeating is escalated once (``host_down``) by any
surviving runner's periodic pass, with since when, its runs and its pinned jobs, and
resolved when a runner of that host heartbeats again. A job pinned only to down hosts is
escalated too: nothing in the fleet runs its slots."""

from __future__ import annotations

import os
import time

from core.ledger import hosts, lifecycle, reads
from core.ledger.runners import renew
from core.ledger.sql_store import SqlStore
from core.spec.model import JobSpec
from core.vocabulary import EndReason
from tests.kit.sweep import add_job, add_run, add_runner


def _open(ledger, kind="host_down"):
    return ledger.rows("SELECT job, state, count, reason FROM escalations WHERE kind = ? ORDER BY job", (kind,))


def test_a_silent_host_is_escalated_once_with_its_runs_and_pinned_jobs(ledger):
    add_job(ledger, "backup", host="db1")
    add_job(ledger, "report")
    add_runner(ledger, pid=os.getpid(), lease_s=60.0, host="web1", boot_id="w")  # the survivor
    dead = add_runner(ledger, pid=os.getpid(), heartbeat_age=120.0, lease_s=30.0, host="db1", boot_id="d")
    run_id = add_run(ledger, "backup", pid=os.getpid(), runner_id=dead)
    store = SqlStore(ledger)

    first = store.check_hosts(now=None)
    again = store.check_hosts()  # a second survivor's pass, or the next beat

    assert first["opened"] == ["(host db1)", "backup"] and again == {"opened": [], "resolved": []}
    down = {r["job"]: r for r in _open(ledger)}
    assert set(down) == {"(host db1)", "backup"}
    assert down["(host db1)"]["count"] == 1 and down["(host db1)"]["state"] == "open"
    reason = down["(host db1)"]["reason"]
    assert "host db1 down" in reason and f"its runs {run_id}" in reason and "pinned jobs backup" in reason
    assert "pinned to db1" in down["backup"]["reason"]


def test_a_run_orphaned_by_lease_before_the_host_was_declared_down_is_still_named(ledger):
    # The surviving runners' sweep may orphan a run by its lease before the host pass runs:
    # the page still names the runs the host had (seen in the 3-host soak test).
    add_runner(ledger, pid=os.getpid(), lease_s=60.0, host="web1", boot_id="w")
    dead = add_runner(ledger, pid=os.getpid(), heartbeat_age=120.0, lease_s=30.0, host="db1", boot_id="d")
    run_id = add_run(ledger, "long", pid=os.getpid(), runner_id=dead)
    assert lifecycle.transition(ledger, run_id, 1, "running", "orphaned", actor="test",
                                reason_code=EndReason.LEASE_EXPIRED,
                                fields={"ended_at": time.time()})
    before = add_run(ledger, "old", state="running", runner_id=dead)  # orphaned before its last heartbeat: not named
    assert lifecycle.transition(ledger, before, 1, "running", "orphaned", actor="test",
                                reason_code=EndReason.LEASE_EXPIRED,
                                fields={"ended_at": time.time() - 600})

    SqlStore(ledger).check_hosts()

    (down,) = _open(ledger)
    assert f"its runs {run_id} (the surviving runners orphan each as its lease runs out)" in down["reason"]


def test_a_host_heartbeating_again_resolves_its_host_down(ledger):
    add_job(ledger, "backup", host=["db1", "db2"])
    add_runner(ledger, pid=os.getpid(), lease_s=60.0, host="web1", boot_id="w")
    dead = add_runner(ledger, pid=os.getpid(), heartbeat_age=120.0, lease_s=30.0, host="db1", boot_id="d")
    store = SqlStore(ledger)
    store.check_hosts()
    ledger.write(lambda c: renew(c, dead, [], lease_s=30.0))

    got = store.check_hosts()

    assert sorted(got["resolved"]) == ["(host db1)", "backup"]
    assert {r["state"] for r in _open(ledger)} == {"resolved"}


def test_a_lone_host_that_stops_is_the_runner_gap_not_a_host_down(ledger):
    add_runner(ledger, pid=os.getpid(), heartbeat_age=120.0, lease_s=30.0, host="db1", boot_id="d")
    assert SqlStore(ledger).check_hosts() == {"opened": [], "resolved": []}


def test_a_host_stopped_cleanly_is_not_down_nor_are_the_jobs_pinned_to_it(ledger):
    add_job(ledger, "backup", host="db1")
    add_runner(ledger, pid=os.getpid(), lease_s=60.0, host="web1", boot_id="w")
    add_runner(ledger, pid=os.getpid(), heartbeat_age=120.0, lease_s=30.0, host="db1", boot_id="d", stopped=True)
    assert SqlStore(ledger).check_hosts()["opened"] == []
    assert _open(ledger) == []


def test_a_fleet_starting_up_gives_its_hosts_a_lease_to_heartbeat(ledger):
    add_job(ledger, "backup", host="db1")  # db1's runner is starting a moment after web1's
    survivor = add_runner(ledger, pid=os.getpid(), lease_s=60.0, host="web1", boot_id="w", up_for=2.0)
    add_runner(ledger, pid=os.getpid(), heartbeat_age=600.0, lease_s=30.0, host="api1", boot_id="a")  # before the power cut
    store = SqlStore(ledger)

    assert store.check_hosts()["opened"] == []  # web1 has heard from nobody yet

    ledger.write(lambda c: c.execute("UPDATE runners SET started_at = started_at - 60 WHERE id = ?", (survivor,)))
    assert sorted(store.check_hosts()["opened"]) == ["(host api1)", "backup"]  # a lease later: still silent


def test_a_job_pinned_to_a_label_is_served_by_a_host_with_that_label(ledger):
    add_job(ledger, "vacuum", host="postgres")
    add_runner(ledger, pid=os.getpid(), lease_s=60.0, host="web1", boot_id="w")
    ledger.write(lambda c: c.execute("UPDATE runners SET labels = ? WHERE hostname = 'web1'", ('["postgres"]',)))
    assert SqlStore(ledger).check_hosts()["opened"] == []
    with ledger.read() as conn:
        (web1,) = hosts.fleet(conn)
    assert web1.up and web1.labels == ["postgres"]


def test_host_pin_is_a_name_or_a_list_and_leaves_unpinned_hashes_alone():
    assert JobSpec(name="a", command=["true"], host="db1").hosts == ["db1"]
    assert JobSpec(name="a", command=["true"], host=["db1", "db2"]).hosts == ["db1", "db2"]
    plain = JobSpec(name="a", command=["true"])
    # the hash this spec had before jobs could be pinned: its runs keep matching their spec
    assert plain.hosts == [] and plain.spec_hash() == "c06ee5077ba069aa"
    assert JobSpec(name="a", command=["true"], host="db1").spec_hash() != plain.spec_hash()


def test_host_filter_narrows_runs_and_escalations_to_one_host(ledger):
    add_job(ledger, "backup")
    add_runner(ledger, pid=os.getpid(), lease_s=60.0, host="web1", boot_id="w")
    dead = add_runner(ledger, pid=os.getpid(), heartbeat_age=120.0, lease_s=30.0, host="db1", boot_id="d")
    run_id = add_run(ledger, "backup", pid=os.getpid(), runner_id=dead)
    ledger.write(lambda c: c.execute("UPDATE runs SET host = 'db1' WHERE id = ?", (run_id,)))
    SqlStore(ledger).check_hosts()

    flt = reads.parse_filter("host:db1")
    assert flt.host == "db1" and not flt.empty
    now = time.time()
    assert [r.id for r in reads.orphans_page(ledger, now=now, flt=flt).rows] == [run_id]
    assert reads.orphans_page(ledger, now=now, flt=reads.parse_filter("host:web1")).rows == []
    assert [e.job for e in reads.escalations_page(ledger, flt=flt).rows] == ["(host db1)"]


def test_a_periodic_pass_told_its_view_was_interrupted_judges_no_host(ledger, tmp_path):
    """Right after a runner's own heartbeat was late (the ledger out of reach), every other
    runner's heartbeat is stale for the same reason: its periodic pass opens no host_down
    and no runner_gap until it may judge the others again."""
    from core.spec.settings import Settings
    from core.supervisor import supervisor

    add_job(ledger, "report")
    add_runner(ledger, pid=os.getpid(), lease_s=60.0, host="web1", boot_id="w")  # this runner
    add_runner(ledger, pid=os.getpid(), heartbeat_age=120.0, lease_s=30.0, host="db1", boot_id="d")
    settings = Settings(ledger=str(tmp_path / "wk.db"))
    supervisor.periodic(ledger, settings, judge_others=False)
    assert _open(ledger) == []
    supervisor.periodic(ledger, settings)
    assert [r["job"] for r in _open(ledger)] == ["(host db1)"]
