"""SVG screenshots of the console (the palette's Screenshot, the manual's pictures) name no
font or stylesheet on another server: Rich's export loads Fira Code from cdnjs, ours keep
only the local font, so opening one offline calls out nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kit import console_fixtures as cf
from tests.kit.pilot import loaded, make_app

DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
# a URL the SVG would load: url(...) in its style, href/src attributes
LOADED = re.compile(r"""url\(\s*["']?((?:https?:)?//[^"')]+)|(?:href|src)\s*=\s*["']((?:https?:)?//[^"']+)""")


def _loaded_urls(svg: str) -> list[str]:
    return [a or b for a, b in LOADED.findall(svg)]


@pytest.mark.slow
async def test_a_saved_screenshot_loads_nothing_from_other_servers(tmp_path):
    path = tmp_path / "wk.db"
    cf.build(path)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        raw = app.export_screenshot()
        app.action_screenshot(filename="shot.svg", path=str(tmp_path / "shots"))
    assert _loaded_urls(raw), "Rich's own export names its web font (what this guards against)"
    svg = (tmp_path / "shots" / "shot.svg").read_text(encoding="utf-8")
    assert _loaded_urls(svg) == []
    assert 'local("FiraCode-Regular")' in svg and "rich-terminal" in svg


def test_the_manuals_pictures_load_nothing_from_other_servers():
    pictures = sorted(DOCS_IMAGES.glob("*.svg"))
    assert pictures
    for picture in pictures:
        assert _loaded_urls(picture.read_text(encoding="utf-8")) == [], picture.name
