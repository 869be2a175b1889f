"""Invisible Unicode never reaches the screen as itself; ordinary non-ASCII text does, unchanged.

Tag characters, the combining grapheme joiner, Hangul fillers, variation selectors and the
word joiner family render as nothing: they let a name look blank or like another name, or
carry hidden data after a visible character. ``escaped`` shows them as visible escapes
(``\u3164``), as it shows bidi and zero-width characters, so two names that differ only by
them never look the same.
"""

from __future__ import annotations

import pytest

from console.safe_text import escaped, escaped_line, invisible, text

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
def test_invisible_characters_are_shown_escaped(ch):
    assert invisible(ch)
    esc = ascii(ch)[1:-1]  # "\\u3164", "\\U000e0001"
    assert escaped(f"run{ch}name{ch}") == f"run{esc}name{esc}"
    assert escaped_line(f"a{ch}\nb") == f"a{esc} b"
    assert text(f"x{ch}y").plain == f"x{esc}y"
    assert ch not in escaped(f"x{ch}y")


def test_a_name_made_only_of_fillers_is_not_blank():
    assert escaped("\u3164\u115f\u1160\uffa0") == "\\u3164\\u115f\\u1160\\uffa0"


def test_tag_smuggled_text_is_shown():
    # "ignore previous" spelt in tag characters after a visible word
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "ignore previous")
    out = escaped(f"report{hidden} ok")
    assert out.startswith("report\\U000e0069") and out.endswith(" ok") and not any(ord(c) > 127 for c in out)


def test_variation_selector_smuggling_is_shown():
    payload = "".join(chr(0xE0100 + b) for b in b"secret") + "\ufe01\ufe02"
    out = escaped(f"\U0001f600{payload}")
    assert out.startswith("\U0001f600\\U000e01") and out.endswith("\\ufe01\\ufe02")


def test_an_emoji_keeps_its_presentation_selector_but_a_lone_one_is_shown():
    assert escaped("✔\ufe0f done") == "✔\ufe0f done"
    assert escaped("a\ufe0f") == "a\\ufe0f"


def test_invisible_does_not_hide_an_escape_sequence():
    assert escaped("\x1b\u2060[31mred\x1b\U000e0001]52;c;aGk=\x07") == \
        "\\x1b\\u2060[31mred\\x1b\\U000e0001]52;c;aGk=\\x07"


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
    assert escaped(s) == s
    assert escaped_line(s) == s
    assert not any(invisible(c) for c in s)
