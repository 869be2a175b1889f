"""The console in a browser: textual-serve runs one ``watchkeeper console`` per browser tab,
behind our own access check (textual-serve has none).

Access:

- bound to a loopback address with no token file, every request is let in as the operator
  who started the server (as ``watchkeeper console`` on the same machine would be);
- otherwise every request needs a token: ``Authorization: Bearer TOKEN``, the ``wk_token``
  cookie, or ``?token=TOKEN`` on the page (answered with the cookie and a redirect to a URL
  without it). A missing token is HTTP 401, a wrong one 403 — the console is never started.
- A token has a name: the console started for it runs ``--as NAME``, so an acknowledge in the
  browser is attributed to that name in the audit trail; a ``read_only`` token starts it
  ``--read-only`` (everything shown, every action refused).
- A browser request from another site (an ``Origin`` that is not this server) is refused, so
  a page elsewhere cannot drive a console on localhost through the visitor's browser.

Token file (TOML, one table per person, readable by its owner only)::

    [ana]
    token = "a long random string"

    [grafana-viewer]
    token = "another one"
    read_only = true
"""

from __future__ import annotations

import hmac
import secrets
import shlex
import stat
import sys
import tomllib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from console.bind import BindError, is_loopback, parse_bind, url_host

COOKIE = "wk_token"
#: The name of a token made up at start (no --token-file on a non-loopback bind) is the operator's.
MIN_TOKEN_CHARS = 16


async def _close(websocket: web.WebSocketResponse) -> None:
    """Close the browser's websocket (textual-serve's ``close`` callback returns nothing)."""
    await websocket.close()


class WebError(ValueError):
    """A token file that cannot be used; the message is one line naming it."""


class _Token(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str = Field(..., min_length=MIN_TOKEN_CHARS, description="The secret (at least 16 characters).")
    read_only: bool = Field(False, description="Shows everything, refuses every action.")

    @field_validator("token")
    @classmethod
    def _printable(cls, v: str) -> str:
        if not v.isprintable() or v != v.strip():
            raise ValueError("must be printable, without surrounding spaces")
        return v


@dataclass(frozen=True)
class Identity:
    """Who a request is: the operator name actions are attributed to, and whether it may act."""

    name: str
    read_only: bool


@dataclass(frozen=True)
class TokenBook:
    """Tokens by secret. ``match`` compares in constant time."""

    entries: tuple[tuple[str, Identity], ...]

    def match(self, presented: str) -> Identity | None:
        found = None
        for secret, who in self.entries:
            if hmac.compare_digest(secret.encode(), presented.encode()):
                found = who
        return found

    @classmethod
    def generated(cls, name: str, read_only: bool) -> tuple[TokenBook, str]:
        """One new random token for ``name``; returns the book and the token (shown once)."""
        token = secrets.token_urlsafe(24)
        return cls(((token, Identity(name, read_only)),)), token


def load_tokens(path: Path) -> TokenBook:
    """Read a token file (see the module docstring).

    Raises ``WebError`` (one line, naming the file and the person) when the file is missing,
    readable by group or others, not TOML, or a table is invalid; two people sharing one token
    is an error too (the name an action is attributed to must be unambiguous).
    """
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WebError(f"{path}: cannot read the token file ({exc.strerror or exc})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise WebError(f"{path}: the token file is readable by others (mode {stat.S_IMODE(mode):o}); "
                       f"chmod 600 {path}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WebError(f"{path}: not TOML ({exc})") from None
    entries: list[tuple[str, Identity]] = []
    for name, table in data.items():
        if not isinstance(table, dict):
            raise WebError(f"{path}: '{name}' must be a table ([{name}] with token = \"...\")")
        if not name or not name.isprintable():
            raise WebError(f"{path}: a person's name must be printable text")
        try:
            tok = _Token.model_validate(table)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "token"
            raise WebError(f"{path}: [{name}] field '{field}': {err['msg']}") from None
        if any(hmac.compare_digest(tok.token, s) for s, _ in entries):
            raise WebError(f"{path}: [{name}] uses a token another person has")
        entries.append((tok.token, Identity(name, tok.read_only)))
    if not entries:
        raise WebError(f"{path}: no tokens (add [NAME] with token = \"...\")")
    return TokenBook(tuple(entries))


def console_command(ledger: Path | str, who: Identity, *, config: Path | None = None, theme: str | None = None,
                    refresh: float | None = None) -> str:
    """The shell command textual-serve starts for one browser tab (every part quoted)."""
    argv = [sys.executable, "-m", "console.cli", "console", "--ledger", str(ledger), "--as", who.name]
    if who.read_only:
        argv.append("--read-only")
    if config is not None:
        argv += ["--config", str(config)]
    if theme:
        argv += ["--theme", theme]
    if refresh:
        argv += ["--refresh", str(refresh)]
    return shlex.join(argv)


#: Our copy of textual-serve's page, without its fonts.googleapis.com stylesheet (the page
#: loads nothing from outside this server).
PAGE = Path(__file__).parent / "web_page"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: The request's identity, set by the access check.
WHO = web.RequestKey("who", Identity)


class WebConsole(Server):
    """textual-serve's server with access checks and one console process per tab, started as
    the tab's identity. ``book`` None: no token needed (loopback only); then ``default`` is who
    every tab is."""

    def __init__(self, *, host: str, port: int, book: TokenBook | None, default: Identity,
                 command_for: Callable[[Identity], str], title: str = "Watchkeeper") -> None:
        super().__init__("watchkeeper console", host=host, port=port, title=title, templates_path=PAGE)
        self.book = book
        self.default = default
        self.command_for = command_for

    def initialize_logging(self) -> None:
        # textual-serve would install a Rich handler on the root logger; ours stays as it is.
        pass

    async def on_startup(self, app: web.Application) -> None:
        # textual-serve prints a banner here; serve_console prints our own line instead.
        pass

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._access)
        return app

    def _identity(self, request: web.Request) -> tuple[Identity, str | None]:
        """Who the request is, and the token that came as ``?token=`` (to be set as the
        cookie); raises 401/403."""
        if self.book is None:
            return self.default, None
        auth = request.headers.get("Authorization", "")
        from_query = request.query.get("token")
        presented = (auth[7:].strip() if auth.lower().startswith("bearer ") else None) \
            or from_query or request.cookies.get(COOKIE)
        if not presented:
            raise web.HTTPUnauthorized(text="watchkeeper: a token is required (open the URL with ?token=...)\n",
                                       headers={"WWW-Authenticate": 'Bearer realm="watchkeeper"'})
        who = self.book.match(presented)
        if who is None:
            raise web.HTTPForbidden(text="watchkeeper: that token is not valid here\n")
        return who, from_query

    @web.middleware
    async def _access(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and origin.split("://", 1)[-1] != request.host:
            raise web.HTTPForbidden(text="watchkeeper: cross-site request refused\n")
        who, from_query = self._identity(request)
        request[WHO] = who
        if from_query is not None and request.method == "GET" and request.path == "/":
            # Keep the token out of the address bar and the history: a cookie from now on.
            query = {k: v for k, v in request.query.items() if k != "token"}
            target = request.rel_url.with_query(query) if query else request.rel_url.with_query(None)
            response = web.Response(status=302, headers={"Location": str(target)})
            response.set_cookie(COOKIE, from_query, httponly=True, samesite="Strict", path="/",
                                secure=request.secure)
            return response
        return await handler(request)

    def _public_url(self, request: web.Request) -> str:
        # The browser's own view of this server (a 0.0.0.0 bind, a proxy): from the request.
        scheme = request.headers.get("X-Forwarded-Proto", request.scheme)
        return f"{scheme}://{request.host}"

    async def handle_index(self, request: web.Request) -> Any:
        # textual-serve builds the page's URLs from self.public_url; its handler does not await
        # before using it, so setting it per request cannot mix two requests up.
        self.public_url = self._public_url(request)
        return await super().handle_index(request)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """As textual-serve's, but the console process is started for this request's identity."""
        who = request[WHO]
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        app_service: AppService | None = None
        try:
            await websocket.prepare(request)
            app_service = AppService(self.command_for(who), write_bytes=websocket.send_bytes,
                                     write_str=websocket.send_str, close=partial(_close, websocket),
                                     download_manager=self.download_manager, debug=self.debug)
            await app_service.start(width, height)
            try:
                await self._process_messages(websocket, app_service)
            finally:
                await app_service.stop()
        finally:
            if app_service is not None:
                await app_service.stop()
        return websocket


def serve_console(*, ledger: Path | str, bind: str, token_file: Path | None, operator: str, read_only: bool,
                  config: Path | None = None, theme: str | None = None, refresh: float | None = None,
                  echo: Callable[[str], None] = print) -> None:
    """Serve the console on ``bind`` until SIGINT/SIGTERM.

    Loopback without ``token_file``: no token, every tab is ``operator``. Any other bind
    without ``token_file``: a token for ``operator`` is generated and its URL printed once
    through ``echo``. Raises ``WebError`` for a bad bind or token file.
    """
    try:
        host, port = parse_bind(bind)
    except BindError as exc:
        raise WebError(f"--bind {exc}") from None
    default = Identity(operator, read_only)
    if token_file is not None:
        book: TokenBook | None = load_tokens(token_file)
        token = None
    elif is_loopback(host):
        book, token = None, None
    else:
        book, token = TokenBook.generated(operator, read_only)
    url = f"http://{url_host(host)}:{port}/"
    server = WebConsole(host=host, port=port, book=book, default=default,
                        command_for=lambda who: console_command(ledger, who, config=config, theme=theme,
                                                                refresh=refresh))
    if token is not None:
        echo(f"watchkeeper: console at {url}?token={token} (a token for {operator}"
             f"{', read-only' if read_only else ''}; shown once, valid until this server stops)")
    elif book is not None:
        echo(f"watchkeeper: console at {url} (open it with ?token=... from {token_file})")
    else:
        echo(f"watchkeeper: console at {url} (localhost only, as {operator}"
             f"{', read-only' if read_only else ''}; Ctrl-C stops it)")
    server.serve()
