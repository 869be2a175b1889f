"""The one label table: every vocabulary value has a display word, filter words map back to
stored values, and every glyph exists in DejaVu Sans Mono."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from console import labels
from core.ledger.lifecycle import State


def test_every_run_state_has_a_label():
    assert set(labels.LABELS["run_state"]) == {str(s) for s in State}


def test_severities_and_escalation_states_are_labelled():
    from core.vocabulary import Severity

    assert set(labels.LABELS["severity"]) == {str(s) for s in Severity}
    assert set(labels.LABELS["escalation_state"]) == {"open", "acknowledged", "snoozed", "resolved"}


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
