"""Display words for the vocabulary: ONE table, used by every view, dialog and the filter.

The ledger stores the values of ``core.vocabulary``'s closed sets (``succeeded``,
``acknowledged``, ``retries_exhausted`` …); the console shows each as a short word plus a
symbol (never colour alone: ``NO_COLOR`` and 16-colour terminals lose nothing) and a style
name (a colour word that ``PagedTable`` maps to a theme variable).

Every glyph here exists in DejaVu Sans Mono (``tests/test_console_labels.py`` checks the
font when it is installed): ``⧗`` for example does not, so a timeout shows ``◷``.

The keys are ``core.vocabulary`` members; a ``StrEnum`` member hashes as its value, so the
text read back from SQLite finds its label too.
"""

from __future__ import annotations

from typing import NamedTuple

from core.vocabulary import (
    BreakerState,
    EscalationKind,
    EscalationState,
    NotificationState,
    OutcomeStatus,
    RunState,
    Severity,
)


class Label(NamedTuple):
    """A value as the console shows it: ``text`` (symbol + word) and ``style`` (colour words
    such as ``"bold red"``; ``PagedTable`` maps red/yellow/green/cyan/magenta to the theme)."""

    text: str
    style: str = ""


#: The one table: set name → stored value → Label. Set names follow ``core.vocabulary``.
LABELS: dict[str, dict[str, Label]] = {  # keys: StrEnum members (str subclasses)
    # runs.state
    "run_state": {
        RunState.QUEUED: Label("… queued", "dim"),
        RunState.SPAWNED: Label("▹ spawned", "cyan"),
        RunState.RUNNING: Label("▸ running", "cyan"),
        RunState.VERIFYING: Label("? verify", "cyan"),
        RunState.SUCCEEDED: Label("✓ ok", "green"),
        RunState.FAILED: Label("✗ failed", "bold red"),
        RunState.BLOCKED: Label("■ blocked", "yellow"),
        RunState.TIMED_OUT: Label("◷ timeout", "bold red"),
        RunState.ORPHANED: Label("† orphan", "bold magenta"),
        RunState.ABANDONED: Label("⊘ abandon", "dim"),
    },
    # job_outcomes.status (the handoff's claim, or the exit code's for a plain shell job)
    "outcome_status": {
        OutcomeStatus.SUCCESS: Label("✓ success", "green"),
        OutcomeStatus.FAILED: Label("✗ failed", "bold red"),
        OutcomeStatus.PARTIAL: Label("◐ partial", "yellow"),
        OutcomeStatus.BLOCKED: Label("■ blocked", "yellow"),
        OutcomeStatus.TIMED_OUT: Label("◷ timeout", "bold red"),
        OutcomeStatus.ORPHANED: Label("† orphan", "bold magenta"),
        OutcomeStatus.ABANDONED: Label("⊘ abandon", "dim"),
    },
    # escalations.state
    "escalation_state": {
        EscalationState.OPEN: Label("● open", "bold"),
        EscalationState.ACKNOWLEDGED: Label("✓ acked", "dim"),
        EscalationState.SNOOZED: Label("z snoozed", "dim"),
        EscalationState.RESOLVED: Label("○ resolved", "dim"),
    },
    # escalations.severity
    "severity": {
        Severity.CRITICAL: Label("▲ CRIT", "bold red"),
        Severity.WARNING: Label("◆ WARN", "yellow"),
        Severity.INFO: Label("· info", ""),
    },
    # jobs.breaker_state
    "breaker": {
        BreakerState.CLOSED: Label("closed", "dim"),
        BreakerState.OPEN: Label("⚡ OPEN", "bold red"),
        BreakerState.HALF_OPEN: Label("½ half", "yellow"),
    },
    # escalations.kind: short words so an 80-column table need not cut them (the preview
    # and the detail screens give the full kind)
    "escalation_kind": {
        EscalationKind.RETRIES_EXHAUSTED: Label("exhausted"),
        EscalationKind.VERIFICATION_FAILED: Label("verify_fail"),
        EscalationKind.OUTPUT_MISMATCH: Label("mismatch"),
        EscalationKind.LOW_CONFIDENCE: Label("low_conf"),
        EscalationKind.RECOVERED_ON_RETRY: Label("recovered"),
        EscalationKind.FIRST_SUCCESS: Label("first_ok"),
        EscalationKind.CIRCUIT_OPEN: Label("breaker"),
        EscalationKind.SPEC_INVALID: Label("bad_spec"),
        EscalationKind.ESCAPED_PROCESSES: Label("escaped"),
        EscalationKind.NEW_OUTPUT_SHAPE: Label("new_shape"),
        EscalationKind.INTENT_MISMATCH: Label("intent"),
        EscalationKind.PARTIAL_CONTENT: Label("partial_txt"),
        EscalationKind.FORBIDDEN_OUTPUT: Label("forbidden"),
        EscalationKind.MISSION_WORKER_FAILED: Label("worker_fail"),
        EscalationKind.MISSION_COORDINATOR_FAILED: Label("coord_fail"),
        EscalationKind.MISSION_BUDGET_EXHAUSTED: Label("budget_out"),
        EscalationKind.MISSION_QUESTION: Label("question"),
        EscalationKind.MISSION_REPORT: Label("report"),
    },
    # notifications.state (the outbox)
    "delivery_state": {
        NotificationState.PENDING: Label("… pending", "dim"),
        NotificationState.SENT: Label("✓ sent", "green"),
        NotificationState.FAILED: Label("✗ failed", "bold red"),
        NotificationState.CANCELLED: Label("– cancelled", "dim"),
    },
    # a job's pause flag (jobs.paused), shown in the Jobs view and the job history
    "job_control": {
        "paused": Label("‖ paused", "yellow"),
        "active": Label("active", "dim"),
    },
}


def label(kind: str, value: object) -> Label:
    """The ``Label`` of ``value`` in set ``kind``; an unknown value shows as itself (``"-"``
    for None or ""), so a value added to the ledger before this table still shows."""
    v = str(getattr(value, "value", value)) if value not in (None, "") else ""
    got = LABELS[kind].get(v)
    return got if got is not None else Label(v or "-")


def word(kind: str, value: object) -> str:
    """Just the text of ``label(kind, value)``."""
    return label(kind, value).text


#: The words a ``state:`` or ``kind:`` filter accepts besides the stored value: the label's
#: word without its symbol (``acked``, ``ok``, ``timeout``) and the short kinds.
def _filter_aliases() -> dict[str, dict[str, str]]:
    def bare(text: str) -> str:
        return text.split()[-1].lower()

    state = {bare(lab.text): value for s in ("run_state", "escalation_state", "breaker")
             for value, lab in LABELS[s].items() if bare(lab.text) != value}
    kind = {lab.text: value for value, lab in LABELS["escalation_kind"].items()}
    return {"state": state, "kind": kind}


FILTER_ALIASES: dict[str, dict[str, str]] = _filter_aliases()


def canonical_filter(text: str) -> str:
    """Filter text with the console's words (``state:acked``, ``kind:exhausted``) turned into
    the stored values (``state:acknowledged``, ``kind:retries_exhausted``) that
    ``core.ledger.reads.parse_filter`` matches; everything else is kept as typed."""
    out: list[str] = []
    for tok in text.split(" "):
        key, sep, value = tok.partition(":")
        if sep and key.lower() in FILTER_ALIASES:
            value = FILTER_ALIASES[key.lower()].get(value.lower(), value)
        out.append(f"{key}{sep}{value}")
    return " ".join(out)


def all_glyphs() -> set[str]:
    """Every non-ASCII character the labels use (for the font coverage test)."""
    return {ch for table in LABELS.values() for lab in table.values() for ch in lab.text if ord(ch) > 127}
