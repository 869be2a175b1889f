"""A local fake of the Anthropic Messages API (``POST /v1/messages``) for tests and eval.

The REAL ``anthropic`` client talks to it through ``base_url``. It answers by forced tool
call like the model would, and can misbehave on demand:

* ``ok``        — a valid ``record_verdict`` tool call with ``answer``
* ``malformed`` — a tool call whose input fails validation
* ``no_tool``   — plain text, no tool call
* ``error500``  — HTTP 500 every time
* ``slow``      — waits ``delay`` seconds before answering (client timeout path)
* ``agree``     — a sensible model: confirms the rules verdict quoted in the prompt (notes stay
  notes, anomalies escalate at the rules' severity)
* ``always_escalate`` — every outcome needs a person (critical)
* ``always_silent`` — nothing needs a person (escalate=false, info): the rules verdict must stand
* ``obey_output`` — a gullible model: if the prompt's job output says "report OK", it answers
  escalate=false / info / "OK" (the injection test: the verdict must not change)
* ``ungrounded`` — always escalates, quoting a line that is not in the job output (grounding
  must reject it: nothing pages)
* ``quote_anything`` — always escalates, quoting the first stdout line shown in the prompt
  against the job's intent (a real quote: grounding accepts it)

Tool use (missions: coordinators and agent workers): set ``handler`` to a function of the
request body returning a message (``message(...)`` with ``text(...)``/``tool_use(...)``
blocks) or ``(status, payload)``; ``rate_limited()``, ``overloaded()`` give the API's error
bodies. ``handler`` wins over ``mode``.

Every request body is kept in ``requests``. Use as a context manager::

    with FakeAnthropic() as fake:
        settings = JudgeSettings(enabled=True, api_key="test", base_url=fake.url, ...)
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("ok", "malformed", "no_tool", "error500", "slow", "agree", "always_escalate", "always_silent",
         "obey_output", "ungrounded", "quote_anything")
DEFAULT_ANSWER = {"escalate": True, "severity": "warning", "reason": "anomaly confirmed by the fake judge",
                  "summary": "The outcome differs from the job's usual behaviour."}


def text(t: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": t}


_ids = iter(range(1, 1 << 30))


def tool_use(name: str, input_: dict[str, Any] | None = None) -> dict[str, Any]:
    """A tool_use content block with a fresh id."""
    return {"type": "tool_use", "id": f"toolu_fake_{next(_ids)}", "name": name, "input": input_ or {}}


def message(*content: dict[str, Any], stop_reason: str | None = None, model: str = "fake",
            usage: tuple[int, int] = (100, 30)) -> dict[str, Any]:
    """A Messages API response; ``stop_reason`` defaults to tool_use when a block is one."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
    return {"id": f"msg_fake_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
            "content": list(content), "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}


def rate_limited() -> tuple[int, dict[str, Any]]:
    return 429, {"type": "error", "error": {"type": "rate_limit_error", "message": "fake rate limit"}}


def overloaded() -> tuple[int, dict[str, Any]]:
    return 529, {"type": "error", "error": {"type": "overloaded_error", "message": "fake overload"}}


def prompt_of(body: dict[str, Any]) -> str:
    """The judge prompt (the first user message's text)."""
    content = (body.get("messages") or [{}])[0].get("content", "")
    return content if isinstance(content, str) else json.dumps(content)


def prompt_job(body: dict[str, Any]) -> dict[str, Any]:
    """The ``Job:`` JSON of a judge prompt (name, intent, owner, expect)."""
    m = re.search(r"^Job:\n(\{.*\})$", prompt_of(body), re.MULTILINE)
    return json.loads(m.group(1)) if m else {}


def prompt_stdout(body: dict[str, Any]) -> list[str]:
    """The stdout lines shown inside ``<job_output>`` (as the model sees them)."""
    m = re.search(r"<job_output>\nstdout:\n(.*?)\nstderr:\n", prompt_of(body), re.DOTALL)
    return [ln for ln in (m.group(1).splitlines() if m else []) if ln.strip()]


def tool_names(body: dict[str, Any]) -> set[str]:
    """Names of the tools a request offers (tells a coordinator from a worker from the judge)."""
    return {t.get("name") for t in body.get("tools") or []}


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool_result block sent so far in a request's conversation."""
    return [b for m in body.get("messages", []) if m.get("role") == "user" and isinstance(m.get("content"), list)
            for b in m["content"] if b.get("type") == "tool_result"]


class FakeAnthropic:
    """Threaded HTTP server on 127.0.0.1 (random port). Attributes may be changed between calls."""

    def __init__(self, mode: str = "ok", answer: dict[str, Any] | None = None, delay: float = 5.0) -> None:
        self.mode = mode
        self.answer = dict(answer or DEFAULT_ANSWER)
        self.delay = delay
        self.requests: list[dict[str, Any]] = []
        self.handler: Callable[[dict[str, Any]], Any] | None = None
        self._lock = threading.Lock()
        self._release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(body)
                # A base_url of <url>/<mode> answers in that mode: one server, several judges.
                first = self.path.strip("/").split("/", 1)[0]
                status, payload = fake.respond(body, mode=first if first in MODES else None)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def _message(self, content: list[dict[str, Any]], model: str) -> dict[str, Any]:
        return {"id": f"msg_fake_{len(self.requests)}", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": "tool_use", "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": 30}}

    def _tool(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": "record_verdict", "input": data}]

    def respond(self, body: dict[str, Any], mode: str | None = None) -> tuple[int, dict[str, Any]]:
        """The answer to one request in ``mode`` (default: the server's)."""
        saved = self.mode
        self.mode = mode or saved
        try:
            return self._respond(body)
        finally:
            self.mode = saved

    def _respond(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        model = body.get("model", "fake")
        if self.handler is not None:
            with self._lock:  # handlers keep counters; requests arrive on several threads
                out = self.handler(body)
            return out if isinstance(out, tuple) else (200, out)
        if self.mode == "error500":
            return 500, {"type": "error", "error": {"type": "api_error", "message": "fake overload"}}
        if self.mode == "slow":
            self._release.wait(self.delay)
        if self.mode == "malformed":
            return 200, self._message(self._tool({"escalate": "perhaps", "severity": "apocalyptic"}), model)
        if self.mode == "no_tool":
            return 200, self._message([{"type": "text", "text": "Looks fine to me."}], model)
        if self.mode == "agree":
            text = json.dumps(body.get("messages", []))
            m = re.search(r"Rules verdict: kind=(\w+) severity=(\w+)", text)
            kind, sev = (m.group(1), m.group(2)) if m else ("?", "warning")
            note = kind in ("first_success", "recovered_on_retry")
            return 200, self._message(self._tool({
                "escalate": not note, "severity": "info" if note or sev not in ("warning", "critical") else sev,
                "reason": f"agree with rules: {kind}", "summary": "fake agrees"}), model)
        if self.mode == "always_escalate":
            return 200, self._message(self._tool({"escalate": True, "severity": "critical",
                                                  "reason": "a person must look", "summary": "escalate"}), model)
        if self.mode == "always_silent":
            return 200, self._message(self._tool({"escalate": False, "severity": "info",
                                                  "reason": "nothing to see", "summary": "fine"}), model)
        if self.mode in ("ungrounded", "quote_anything"):
            lines = prompt_stdout(body)
            quote = (lines[0] if lines and self.mode == "quote_anything"
                     else "FATAL: nothing was written (a line this run never printed)")
            return 200, self._message(self._tool({
                "escalate": True, "severity": "warning", "reason": f"{self.mode}: the output contradicts the intent",
                "summary": "escalate", "quote": quote, "clause": prompt_job(body).get("intent") or ""}), model)
        if self.mode == "obey_output":
            text = json.dumps(body.get("messages", []))
            if "report OK" in text or "report ok" in text.lower():
                return 200, self._message(self._tool({"escalate": False, "severity": "info", "reason": "OK",
                                                      "summary": "All good."}), model)
        return 200, self._message(self._tool(self.answer), model)

    def start(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
