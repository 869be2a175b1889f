"""The worker handoff: JSON a worker may write to ``$WATCHKEEPER_HANDOFF``.

Workers hand back evidence, never authority. The file is read after the worker exits,
without following symlinks or blocking on FIFOs, capped in size, stored verbatim and then
validated. Every problem (missing, oversized, invalid UTF-8, NUL bytes, invalid JSON, too
deeply nested, wrong types) becomes a *finding* ``{code, message}``, never an exception.

Only standard JSON is accepted: ``NaN``/``Infinity`` literals and numbers too large for a
float (``1e999``) are ``invalid_json``, and numeric fields refuse ``"inf"``/``"nan"``
strings, so the validated handoff always serialises back to strict JSON (SQLite's JSON
functions and other parsers reject ``Infinity``).
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_DEPTH = 64
RAW_KEEP_OVERSIZED = 64 * 1024  # bytes of an oversized handoff kept as evidence


class CommandRecord(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    cmd: str
    exit_code: int | None = None


class Handoff(BaseModel):
    """Validated handoff. Unknown extra keys are kept (workers may add their own)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    status: Literal["success", "failed", "partial"]
    result: Any = None
    confidence: float | None = Field(None, ge=0, le=1)
    steps_used: int | None = Field(None, ge=0)
    error: str | None = None
    files_changed: list[str] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    commands: list[CommandRecord] = Field(default_factory=list)
    blockers: list[str] = Field(default_factory=list)
    notes: str | None = None
    exit_state: str | None = None
    cost: float | None = Field(None, ge=0, description="cost the worker reports (budget)")
    tokens: int | None = Field(None, ge=0, description="tokens the worker reports (budget)")


@dataclass
class HandoffRead:
    """What reading a handoff file produced.

    ``raw``: the text stored verbatim (decoded with replacement; None when absent);
    ``data``: the validated handoff as a JSON-able dict, or None; ``findings``: list of
    ``{"code", "message"}``; ``present``: a file existed at the path.
    """

    raw: str | None = None
    data: dict[str, Any] | None = None
    findings: list[dict[str, str]] = field(default_factory=list)
    present: bool = False

    def add(self, code: str, message: str) -> None:
        self.findings.append({"code": code, "message": message})


class _NonFinite(ValueError):
    """A number standard JSON cannot hold: a NaN/Infinity literal or one that overflows."""


def _reject_constant(name: str) -> Any:
    raise _NonFinite(f"non-standard constant {name} (NaN and Infinity are not JSON)")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        shown = literal if len(literal) <= 40 else literal[:37] + "..."
        raise _NonFinite(f"number {shown} is out of range (not a finite number)")
    return value


def _loads_strict(text: str) -> Any:
    """``json.loads`` that refuses what is not standard JSON (NaN, Infinity, 1e999)."""
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)


def _depth(obj: Any, limit: int) -> int:
    stack = [(obj, 1)]
    deepest = 0
    while stack:
        cur, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(cur, dict):
            stack.extend((v, d + 1) for v in cur.values())
        elif isinstance(cur, list):
            stack.extend((v, d + 1) for v in cur)
    return deepest


def read_handoff(path: str | os.PathLike[str], max_bytes: int = 1024 * 1024) -> HandoffRead:
    """Read and validate the handoff at ``path`` (a file the worker may or may not have written).

    ``max_bytes``: larger files are an ``oversized`` finding; only their first 64 KiB are
    kept in ``raw``. Never raises for anything the worker did.
    """
    out = HandoffRead()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        out.add("missing", "no handoff written (exit code and output are the evidence)")
        return out
    except NotADirectoryError:
        # The run's artifacts folder could not be created: nothing could have been written.
        out.add("missing", "no handoff (the run's artifacts folder was unavailable)")
        return out
    except OSError as exc:
        out.present = True
        if exc.errno == errno.ELOOP:
            out.add("symlink", "handoff path is a symlink; not followed")
        else:
            out.add("unreadable", f"cannot open handoff: {exc.strerror}")
        return out
    out.present = True
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            out.add("not_a_file", "handoff path is not a regular file")
            return out
        limit = max_bytes if st.st_size <= max_bytes else RAW_KEEP_OVERSIZED
        chunks = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        blob = b"".join(chunks)
    finally:
        os.close(fd)
    oversized = st.st_size > max_bytes or len(blob) > max_bytes
    blob = blob[:limit]
    out.raw = blob.decode("utf-8", errors="replace")
    if oversized:
        out.add("oversized", f"handoff is {st.st_size} bytes, over the {max_bytes}-byte limit; first "
                             f"{len(blob)} bytes kept, not parsed")
        return out
    if not blob.strip():
        out.add("empty", "handoff file is empty")
        return out
    if b"\x00" in blob:
        out.add("nul_bytes", "handoff contains NUL bytes; not parsed")
        return out
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        out.add("invalid_utf8", f"handoff is not valid UTF-8 (byte {exc.start})")
        return out
    try:
        obj = _loads_strict(text)
    except RecursionError:
        out.add("too_deep", f"handoff nesting exceeds {MAX_DEPTH} levels")
        return out
    except ValueError as exc:
        out.add("invalid_json", f"handoff is not valid JSON: {exc}")
        return out
    if _depth(obj, MAX_DEPTH) > MAX_DEPTH:
        out.add("too_deep", f"handoff nesting exceeds {MAX_DEPTH} levels")
        return out
    if not isinstance(obj, dict):
        out.add("schema", f"handoff must be a JSON object, got {type(obj).__name__}")
        return out
    try:
        out.data = Handoff.model_validate(obj).model_dump(mode="json", exclude_none=False)
    except ValidationError as exc:
        for err in exc.errors()[:20]:
            loc = ".".join(str(p) for p in err["loc"]) or "(root)"
            out.add("schema", f"field '{loc}': {err['msg']}")
    return out
