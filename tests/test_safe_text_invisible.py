"""Invisible Unicode never reaches the screen; ordinary non-ASCII text does, unchanged.

Tag characters, the combining grapheme joiner, Hangul fillers, variation selectors and the
word joiner family render as nothing: they let a name look blank or like another name, or
carry hidden data after a visible character. ``clean`` drops them the way it drops bidi and
zero-width characters.
"""

from __future__ import annotations

import pytest

from console.safe_text import clean, invisible, one_line, text

INVISIBLE = {
    "tag_begin": "\U000e0001",
    "tag_space": "\U000e0020",
    "tag_a": "\U000e0041",
    "tag_cancel": "\U000e007f",
    "combining_grapheme_joiner": "\u034f",
    "hangul_filler": "\u3164",
    "hangul_choseong_filler": "\u115f",
    "hangul_jungseong_filler": "\u1160",
    "halfwidth_hangul_filler": "\uffa0",
    "mongolian_vowel_separator": "\u180e",
    "word_joiner": "\u2060",
    "function_application": "\u2061",
    "invisible_times": "\u2062",
    "invisible_separator": "\u2063",
    "invisible_plus": "\u2064",
    "bom": "\ufeff",
    "vs1": "\ufe00",
    "vs16": "\ufe0f",
    "vs17": "\U000e0100",
    "vs256": "\U000e01ef",
    "mongolian_fvs1": "\u180b",
    "khmer_inherent_aq": "\u17b4",
    "shorthand_format": "\U0001bca0",
    "musical_begin_beam": "\U0001d173",
}


@pytest.mark.parametrize("ch", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_invisible_characters_are_dropped(ch):
    assert invisible(ch)
    assert clean(f"run{ch}name{ch}") == "runname"
    assert one_line(f"a{ch}\nb") == "a b"
    assert text(f"x{ch}y").plain == "xy"


def test_a_name_made_only_of_fillers_is_empty():
    assert clean("\u3164\u115f\u1160\uffa0") == ""


def test_tag_smuggled_text_is_removed():
    # "ignore previous" spelt in tag characters after a visible word
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "ignore previous")
    assert clean(f"report{hidden} ok") == "report ok"


def test_variation_selector_smuggling_is_removed():
    payload = "".join(chr(0xE0100 + b) for b in b"secret") + "\ufe01\ufe02"
    assert clean(f"\U0001f600{payload}") == "\U0001f600"


def test_invisible_does_not_hide_an_escape_sequence():
    assert clean("\x1b\u2060[31mred\x1b\U000e0001]52;c;aGk=\x07") == "red"


ORDINARY = [
    "héllo wörld — naïve café, Ångström, façade, Øre, ß",
    "日本語のテキスト、中文文本，한국어 텍스트",  # CJK and Hangul (real syllables, not fillers)
    "Привет, Γειά σου, שלום, مرحبا, नमस्ते, ไทย",
    "emoji 🎉 👍🏽 🚀 ✓ ★ → ∑ ½ € £ ¥",
    "combining: e\u0301 a\u0308 n\u0303",  # accents as combining marks stay
    "ﾊﾝｶｸ ｶﾀｶﾅ and ＦＵＬＬＷＩＤＴＨ",
]


@pytest.mark.parametrize("s", ORDINARY)
def test_ordinary_non_ascii_text_passes_unchanged(s):
    assert clean(s) == s
    assert one_line(s) == s
    assert not any(invisible(c) for c in s)
