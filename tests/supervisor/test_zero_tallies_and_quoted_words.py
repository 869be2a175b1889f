"""A line is judged by what it reports: a tally of zero bad things is not an error whatever the
word, and an error word inside quoted text (a subject, a title) is the text's, not the job's.
A first success stays an info note when clean and pages when the rules find it suspicious."""

from __future__ import annotations

import pytest

from core.spec.model import JobSpec
from core.supervisor.evidence import error_like, mask
from core.supervisor.rules import OutcomeFacts, evaluate

SPEC = JobSpec(name="suite", command="true", intent="run the full test suite every night")


@pytest.mark.parametrize("line", [
    "1204 passed, 0 failing, 0 errored", "rejected: 0", "Failures (0)", "zero quarantined, 0 timed out",
    "Errors: 0 Warnings: 0", "no rejected rows", "failed=0, skipped=0", "0 upgraded, 0 newly installed; 0 failed",
])
def test_a_zero_tally_of_any_bad_word_is_not_an_error(line):
    assert not error_like(line)


@pytest.mark.parametrize("line", [
    "3 tests failing", "ERROR: 0 rows written", "exported 0 rows, upload failed", "0 failed, 3 errors",
    "cat: out.csv: No such file or directory", "no space left on device", "errors: 0.5% of requests",
    "rm: cannot remove '/var/log/app.log': Permission denied", "can't connect to the replica",
    "smtp: sending quota exceeded",
])
def test_real_errors_still_read_as_errors(line):
    assert error_like(line)


@pytest.mark.parametrize("line", [
    'sent 2210 emails with subject "Payment failed? Update your card"',
    "published post 'Why our builds failed in March'",
    "campaign “Fatal errors we fixed” queued for 1200 subscribers",
])
def test_an_error_word_inside_quoted_text_is_not_the_jobs_error(line):
    assert not error_like(line)


def test_quoted_text_varies_like_an_id_in_a_lines_shape():
    a, _ = mask('sending campaign "March product news" to 2000 subscribers')
    b, _ = mask('sending campaign "Why your builds failed" to 2100 subscribers')
    assert a == b == "sending campaign <QUOTED> to <N> subscribers"


def _run(stdout: str, i: int = 1) -> OutcomeFacts:
    return OutcomeFacts(run_id=i, job="suite", duration_s=60.0, stdout=stdout)


def test_a_clean_first_success_stays_an_info_note_even_with_zero_tallies_and_subjects():
    v = evaluate(_run('collected 1204 items\n1204 passed, 0 failing, 0 errored\nmailed "All tests failed? No!"\n'),
                 [], SPEC)
    assert v.kind == "first_success" and not v.escalate and v.severity == "info"


def test_a_first_success_the_rules_find_suspicious_pages():
    v = evaluate(_run("collected 1204 items\nERROR: 37 tests could not be collected\n1167 passed\n"), [], SPEC)
    assert v.escalate and v.kind == "new_output_shape"
    assert 'its first success printed "ERROR: 37 tests could not be collected"' in v.reason
