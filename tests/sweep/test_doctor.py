"""``watchkeeper doctor`` finds planted violations and ``--repair`` settles what is safe."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger, add_event
from core.sweep import doctor
from tests.kit.sweep import add_job, add_run, add_runner, dead_pid, events, fast_settings, run_row


@pytest.fixture
def db(tmp_path):
    return tmp_path / "wk.db"


@pytest.fixture
def ledger(db):
    led = Ledger(db)
    add_job(led, max_attempts=2)
    yield led
    led.close()


@pytest.fixture
def settings(db):
    return fast_settings(db)


def codes(violations):
    return sorted(v.check for v in violations)


def gone_run(ledger, **kw):
    pid, ctime = dead_pid()
    rpid, rctime = dead_pid()
    rid = add_runner(ledger, pid=rpid, create_time=rctime, heartbeat_age=5)
    return add_run(ledger, pid=pid, create_time=ctime, runner_id=rid, **kw)


def test_clean_ledger_has_no_violations(ledger, settings):
    add_run(ledger, runner_id=add_runner(ledger, pid=os.getpid()), pid=os.getpid(), lease_left=30)
    add_run(ledger, state="queued")
    assert doctor.check(ledger, settings) == []


def test_live_run_without_owner_or_lease_is_found_and_repaired(ledger, settings):
    run_id = gone_run(ledger)
    found = doctor.check(ledger, settings)
    assert codes(found) == ["unowned_live_run"] and found[0].run_id == run_id and found[0].repairable

    report = doctor.diagnose(ledger, settings, repair=True)

    assert report.ok and report.repaired == [f"run {run_id}: orphaned"]
    assert run_row(ledger, run_id)["state"] == "orphaned"
    assert events(ledger, run_id, "transition")[-1]["actor"] == "doctor"
    assert doctor.check(ledger, settings) == []  # the queued retry is contiguous and alone


def test_stalled_owner_is_reported_not_repaired(ledger, settings):
    rid = add_runner(ledger, pid=os.getpid(), heartbeat_age=60)
    run_id = add_run(ledger, runner_id=rid, pid=dead_pid()[0])
    report = doctor.diagnose(ledger, settings, repair=True)
    assert codes(report.violations) == ["stalled_owner"] and report.repaired == []
    assert run_row(ledger, run_id)["state"] == "running"


def test_state_disagreeing_with_audit_trail(ledger, settings):
    run_id = add_run(ledger, state="spawned", runner_id=add_runner(ledger, pid=os.getpid()), lease_left=30)
    ledger.write(lambda c: c.execute("DELETE FROM events WHERE run_id = ? AND kind = 'transition'", (run_id,)))
    found = doctor.check(ledger, settings)
    assert codes(found) == ["state_vs_events"] and found[0].run_id == run_id


def test_two_terminal_transitions(ledger, settings):
    run_id = gone_run(ledger)
    doctor.diagnose(ledger, settings, repair=True)
    ledger.write(lambda c: add_event(c, actor="bug", kind="transition", run_id=run_id, attempt=1,
                                     from_state="running", to_state="orphaned"))
    assert "terminal_twice" in codes(doctor.check(ledger, settings))


def test_attempt_gap_and_overlap_in_a_lineage(ledger, settings):
    add_run(ledger, state="queued", lineage="L", slot="s", attempt=1)
    add_run(ledger, state="queued", lineage="L", slot="s", attempt=3)
    assert codes(doctor.check(ledger, settings)) == ["attempt_gap", "lineage_overlap"]


def test_one_slot_run_as_two_lineages(ledger, settings):
    add_run(ledger, state="queued", lineage="A", slot="2025-01-01T00:00", attempt=1)
    add_run(ledger, state="queued", lineage="B", slot="2025-01-01T00:00", attempt=2)
    assert "slot_duplicate" in codes(doctor.check(ledger, settings))


def test_outcome_copy_disagreeing_with_its_run(ledger, settings):
    run_id = gone_run(ledger)
    doctor.diagnose(ledger, settings, repair=True)  # orphaned, with its job_outcomes row
    assert "outcome_copy" not in codes(doctor.check(ledger, settings))
    ledger.write(lambda c: c.execute("UPDATE job_outcomes SET attempt = 7, state = 'succeeded' WHERE run_id = ?",
                                     (run_id,)))
    found = [v for v in doctor.check(ledger, settings) if v.check == "outcome_copy"]
    assert [v.run_id for v in found] == [run_id]
    assert "attempt 7 (runs: 1)" in found[0].message and "state 'succeeded' (runs: 'orphaned')" in found[0].message


def test_missing_column_or_table_is_a_schema_violation(ledger, settings):
    assert "schema" not in codes(doctor.check(ledger, settings))
    ledger.write(lambda c: c.execute("DROP TABLE meta"))
    ledger.write(lambda c: c.execute("ALTER TABLE runs DROP COLUMN artifacts_dir"))
    found = sorted(v.message for v in doctor.check(ledger, settings) if v.check == "schema")
    assert found == ["table meta is missing", "table runs lacks column(s) artifacts_dir"]


def test_cli_exit_codes_and_json(ledger, settings, db):
    run_id = gone_run(ledger)
    cli_runner = CliRunner()
    res = cli_runner.invoke(cli, ["doctor", "--ledger", str(db)])
    assert res.exit_code == 1 and f"run {run_id}" in res.output and "unowned_live_run" in res.output
    res = cli_runner.invoke(cli, ["doctor", "--ledger", str(db), "--repair", "--json"])
    data = json.loads(res.output)
    assert res.exit_code == 0 and data["ok"] and data["repaired"]
    res = cli_runner.invoke(cli, ["doctor", "--ledger", str(db)])
    assert res.exit_code == 0 and "ledger ok" in res.output


def test_an_unowned_live_run_reads_as_words(ledger, settings):
    with_runner = gone_run(ledger)
    pid, ctime = dead_pid()
    no_runner = add_run(ledger, pid=pid, create_time=ctime, runner_id=None)
    found = {v.run_id: v.message for v in doctor.check(ledger, settings)}
    assert found[with_runner].startswith("running with runner ") and " gone, lease expired" in found[with_runner]
    assert found[no_runner].startswith("running with no runner, lease expired"), found[no_runner]
