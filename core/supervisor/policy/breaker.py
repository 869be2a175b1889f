"""The breaker's words: how an opened (or re-opened) breaker's ``circuit_open`` escalation
names the failures that opened it, and what an open breaker holds back. The breaker's state
changes (compare-and-set on ``jobs.breaker_state``) stay in ``core.ledger.breaker``, which
asks ``BREAKER`` for the sentences."""

from __future__ import annotations

from typing import Any

from core.ledger.records import BreakerFailure
from core.spec.model import JobSpec
from core.text import age, cut
from core.vocabulary import Trigger


def failed_checks(ver: Any) -> list[str]:
    """``name: detail`` of each hard verification check that failed (``Outcome.verification``)."""
    checks = ver.get("checks", []) if isinstance(ver, dict) else []
    return [f"{c.get('name')}: {cut(str(c.get('detail') or ''), 80)}".rstrip(": ") for c in checks
            if isinstance(c, dict) and not c.get("ok") and not c.get("soft")]


def failure_words(f: BreakerFailure) -> str:
    """How one failure ended, with its own evidence: ``run 12 failed (exit 1: disk full)``,
    ``run 9 failed verification (expect_file: out.csv missing; exit 0)``, or with the
    verdict's kind when it says more than the state (``…; judged false_claim``)."""
    checks = failed_checks(f.verification)
    kind = f.verdict_kind
    judged = f"; judged {kind}" if kind and kind not in (f.state, "failed", "verification_failed") else ""
    if f.exit_code == 0 and checks:
        return f"run {f.id} failed verification ({'; '.join(checks[:2])}; exit 0{judged})"
    how = f"exit {f.exit_code}" if f.exit_code is not None else (
        f"signal {f.signal}" if f.signal else (f.reason or f.state))
    if f.exit_code == 0 and f.reason:
        how += f", {cut(str(f.reason), 80)}"  # exited 0 yet failed: the run's own words say why
    lines = [ln.strip() for ln in str(f.stderr_tail or "").splitlines() if ln.strip()]
    said = f": {cut(lines[-1], 80)}" if lines else ""
    return f"run {f.id} {f.state} ({how}{said}{judged})"


class BreakerWords:
    """The sentences ``core.ledger.breaker`` records (``core.ledger.store.BreakerWording``)."""

    def held_back(self, spec: JobSpec, trigger: str | None, cooldown: float, *, another: bool = False) -> str:
        """What an open breaker holds back, worded for how the job is run: only scheduled
        slots are ever skipped, so a job run through ``watchkeeper exec`` (the failing run's
        ``trigger``) or by hand is told so rather than promised skipped runs. ``cooldown``
        in seconds."""
        span = f"{'another ' if another else ''}{age(cooldown)}"
        if trigger == Trigger.EXEC:
            return f"breaker open for {span} (runs through watchkeeper exec are never skipped: fix what fails)"
        if spec.schedule or spec.every or spec.once:
            return f"scheduled runs skipped for {span}"
        return f"breaker open for {span} (a manual job: nothing is skipped)"

    def opened(self, failures: list[BreakerFailure], n: int, window: float, held: str) -> str:
        """The escalation reason when ``n`` failures within ``window`` seconds open it
        (``failures``: the newest of them, newest first)."""
        listed = ", ".join(failure_words(f) for f in failures[:5])
        more = f" and {n - 5} more" if n > 5 else ""
        return f"{n} failures within {age(window)}: {listed}{more}; {held}"

    def trial_failed(self, trial: BreakerFailure | None, run_id: int, first: list[BreakerFailure],
                     held: str) -> str:
        """The escalation reason when the half-open trial run ``run_id`` failed: the trial,
        then the failures that first opened the breaker, so a re-opening does not hide why."""
        what = failure_words(trial) if trial is not None else f"run {run_id} failed"
        opened = ""
        if first:
            more = f" and {len(first) - 5} more" if len(first) > 5 else ""
            opened = f"; first opened after {', '.join(failure_words(f) for f in first[:5])}{more}"
        return f"half-open trial {what}{opened}; {held}"


#: The wording every process uses.
BREAKER = BreakerWords()
