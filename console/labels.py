"""Display words for the vocabulary: ONE table, used by every view, dialog and the filter.

The ledger stores the values of ``core.vocabulary``'s closed sets (``succeeded``,
``acknowledged``, ``retries_exhausted`` …); the console shows each as a short word plus a
symbol (never colour alone: ``NO_COLOR`` and 16-colour terminals lose nothing) and a style
name (a colour word that ``PagedTable`` maps to a theme variable).

Every glyph here exists in DejaVu Sans Mono (``tests/test_console_labels.py`` checks the
font when it is installed): ``⧗`` for example does not, so a timeout shows ``◷``.

The keys are the stored values as plain strings, so the table works whether a caller holds
a ``StrEnum`` member or the text read back from SQLite.
"""

from __future__ import annotations

from typing import NamedTuple


class Label(NamedTuple):
    """A value as the console shows it: ``text`` (symbol + word) and ``style`` (colour words
    such as ``"bold red"``; ``PagedTable`` maps red/yellow/green/cyan/magenta to the theme)."""

    text: str
    style: str = ""


#: The one table: set name → stored value → Label. Set names follow ``core.vocabulary``.
LABELS: dict[str, dict[str, Label]] = {
    # runs.state
    "run_state": {
        "queued": Label("… queued", "dim"),
        "spawned": Label("▹ spawned", "cyan"),
        "running": Label("▸ running", "cyan"),
        "verifying": Label("? verify", "cyan"),
        "succeeded": Label("✓ ok", "green"),
        "failed": Label("✗ failed", "bold red"),
        "blocked": Label("■ blocked", "yellow"),
        "timed_out": Label("◷ timeout", "bold red"),
        "orphaned": Label("† orphan", "bold magenta"),
        "abandoned": Label("⊘ abandon", "dim"),
    },
    # job_outcomes.status (the handoff's claim, or the exit code's for a plain shell job)
    "outcome_status": {
        "success": Label("✓ success", "green"),
        "failed": Label("✗ failed", "bold red"),
        "partial": Label("◐ partial", "yellow"),
    },
    # escalations.state
    "escalation_state": {
        "open": Label("● open", "bold"),
        "acknowledged": Label("✓ acked", "dim"),
        "snoozed": Label("z snoozed", "dim"),
        "resolved": Label("○ resolved", "dim"),
    },
    # escalations.severity
    "severity": {
        "critical": Label("▲ CRIT", "bold red"),
        "warning": Label("◆ WARN", "yellow"),
        "info": Label("· info", ""),
    },
    # jobs.breaker_state
    "breaker": {
        "closed": Label("closed", "dim"),
        "open": Label("⚡ OPEN", "bold red"),
        "half_open": Label("½ half", "yellow"),
    },
    # escalations.kind: short words so an 80-column table need not cut them (the preview
    # and the detail screens give the full kind)
    "escalation_kind": {
        "retries_exhausted": Label("exhausted"),
        "verification_failed": Label("verify_fail"),
        "output_mismatch": Label("mismatch"),
        "low_confidence": Label("low_conf"),
        "recovered_on_retry": Label("recovered"),
        "first_success": Label("first_ok"),
        "circuit_open": Label("breaker"),
        "spec_invalid": Label("bad_spec"),
    },
    # notifications.state (the outbox)
    "delivery_state": {
        "pending": Label("… pending", "dim"),
        "sent": Label("✓ sent", "green"),
        "failed": Label("✗ failed", "bold red"),
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
