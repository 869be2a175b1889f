"""An orphaned run's reason says what happened, per orphan reason and recorded exit status
(the sentence goes to the escalation and its notifications)."""

from __future__ import annotations

import signal

import pytest

from core.supervisor.rules import OutcomeFacts, evaluate


def _reason(**kw) -> str:
    facts = OutcomeFacts(run_id=5, job="hang", state="orphaned", status="failed", **kw)
    return evaluate(facts, [], None).reason


@pytest.mark.parametrize("kw,says,never", [
    ({"reason": "runner_gone", "exit_code": None, "signal": signal.SIGTERM},
     "its runner was gone (crash, kill -9, OOM) while the job still ran, so the sweep ended the process (SIGTERM)",
     "died without reporting"),
    ({"reason": "lease_expired", "exit_code": 0, "signal": None},
     "finished with exit 0 but its verification never completed: its runner died", "died without reporting"),
    ({"reason": "lease_expired", "exit_code": 3, "signal": None},
     "exited with code 3, but its runner died before recording the outcome", "died without reporting"),
    ({"reason": "start_timeout", "exit_code": None, "signal": None}, "never started", "died without reporting"),
])
def test_orphan_sentence_per_reason(kw, says, never):
    text = _reason(**kw)
    assert says in text and never not in text and f"({kw['reason']})" in text


def test_clean_stop_says_the_run_was_interrupted_and_who_ended_it():
    text = _reason(reason="interrupted", exit_code=None, signal=signal.SIGTERM)
    assert text.startswith("attempt 1 was interrupted by a clean runner stop and not retried")
    assert "the sweep ended the still-running process (SIGTERM)" in text
    assert "died without reporting" not in text


def test_an_exec_run_names_its_wrapper_not_a_runner():
    text = _reason(reason="runner_gone", exit_code=None, signal=signal.SIGTERM, trigger="exec")
    assert "its watchkeeper exec wrapper was gone" in text and "its runner" not in text, text
    text = _reason(reason="lease_expired", exit_code=3, signal=None, trigger="exec")
    assert "its watchkeeper exec wrapper died before recording" in text and "its runner" not in text, text


def test_clean_stop_reason_says_it_once_and_keeps_the_jobs_last_lines():
    text = _reason(reason="interrupted", exit_code=None, signal=None, stderr="halfway through batch 7\n")
    assert text.count("clean runner stop") == 1, text
    assert text == ("attempt 1 was interrupted by a clean runner stop and not retried: it ended unobserved, its exit"
                    ' status never recorded (interrupted); last output: "halfway through batch 7"'), text
