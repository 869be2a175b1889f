"""The console preview's evidence of a finished run with no outcome row (settled by someone
other than its runner) comes from the output files the run's monitor wrote, so a run that
printed never reads "(no output recorded yet)"."""

from __future__ import annotations

from core.ledger import lifecycle, reads, runs
from core.vocabulary import EndReason


def _ended_run(ledger, art):
    rid = ledger.write(lambda c: runs.create(c, job="job", slot="s1", trigger="manual", actor="test",
                                             not_before=0.0, spec_hash=None))
    assert lifecycle.transition(ledger, rid, 1, "queued", "spawned", actor="test")
    assert lifecycle.transition(ledger, rid, 1, "spawned", "running", actor="test",
                                fields={"started_at": 1.0, "artifacts_dir": str(art)})
    assert lifecycle.transition(ledger, rid, 1, "running", "abandoned", actor="test", reason="interrupted",
                                reason_code=EndReason.OPERATOR)
    return rid


def test_a_run_without_an_outcome_shows_what_its_monitor_kept(ledger, tmp_path):
    art = tmp_path / "run"
    art.mkdir()
    (art / "stdout.log").write_text("first\n" + "x" * 5000 + "\nlast line\n")
    (art / "stderr.log").write_text("oops\n")
    rid = _ended_run(ledger, art)
    ev = reads.run_evidence(ledger, rid, tail_chars=100)
    assert ev is not None and ev.status is None
    assert ev.stdout_end.endswith("last line\n") and len(ev.stdout_end) == 100
    assert ev.stderr_end == "oops\n"


def test_a_run_without_an_outcome_or_output_has_no_evidence(ledger, tmp_path):
    rid = _ended_run(ledger, tmp_path / "gone")
    assert reads.run_evidence(ledger, rid) is None
