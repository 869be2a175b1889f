"""From a ledger record to the facts the judge reads: one function for the supervisor (rows of
``runs`` + ``job_outcomes``), ``watchkeeper eval`` (corpus cases shaped like those rows) and the
replay of a real ledger, so all three judge exactly the same evidence."""

from __future__ import annotations

from typing import Any

from core.ledger.records import HistoryOutcome, JudgingCase, columns
from core.supervisor import evidence
from core.supervisor.rules import CLAIM_CHECKS, OutcomeFacts
from core.vocabulary import Trigger

#: Characters of job output carried in ``output_excerpt`` (what the Claude judge sees).
OUTPUT_CHARS = 4000


def _joined(head: Any, tail: Any) -> str:
    """Head and tail of one captured stream as one text (once when they are the same bytes)."""
    head, tail = head or "", tail or ""
    if not tail or head == tail or head.endswith(tail):
        return head
    if not head or tail.startswith(head):
        return tail
    return head + "\n" + tail


_CLAIM_VERBS = {"file_changed": "it says it changed", "artifact": "it says it wrote"}


def _claimed_vs_found(check: dict[str, Any]) -> str:
    """``it says it changed out/report.csv (does not exist)`` from a failed claim check."""
    detail = str(check.get("detail", ""))
    path = str(check.get("path") or detail.split(": ", 1)[0])
    found = detail.split(": ", 1)[1] if ": " in detail else detail
    return f"{_CLAIM_VERBS.get(str(check.get('name')), 'it claims')} {path[:120]} ({found[:120]})"


def outcome_facts(run: dict[str, Any], out: dict[str, Any], *, retry_queued: bool = False,
                  prior_failures: int = 0) -> OutcomeFacts:
    """Facts of one outcome with its raw evidence, from a ``runs`` row and a ``job_outcomes``
    row (JSON columns decoded; a corpus case gives the same keys). Claimed and expected files
    come from the sizes verification measured (``verification.checks[].path/size``); claim
    checks that failed are the worker's false claims."""
    raw_handoff, raw_ver = out.get("handoff"), out.get("verification")
    handoff: dict[str, Any] = raw_handoff if isinstance(raw_handoff, dict) else {}
    ver: dict[str, Any] | None = raw_ver if isinstance(raw_ver, dict) else None
    output_matches = None
    failed_checks: list[str] = []
    deterministic: list[str] = []
    false_claims: list[str] = []
    if ver is not None:
        for c in ver.get("checks", []):
            if c.get("name") == "expect_output":
                output_matches = bool(c.get("ok"))
            elif not c.get("ok") and not c.get("soft"):
                failed_checks.append(f"{c.get('name')}: {str(c.get('detail', ''))[:120]}")
                if c.get("deterministic"):
                    deterministic.append(failed_checks[-1])
                if c.get("name") in CLAIM_CHECKS:
                    false_claims.append(_claimed_vs_found(c))
    files = [{"path": f.path, "role": f.role, "size": f.size} for f in evidence.files_from_verification(ver)]
    conf = handoff.get("confidence")
    stdout = _joined(out.get("stdout_head"), out.get("stdout_tail"))
    stderr = _joined(out.get("stderr_head"), out.get("stderr_tail"))
    excerpt = "\n".join(x for x in (out.get("stdout_tail"), out.get("stderr_tail")) if x)[-OUTPUT_CHARS:]
    raw_blockers = handoff.get("blockers")
    blockers: list[Any] = raw_blockers if isinstance(raw_blockers, list) else []
    return OutcomeFacts(
        run_id=int(run.get("id") or out.get("run_id") or 0), job=run.get("job") or out.get("job") or "",
        attempt=int(run.get("attempt") or out.get("attempt") or 1),
        state=str(out.get("state") or run.get("state")), status=str(out.get("status") or run.get("state")),
        reason=run.get("reason_code"), run_reason=run.get("reason"), duration_s=out.get("duration_s"),
        exit_code=out.get("exit_code", run.get("exit_code")), signal=out.get("signal", run.get("signal")),
        handoff_status=handoff.get("status") if isinstance(handoff.get("status"), str) else None,
        confidence=float(conf) if isinstance(conf, int | float) and not isinstance(conf, bool) else None,
        handoff_error=str(handoff["error"]) if handoff.get("error") is not None else None,
        blockers=[str(b) for b in blockers],
        verification_ok=None if ver is None else bool(ver.get("ok")), verification_failed=failed_checks,
        deterministic_failed=deterministic,
        output_matches=output_matches, retry_queued=retry_queued, prior_failures=prior_failures,
        ended_at=run.get("ended_at"), output_excerpt=excerpt,
        notes=str(handoff["notes"])[:300] if isinstance(handoff.get("notes"), str) else None,
        stdout=stdout, stderr=stderr, handoff=handoff or None, files=files, false_claims=false_claims,
        verdict_kind=out.get("verdict_kind"), escalated=bool(out.get("escalate")), trigger=run.get("trigger"),
        host=run.get("host"))


def case_facts(case: JudgingCase) -> OutcomeFacts:
    """Facts of the run a judging case is about (``outcome_facts`` over its run and outcome
    records, with the case's retry and earlier-failure counts)."""
    out = columns(case.outcome) if case.outcome is not None else {}
    facts = outcome_facts(columns(case.run), out, retry_queued=case.retry_queued,
                          prior_failures=case.prior_failures)
    if case.run.trigger == Trigger.MANUAL_RETRY:
        facts.escalated_as = case.escalated_before
    return facts


def history_facts(job: str, h: HistoryOutcome) -> OutcomeFacts:
    """Facts of one outcome of a job's history (its baselines and lineage policy)."""
    return outcome_facts({"job": job}, columns(h), retry_queued=h.retried)
