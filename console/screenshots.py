"""SVG screenshots of the console that open offline: Rich's SVG export loads Fira Code from
cdnjs.cloudflare.com when the viewer lacks it; ours keep only the local font (then any
monospace), so opening a screenshot never calls out to the internet."""

from __future__ import annotations

import re

# `, url("https://…") format("…")` after `local("FiraCode-…")` in the export's @font-face rules
_WEB_FONT = re.compile(r""",\s*url\(\s*["']?(?:https?:)?//[^)]*\)\s*(?:format\([^)]*\))?""")


def without_web_fonts(svg: str) -> str:
    """``svg`` (Rich/Textual's SVG export, str) without the font sources on other servers;
    every ``local(...)`` source and the rest of the picture stay as they are."""
    return _WEB_FONT.sub("", svg)
