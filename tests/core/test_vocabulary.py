"""One word per fact: closed sets are StrEnums in core.vocabulary, used by the rest of core."""

from __future__ import annotations

import pytest

from core import liveness, vocabulary
from core.ledger import lifecycle
from core.supervisor import rules
from core.vocabulary import EscalationKind, RunState, sql_set


def test_lifecycle_state_is_the_vocabulary_run_state():
    assert lifecycle.State is RunState
    assert liveness.RunnerLiveness is vocabulary.RunnerLiveness


def test_every_kind_the_rules_use_is_an_escalation_kind():
    used = (rules.HARD_KINDS | rules.SOFT_KINDS | rules.NOTE_KINDS | rules.SILENT_KINDS
            | rules.RECOVERABLE_KINDS)
    assert used - {k.value for k in EscalationKind} == set()


def test_sql_set_renders_a_sorted_literal_and_refuses_quotes():
    assert sql_set(lifecycle.FAILED_STATES) == "('failed', 'orphaned', 'timed_out')"
    with pytest.raises(ValueError):
        sql_set(["it's"])


def test_no_hand_written_state_lists_or_run_inserts_outside_their_homes():
    """State lists in SQL come from the enums (``sql_set``), and a run row is only ever made
    by ``core.ledger.runs.create``."""
    import pathlib
    import re

    core = pathlib.Path(__file__).resolve().parents[2] / "core"
    lists, inserts = [], []
    for path in core.rglob("*.py"):
        text = path.read_text()
        if path.name != "connection.py":  # migrations are history: never edited
            lists += [f"{path.name}: {m.group(0)}" for m in re.finditer(r"IN \('[a-z_]+'", text)]
        if path.name != "runs.py":
            inserts += [path.name for _ in re.finditer(r"INSERT (?:OR \w+ )?INTO runs\b", text)]
    assert lists == [] and inserts == []
