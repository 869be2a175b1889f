"""The web console's page loads nothing from outside the server that serves it: operators
offline or behind `ssh -L` get the whole page (fonts included) from that server, and the
browser never calls out to the internet (textual-serve's own page fetched Roboto Mono from
fonts.googleapis.com). In-process (aiohttp's test server on 127.0.0.1; no console is started)."""

from __future__ import annotations

import re

from aiohttp.test_utils import TestClient, TestServer

from console.web import Identity, WebConsole

URL = re.compile(r"""(?:https?|wss?)://[^\s"'()<>]+""")


async def test_the_page_and_its_stylesheets_name_no_other_server():
    server = WebConsole(host="127.0.0.1", port=0, book=None, default=Identity("local-op", False),
                        command_for=lambda who: "false")
    client = TestClient(TestServer(await server._make_app(), host="127.0.0.1"))
    await client.start_server()
    try:
        page = await client.get("/")
        assert page.status == 200
        html = await page.text()
        own = f"{client.host}:{client.port}"
        urls = URL.findall(html)
        assert any(u.startswith("ws://") for u in urls), "the page names its own websocket"
        foreign = [u for u in urls if u.split("://", 1)[1].split("/", 1)[0] != own]
        assert foreign == []

        # what the page loads from this server is there, and names no other server either
        loaded = re.findall(r"""(?:href|src)=["']([^"']+)["']|url\(["']?([^"')]+)["']?\)""", html)
        paths = sorted({"/" + (a or b).split("://", 1)[1].split("/", 1)[1] for a, b in loaded if (a or b).startswith("http")})
        assert any(p.endswith(".ttf") for p in paths), "the font comes from this server"
        for path in paths:
            r = await client.get(path)
            assert r.status == 200, path
            if path.endswith(".css"):  # what a stylesheet loads (its comments may name sites)
                assert re.findall(r"url\(\s*[\"']?(?:https?:)?//", await r.text()) == [], path
    finally:
        await client.close()
