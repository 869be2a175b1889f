"""The model escalates only by quoting this run's evidence: the quote and the intent clause are
checked verbatim (after the one escaper) before anything pages; the rules floor never moves."""

from __future__ import annotations

from core.spec.model import JobSpec
from core.supervisor.claude import ClaudeVerdict
from core.supervisor.grounding import apply, check, find_quote
from core.supervisor.rules import OutcomeFacts, evaluate

SPEC = JobSpec(name="purge", command="true", intent="Delete the accounts closed more than 30 days ago.",
               expect={"files": ["out/purged.csv"]})
DRY = "DRY RUN: would delete 412 accounts closed more than 30 days ago; nothing was deleted"


def _first(stdout: str = DRY + "\npurge finished\n", **kw) -> OutcomeFacts:
    return OutcomeFacts(run_id=1, job="purge", duration_s=3.0, stdout=stdout, **kw)


def _answer(quote: str, clause: str = "Delete the accounts closed", escalate: bool = True,
            severity: str = "warning") -> ClaudeVerdict:
    return ClaudeVerdict(escalate=escalate, severity=severity, reason="it only listed them", quote=quote,
                         clause=clause)


def test_a_quoted_line_turns_a_first_success_note_into_a_page_showing_quote_and_clause():
    case = _first()
    rules = evaluate(case, [], SPEC)
    assert rules.kind == "first_success" and not rules.escalate
    v, rejected = apply(rules, _answer(DRY), case, SPEC)
    assert rejected is None and v.escalate and v.kind == "intent_mismatch" and v.severity == "warning"
    assert v.reason == (f'purge succeeded but its output contradicts its intent: it printed "{DRY}" (stdout), '
                        'while its intent says "Delete the accounts closed"')
    assert v.annotation == "it only listed them" and v.judged_by == "rules+claude"
    assert v.anomalies == ["intent_mismatch", "first_success"]


def test_an_invented_quote_is_rejected_and_the_rules_verdict_stands():
    case = _first()
    rules = evaluate(case, [], SPEC)
    v, rejected = apply(rules, _answer("ERROR: deleted 0 accounts"), case, SPEC)
    assert v == rules and not v.escalate
    assert rejected == 'quote "ERROR: deleted 0 accounts" is not in this run\'s output or handoff'


def test_a_quote_from_an_earlier_run_or_a_tiny_fragment_is_not_evidence():
    case = _first(stdout="deleted 398 accounts closed more than 30 days ago\npurge finished\n")
    assert find_quote(DRY, case) is None                       # yesterday's line, not this run's
    assert find_quote("deleted", case) is None                 # a fragment that proves nothing
    assert find_quote("398 accounts closed", case) == "stdout"  # a fragment long enough to mean something
    assert find_quote("purge finished", case) == "stdout"      # a whole (short) line


def test_the_clause_must_be_the_jobs_own_words():
    case = _first()
    _, why = check(_answer(DRY, clause="Export the orders for finance"), case, SPEC)
    assert why == 'clause "Export the orders for finance" is not in the job\'s intent or expect'
    grounding, why = check(_answer(DRY, clause='expect.files: ["out/purged.csv"]'), case, SPEC)
    assert why is None and grounding is not None and grounding.clause.startswith("expect.files")
    _, why = check(_answer(""), case, SPEC)
    assert why == "escalated without quoting the evidence"


def test_quotes_are_compared_after_the_one_escaper():
    case = _first(stdout="status \x1b[31mDRY RUN\x1b[0m only, nothing deleted\n")
    shown = "status \\x1b[31mDRY RUN\\x1b[0m only, nothing deleted"  # what the prompt showed the model
    assert find_quote(shown, case) == "stdout"
    assert find_quote("status \x1b[31mDRY RUN\x1b[0m only, nothing deleted", case) == "stdout"


def test_handoff_fields_are_quoted_as_path_and_value():
    case = _first(stdout="", handoff={"status": "success", "result": {"deleted": 0, "listed": 412},
                                       "notes": "ran with --dry-run, as configured"})
    assert find_quote("result.deleted = 0", case) == "handoff result.deleted"
    assert find_quote("result.deleted: 0", case) == "handoff result.deleted"
    assert find_quote("result.deleted = 3", case) is None
    assert find_quote("ran with --dry-run, as configured", case) == "handoff notes"


def test_the_model_never_lowers_or_silences_the_rules():
    hist = [_first(stdout=f"deleted {400 + i} accounts closed more than 30 days ago\n") for i in range(6)]
    case = _first(stdout="deleted 0 accounts closed more than 30 days ago\n")
    rules = evaluate(case, hist, SPEC)
    assert rules.kind == "zero_work" and rules.escalate
    quiet = ClaudeVerdict(escalate=False, severity="info", reason="zero is fine today")
    v, rejected = apply(rules, quiet, case, SPEC)
    assert rejected is None and v.escalate and v.kind == "zero_work" and v.severity == "warning"
    assert v.annotation == "zero is fine today"
    louder, _ = apply(rules, _answer("deleted 0 accounts closed more than 30 days ago", severity="critical"),
                      case, SPEC)
    assert louder.kind == "zero_work" and louder.severity == "critical"
    assert 'quoted "deleted 0 accounts closed more than 30 days ago" (stdout)' in louder.annotation
    ungrounded, why = apply(rules, _answer("nothing like this was printed", severity="critical"), case, SPEC)
    assert ungrounded == rules and why


def test_a_hard_verdict_is_untouched_whatever_the_answer():
    case = OutcomeFacts(run_id=2, job="purge", state="failed", status="failed", exit_code=1, stderr="boom\n")
    rules = evaluate(case, [], SPEC)
    assert apply(rules, _answer("boom"), case, SPEC) == (rules, None)
