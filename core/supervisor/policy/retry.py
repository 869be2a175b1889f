"""Retry policy: after a failed attempt, whether the lineage gets another attempt, on which
worker, and after what backoff.

``RETRY`` (a ``RetryPolicy``) is what the code that ends runs hands to the store
(``SqlStore(ledger, retry=RETRY)``, ``terminal.finish(..., retry=RETRY)``): the store calls
``decide`` inside the transaction of the terminal move and queues the next attempt it asks
for (``core.ledger.retries.follow_up``), so a retry schedule survives any restart.
"""

from __future__ import annotations

import random

from core.ledger.lifecycle import FAILED_STATES, State
from core.ledger.records import Run
from core.ledger.store import RetryDecision
from core.spec.model import Backoff, JobSpec
from core.vocabulary import RunCommand

#: Handoff ``error`` values that mark a failure as transient.
TRANSIENT_ERRORS = frozenset({"rate_limit", "timeout"})


def backoff_delay(policy: Backoff, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before attempt ``attempt + 1`` after attempt ``attempt`` failed.

    ``min(max, initial * factor**(attempt-1))``; with ``jitter`` a uniformly random share of
    that ("full jitter"), so many failing jobs do not retry in lockstep.
    """
    cap = min(policy.max, policy.initial * policy.factor ** max(0, attempt - 1))
    if policy.jitter:
        return (rng or random).uniform(0, cap)
    return cap


def is_transient(spec: JobSpec, state: str, exit_code: int | None, handoff_error: str | None) -> bool:
    """A failure the same worker may simply retry: a timeout, an orphaned attempt, an exit
    code in ``retry_on``, or a handoff error of rate_limit/timeout. Without ``retry_on``
    every non-zero exit not in ``no_retry_on`` counts as retryable."""
    if state in (State.TIMED_OUT, State.ORPHANED):
        return True
    if handoff_error in TRANSIENT_ERRORS:
        return True
    if exit_code is None:
        return spec.retry_on is None
    if exit_code in spec.no_retry_on:
        return False
    return spec.retry_on is None or exit_code in spec.retry_on


def decide(spec: JobSpec, run: Run, state: str, handoff_error: str | None = None) -> tuple[bool, str, str]:
    """Whether attempt ``run.attempt`` ending in ``state`` gets another attempt.

    Returns ``(retry, worker, rule)``: worker is a ``RunCommand`` (primary or fallback); rule names the
    policy rule that decided (recorded in the audit trail).
    """
    if state not in FAILED_STATES:
        return False, RunCommand.PRIMARY, "not_a_failure"
    if run.task:
        task = next((t for t in spec.tasks if t.name == run.task), None)
        limit = task.max_attempts if task else 1
    else:
        limit = spec.max_attempts
    if run.attempt >= limit:
        return False, RunCommand.PRIMARY, "max_attempts_reached"
    exit_code = run.exit_code
    if exit_code is not None and exit_code in spec.no_retry_on and state == State.FAILED:
        if spec.fallback is not None and run.worker != RunCommand.FALLBACK:
            return True, RunCommand.FALLBACK, "no_retry_on→fallback"
        return False, RunCommand.PRIMARY, "no_retry_on"
    if is_transient(spec, state, exit_code, handoff_error):
        return True, run.worker or RunCommand.PRIMARY, "transient→retry"
    if spec.fallback is not None and not run.task:
        return True, RunCommand.FALLBACK, "non_transient→fallback"
    return False, RunCommand.PRIMARY, "non_transient"


class RetryPolicy:
    """The retry rule the store applies (``core.ledger.store.RetryRule``).

    Args:
        rng: the jitter's random source (tests pass a seeded one).
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng

    def decide(self, spec: JobSpec, run: Run, state: str, handoff_error: str | None,
               fallback_failures: int) -> RetryDecision:
        """``decide``, then: a fallback whose own breaker is open (``fallback_failures`` of its
        runs failed within the job's breaker window) is not routed to (rule
        ``fallback_breaker_open``); the backoff of a retry from ``backoff_delay``."""
        retry, worker, rule = decide(spec, run, state, handoff_error)
        if retry and worker == RunCommand.FALLBACK and spec.breaker.enabled and fallback_failures >= spec.breaker.failures:
            retry, rule = False, "fallback_breaker_open"
        delay = backoff_delay(spec.backoff, run.attempt, self.rng) if retry else 0.0
        return RetryDecision(retry=retry, worker=worker, rule=rule, delay_s=delay)


#: The policy every process uses.
RETRY = RetryPolicy()
