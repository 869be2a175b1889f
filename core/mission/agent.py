"""The agent worker process: ``python -m core.mission.agent`` (run by the runner for
``kind = "agent"`` jobs).

A Claude session through the Messages API with tool use. It ends by writing the structured
result as its handoff (``$WATCHKEEPER_HANDOFF``): ``status`` (success | failed | partial),
``result``, ``confidence`` (0–1), ``steps_used``, ``error``, plus ``tokens`` and ``cost``
(dollars) so the budget is checked like any handoff's.

Dual termination: natural completion (the model calls ``submit_result``), or the step cap
(``max_steps``, one step per API call) or the budget (``budget.tokens``/``budget.cost``)
runs out, which ends ``partial`` with a note of what is missing.

Exit codes: 0 success/partial; 75 transient (rate limit, overload, connection or timeout:
retried with backoff by the run policy); 65 permanent (refusal, invalid output, a failed
result, a rejected request: not retried).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import anthropic
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.mission.worker import read_input
from core.spec.model import AGENT_EXIT_PERMANENT, AGENT_EXIT_TRANSIENT
from core.vocabulary import AgentTool, OutcomeStatus

SUBMIT = "submit_result"
OUTPUT_CHARS = 8000
COMMAND_TIMEOUT_S = 120.0


class Submitted(BaseModel):
    """The model's final answer (the ``submit_result`` tool input)."""

    model_config = ConfigDict(extra="forbid")
    status: str = Field(pattern="^(success|failed|partial)$")
    result: Any = None
    confidence: float = Field(ge=0, le=1)
    error: str | None = None
    notes: str | None = None


SUBMIT_TOOL = {
    "name": SUBMIT,
    "description": ("Finish: submit your structured result once. status success when done, partial when "
                    "something is missing (say what in notes), failed when you could not do the task."),
    "input_schema": {"type": "object", "properties": {
        "status": {"type": "string", "enum": ["success", "failed", "partial"]},
        "result": {"description": "your deliverable (text or JSON)"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "error": {"type": ["string", "null"]},
        "notes": {"type": "string", "description": "what is missing, if anything"}},
        "required": ["status", "result", "confidence"]},
}
TOOL_DEFS = {
    "read_file": {"name": "read_file", "description": "Read a text file under the working folder.",
                  "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    "write_file": {"name": "write_file", "description": "Write a text file under the working folder.",
                   "input_schema": {"type": "object", "properties": {"path": {"type": "string"},
                                                                     "content": {"type": "string"}},
                                    "required": ["path", "content"]}},
    "run_command": {"name": "run_command", "description": "Run an allowed program (argv list) in the working folder.",
                    "input_schema": {"type": "object", "properties": {"argv": {"type": "array",
                                                                               "items": {"type": "string"}}},
                                     "required": ["argv"]}},
}


class AgentSession:
    """One agent session; ``run()`` returns the process exit code after writing the handoff."""

    def __init__(self, cfg: dict[str, Any], mission: dict[str, Any], cwd: Path, handoff: Path) -> None:
        self.agent = cfg["agent"]
        self.max_steps = int(cfg.get("max_steps") or 10)
        self.budget = cfg.get("budget") or {}
        self.mission = mission
        self.cwd = cwd.resolve()
        self.handoff = handoff
        self.steps = 0
        self.tokens = 0
        self.cost = 0.0
        self.files: list[str] = []
        self.commands: list[dict[str, Any]] = []
        self.last_text = ""

    # -- the prompt -----------------------------------------------------------------------------
    def task_text(self) -> str:
        context = self.mission.get("context")
        ctx = context if isinstance(context, str) else json.dumps(context, default=str) if context is not None else ""
        text = str(self.agent.get("task") or "{task}")
        for key, value in (("{task}", str(self.mission.get("task") or os.environ.get("WATCHKEEPER_TASK_TEXT", ""))),
                           ("{context}", ctx), ("{goal}", str(self.mission.get("goal") or ""))):
            text = text.replace(key, value)
        if context is not None and "{context}" not in str(self.agent.get("task") or ""):
            text += f"\n\n<context>\n{ctx}\n</context>"
        return text

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> int:
        client = anthropic.Anthropic(max_retries=0, timeout=120.0)
        tools = [SUBMIT_TOOL] + [TOOL_DEFS[t] for t in self.agent.get("tools") or [] if t in TOOL_DEFS]
        messages: list[dict[str, Any]] = [{"role": "user", "content": self.task_text()}]
        while True:
            missing = self._cap()
            if missing:
                return self._partial(missing)
            try:
                msg = client.messages.create(model=self.agent["model"], max_tokens=int(self.agent.get("max_tokens", 2048)),
                                             system=self.agent.get("system") or "", tools=cast(Any, tools),
                                             messages=cast(Any, messages))
            except (anthropic.RateLimitError, anthropic.APIConnectionError, anthropic.APITimeoutError) as exc:
                return self._fail("rate_limit" if isinstance(exc, anthropic.RateLimitError) else "timeout",
                                  str(exc), AGENT_EXIT_TRANSIENT)
            except anthropic.APIStatusError as exc:
                if exc.status_code in (429, 500, 502, 503, 504, 529):
                    return self._fail("overloaded" if exc.status_code == 529 else "rate_limit"
                                      if exc.status_code == 429 else "timeout", str(exc), AGENT_EXIT_TRANSIENT)
                return self._fail("api_error", str(exc), AGENT_EXIT_PERMANENT)
            self.steps += 1
            tin, tout = msg.usage.input_tokens or 0, msg.usage.output_tokens or 0
            self.tokens += tin + tout
            self.cost += (tin * float(self.agent.get("price_in", 3.0)) + tout * float(self.agent.get("price_out", 15.0))) / 1e6
            if msg.stop_reason == "refusal":
                return self._fail("refusal", "the model refused the task", AGENT_EXIT_PERMANENT)
            content = [b.model_dump(exclude_none=True) for b in msg.content if b.type in ("text", "tool_use")]
            texts = [b.text for b in msg.content if b.type == "text"]
            if texts:
                self.last_text = "\n".join(texts)
            uses = [b for b in msg.content if b.type == "tool_use"]
            submit = next((b for b in uses if b.name == SUBMIT), None)
            if submit is not None:
                try:
                    answer = Submitted.model_validate(submit.input)
                except ValidationError as exc:
                    return self._fail("invalid_output", f"submit_result input invalid: {exc.errors()[0]['msg']}",
                                      AGENT_EXIT_PERMANENT)
                return self._finish(answer)
            messages.append({"role": "assistant", "content": content or [{"type": "text", "text": "(empty)"}]})
            if not uses:
                messages.append({"role": "user", "content": f"Call {SUBMIT} now with your result."})
                continue
            messages.append({"role": "user", "content": [self._tool(b.id, b.name, b.input) for b in uses]})

    def _cap(self) -> str | None:
        if self.steps >= self.max_steps:
            return f"stopped at max_steps={self.max_steps} before {SUBMIT}"
        if self.budget.get("tokens") is not None and self.tokens >= self.budget["tokens"]:
            return f"token budget exhausted ({self.tokens}/{self.budget['tokens']}) before {SUBMIT}"
        if self.budget.get("cost") is not None and self.cost >= self.budget["cost"]:
            return f"cost budget exhausted (${self.cost:.4f}/${self.budget['cost']:g}) before {SUBMIT}"
        return None

    # -- tools ----------------------------------------------------------------------------------
    def _inside(self, raw: Any) -> Path:
        if not isinstance(raw, str) or not raw or "\x00" in raw:
            raise ValueError("path must be a non-empty string")
        p = (self.cwd / raw).resolve()
        if p != self.cwd and self.cwd not in p.parents:
            raise ValueError(f"{raw!r} is outside the working folder")
        return p

    def _tool(self, tool_id: str, name: str, inp: Any) -> dict[str, Any]:
        inp = inp if isinstance(inp, dict) else {}
        try:
            if name not in (self.agent.get("tools") or []):
                raise ValueError(f"tool {name!r} is not allowed for this worker")
            if name == AgentTool.READ_FILE:
                out = self._inside(inp.get("path")).read_text(errors="replace")[:OUTPUT_CHARS]
            elif name == AgentTool.WRITE_FILE:
                p = self._inside(inp.get("path"))
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(str(inp.get("content", "")))
                self.files.append(str(p.relative_to(self.cwd)))
                out = f"wrote {p.relative_to(self.cwd)}"
            else:
                argv = inp.get("argv")
                if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
                    raise ValueError("argv must be a non-empty list of strings")
                if os.path.basename(argv[0]) not in (self.agent.get("allow_commands") or []):
                    raise ValueError(f"{argv[0]!r} is not in allow_commands")
                proc = subprocess.run(argv, cwd=self.cwd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
                self.commands.append({"cmd": " ".join(argv)[:500], "exit_code": proc.returncode})
                out = f"exit {proc.returncode}\n{(proc.stdout + proc.stderr)[-OUTPUT_CHARS:]}"
            return {"type": "tool_result", "tool_use_id": tool_id, "content": out}
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            return {"type": "tool_result", "tool_use_id": tool_id, "content": str(exc), "is_error": True}

    # -- endings --------------------------------------------------------------------------------
    def _write(self, doc: dict[str, Any]) -> None:
        doc.update(steps_used=self.steps, tokens=self.tokens, cost=round(self.cost, 6),
                   files_changed=self.files, commands=self.commands)
        self.handoff.write_text(json.dumps(doc, default=str))

    def _finish(self, answer: Submitted) -> int:
        doc = answer.model_dump()
        self._write(doc)
        print(f"agent {answer.status} after {self.steps} step(s), {self.tokens} tokens")
        return 0 if answer.status != OutcomeStatus.FAILED else AGENT_EXIT_PERMANENT

    def _partial(self, missing: str) -> int:
        if not self.last_text:  # nothing at all to hand back: not a partial delivery
            return self._fail("budget_exhausted", f"{missing}; no answer yet", AGENT_EXIT_PERMANENT)
        self._write({"status": "partial", "result": self.last_text, "confidence": 0.3, "error": None,
                     "notes": f"{missing}; missing: the worker's final, checked answer (result is its last text)"})
        print(f"agent partial: {missing}")
        return 0

    def _fail(self, error: str, message: str, code: int) -> int:
        self._write({"status": "failed", "result": None, "error": error, "notes": message[:2000]})
        print(f"agent failed ({error}): {message[:500]}", file=sys.stderr)
        return code


def main() -> int:
    try:
        cfg = json.loads(os.environ["WATCHKEEPER_AGENT"])
        handoff = Path(os.environ["WATCHKEEPER_HANDOFF"])
    except (KeyError, ValueError) as exc:
        print(f"agent: not started by the runner ({exc})", file=sys.stderr)
        return 2
    return AgentSession(cfg, read_input(), Path.cwd(), handoff).run()


if __name__ == "__main__":
    sys.exit(main())
