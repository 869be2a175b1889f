"""Who may open the web console, and as whom: loopback without tokens, tokens everywhere else,
401 for none, 403 for a wrong one or another site's page, a token's name as the operator and
its read_only flag as --read-only. In-process (aiohttp's test server; no console is started)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from console.bind import BindError, is_loopback, parse_bind
from console.web import (
    WHO,
    Identity,
    TokenBook,
    WebConsole,
    WebError,
    console_command,
    load_tokens,
)

GOOD = "a-long-enough-token-0123"


def _tokens(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    path.chmod(mode)
    return path


async def _client(book: TokenBook | None) -> TestClient:
    server = WebConsole(host="127.0.0.1", port=0, book=book, default=Identity("local-op", False),
                        command_for=lambda who: "false")
    app = await server._make_app()

    async def whoami(request):  # the identity the access check attached, as a console would get it
        from aiohttp import web

        who = request[WHO]
        return web.Response(text=f"{who.name} {who.read_only}")

    app.router.add_get("/whoami", whoami)
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


async def test_tokens_decide_who_gets_in_and_as_whom(tmp_path):
    book = load_tokens(_tokens(tmp_path, f'[ana]\ntoken = "{GOOD}"\n[viewer]\ntoken = "{GOOD}-ro"\nread_only = true\n'))
    client = await _client(book)
    try:
        assert (await client.get("/")).status == 401
        assert (await client.get("/ws")).status == 401
        assert (await client.get("/static/js/textual.js")).status == 401
        assert (await client.get("/?token=wrong-token-but-long-enough")).status == 403
        assert (await client.get("/", headers={"Authorization": "Bearer nope"})).status == 403

        # ?token= on the page: a cookie and a redirect to the same page without it
        r = await client.get(f"/?token={GOOD}&fontsize=14", allow_redirects=False)
        assert r.status == 302 and r.headers["Location"] == "/?fontsize=14"
        assert "HttpOnly" in r.headers["Set-Cookie"] and "SameSite=Strict" in r.headers["Set-Cookie"]
        page = await client.get("/")  # the cookie now
        assert page.status == 200 and "data-session-websocket-url" in await page.text()
        assert await (await client.get("/whoami")).text() == "ana False"

        bearer = {"Authorization": f"Bearer {GOOD}-ro"}
        assert await (await client.get("/whoami", headers=bearer)).text() == "viewer True"
        # another site's page cannot drive the console through the operator's browser
        assert (await client.get("/", headers={**bearer, "Origin": "http://evil.example"})).status == 403
    finally:
        await client.close()


async def test_loopback_without_a_token_file_is_the_operator(tmp_path):
    client = await _client(None)
    try:
        assert await (await client.get("/whoami")).text() == "local-op False"
        assert (await client.get("/", headers={"Origin": "http://evil.example"})).status == 403
    finally:
        await client.close()


def test_the_console_runs_as_the_tokens_name_and_read_only_when_it_says_so():
    argv = shlex.split(console_command(Path("/l/wk.db"), Identity("ana; rm -rf /", True)))
    assert argv[argv.index("--as") + 1] == "ana; rm -rf /"  # quoted, one argument
    assert "--read-only" in argv and argv[argv.index("--ledger") + 1] == "/l/wk.db"
    assert "--read-only" not in shlex.split(console_command(Path("/l/wk.db"), Identity("ana", False)))


@pytest.mark.parametrize("text, mode, says", [
    ('[ana]\ntoken = "short"\n', 0o600, "[ana] field 'token'"),
    (f'[ana]\ntoken = "{GOOD}"\n', 0o644, "readable by others"),
    (f'[ana]\ntoken = "{GOOD}"\n[bob]\ntoken = "{GOOD}"\n', 0o600, "[bob] uses a token another person has"),
    (f'[ana]\ntoken = "{GOOD}"\nwrite = true\n', 0o600, "field 'write'"),
    ("token = 'x'\n", 0o600, "'token' must be a table"),
    ("", 0o600, "no tokens"),
    ("[ana\n", 0o600, "not TOML"),
])
def test_a_bad_token_file_is_one_line_naming_it(tmp_path, text, mode, says):
    path = _tokens(tmp_path, text, mode)
    with pytest.raises(WebError) as err:
        load_tokens(path)
    assert str(path) in str(err.value) and says in str(err.value) and "\n" not in str(err.value)


def test_binds():
    assert parse_bind("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_bind("[::1]:9000") == ("::1", 9000)
    for bad in ("8080", "host:", ":80", "h:99999"):
        with pytest.raises(BindError):
            parse_bind(bad)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5") and not is_loopback("example.org")


def test_a_generated_token_is_the_operators_and_matches_only_itself():
    book, token = TokenBook.generated("ana", read_only=False)
    assert len(token) >= 24 and book.match(token) == Identity("ana", False)
    assert book.match(token + "x") is None and book.match("") is None


def test_off_loopback_without_a_token_file_a_token_is_made_and_printed_once(monkeypatch, tmp_path):
    from console import web

    servers: list[WebConsole] = []
    monkeypatch.setattr(web.WebConsole, "serve", lambda self, debug=False: servers.append(self))
    said: list[str] = []
    web.serve_console(ledger=tmp_path / "wk.db", bind="0.0.0.0:8080", token_file=None, operator="ana",
                      read_only=False, echo=said.append)
    (line,) = said
    token = line.split("?token=", 1)[1].split()[0]
    assert servers[0].book is not None and servers[0].book.match(token) == Identity("ana", False)
    said.clear()
    web.serve_console(ledger=tmp_path / "wk.db", bind="127.0.0.1:8080", token_file=None, operator="ana",
                      read_only=True, echo=said.append)
    assert servers[1].book is None and "token" not in said[0] and "read-only" in said[0]
    with pytest.raises(WebError, match="--bind nonsense"):
        web.serve_console(ledger=tmp_path / "wk.db", bind="nonsense", token_file=None, operator="ana",
                          read_only=False, echo=said.append)


def test_the_cli_says_in_one_line_what_is_wrong_with_web_flags(tmp_path):
    from click.testing import CliRunner

    from console.cli.main import cli
    from tests.kit import console_fixtures as cf

    ledger = tmp_path / "wk.db"
    cf.build(ledger)
    r = CliRunner()
    res = r.invoke(cli, ["console", "--ledger", str(ledger), "--bind", "0.0.0.0:8080"])
    assert res.exit_code == 2 and "--bind and --token-file go with --web" in res.output
    loose = _tokens(tmp_path, f'[ana]\ntoken = "{GOOD}"\n', 0o644)
    res = r.invoke(cli, ["console", "--web", "--ledger", str(ledger), "--token-file", str(loose)])
    assert res.exit_code == 2 and "readable by others" in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1
