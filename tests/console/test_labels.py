"""The one label table: every vocabulary value has a display word, filter words map back to
stored values, and every glyph exists in DejaVu Sans Mono."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from console import labels
from core.vocabulary import (
    BreakerState,
    EscalationKind,
    EscalationState,
    NotificationState,
    OutcomeStatus,
    RunState,
    Severity,
)


@pytest.mark.parametrize(("kind", "enum"), [
    ("run_state", RunState), ("outcome_status", OutcomeStatus), ("escalation_state", EscalationState),
    ("severity", Severity), ("breaker", BreakerState), ("delivery_state", NotificationState)])
def test_every_value_of_a_closed_set_has_a_label(kind, enum):
    assert set(labels.LABELS[kind]) == set(enum)


def test_short_kind_words_are_kinds_and_unique():
    assert set(labels.LABELS["escalation_kind"]) <= set(EscalationKind)
    words = [lab.text for lab in labels.LABELS["escalation_kind"].values()]
    assert len(words) == len(set(words)) and all(len(w) <= 11 for w in words)


def test_a_stored_value_finds_its_label():
    assert labels.word("run_state", "timed_out") == labels.word("run_state", RunState.TIMED_OUT) == "◷ timeout"


def test_partial_is_shown_as_partial_not_ok():
    assert "partial" in labels.word("outcome_status", "partial")
    assert "ok" not in labels.word("outcome_status", "partial")


def test_unknown_values_show_as_themselves():
    assert labels.word("run_state", "brand_new_state") == "brand_new_state"
    assert labels.word("run_state", None) == "-"


def test_filter_words_become_stored_values():
    assert labels.canonical_filter("state:acked kind:exhausted disk") == \
        "state:acknowledged kind:retries_exhausted disk"
    assert labels.canonical_filter("STATE:Timeout job:x") == "STATE:timed_out job:x"
    assert labels.canonical_filter("kind:failed") == "kind:failed"


@pytest.mark.skipif(shutil.which("fc-list") is None, reason="fontconfig not installed")
def test_every_glyph_exists_in_dejavu_sans_mono():
    fonts = subprocess.run(["fc-list", "DejaVu Sans Mono", "family"], capture_output=True, text=True).stdout
    if "DejaVu Sans Mono" not in fonts:
        pytest.skip("DejaVu Sans Mono not installed")
    missing = []
    for ch in sorted(labels.all_glyphs() | set("─│▁▂▃▄▅▆▇█·…→")):
        out = subprocess.run(["fc-list", f":charset={ord(ch):x}", "family"], capture_output=True, text=True).stdout
        if "DejaVu Sans Mono" not in out:
            missing.append(f"{ch} U+{ord(ch):04X}")
    assert not missing, f"glyphs missing from DejaVu Sans Mono: {missing}"


def test_manuals_list_of_short_kinds_is_the_labels_table():
    # the manual's Escalations row lists every short kind word; the labels table is the source
    import re
    from pathlib import Path

    manual = (Path(__file__).resolve().parents[2] / "docs" / "console.md").read_text()
    listed = re.search(r"Long kinds show as short words \((.*?)\); the preview", manual)
    assert listed, "docs/console.md lost its list of short kind words"
    pairs = dict(re.findall(r"`([^`]+)` = (\w+)", listed.group(1)))
    assert pairs == {lab.text: str(kind) for kind, lab in labels.LABELS["escalation_kind"].items()}
