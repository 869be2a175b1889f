"""Where a field is written in a TOML job file: a small source map of ``[[job]]`` headers,
table headers and ``key =`` lines, so a validation error names its file *and line*, and
pydantic's error locations turned into field paths a user recognises.
"""

from __future__ import annotations

import difflib
import re
import tomllib
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from core.spec.model import FieldProblem
from core.text import quoted

#: How much of a wrong value an error quotes (characters, before escaping).
VALUE_SHOWN = 40

# One TOML key segment: bare, "basic" (with escapes) or 'literal'. The alternatives are
# disjoint, so matching stays linear on any line.
_KEY_SEG = r"""[A-Za-z0-9_\-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'"""
_KEY_PATH = rf"(?:{_KEY_SEG})(?:[ \t]*\.[ \t]*(?:{_KEY_SEG}))*"  # dotted keys too


def _key_parts(path: str) -> list[str]:
    """A TOML key path as written (``a."b\\u0001c".'d'``) → its decoded parts."""
    parts = []
    for m in re.finditer(_KEY_SEG, path):
        seg = m.group(0)
        if seg.startswith('"'):
            try:  # let the TOML parser decode the escapes, exactly as it did for the data
                seg = tomllib.loads(f"k = {seg}")["k"]
            except tomllib.TOMLDecodeError:
                seg = seg[1:-1]
        elif seg.startswith("'"):
            seg = seg[1:-1]
        parts.append(seg)
    return parts


class SourceMap:
    """Lines of ``[[job]]`` headers, table headers and ``key =`` assignments, by job index.

    Keys are the decoded dotted paths (``backoff.initial``, ``bad\\x01key`` for a quoted
    ``"bad\\u0001key"``), as pydantic reports them.
    """

    _HEADER = re.compile(r"^\s*\[\[\s*job\s*\]\]")
    # Anchored at the end, so a line of a multi-line array (``  ["make", "test"],``) is no header.
    _TABLE = re.compile(rf"^\s*\[\[?\s*({_KEY_PATH})\s*\]\]?\s*(?:#.*)?$")
    _KEY = re.compile(rf"^\s*({_KEY_PATH})\s*=")

    @classmethod
    def key_of(cls, line: str) -> str | None:
        """The decoded dotted key of a ``key = …`` line (None for any other line)."""
        m = cls._KEY.match(line)
        return ".".join(_key_parts(m.group(1))) if m else None

    def __init__(self, text: str, multi: bool) -> None:
        self.blocks: list[dict[str, int]] = []
        self.headers: list[int] = []
        current: dict[str, int] | None = {} if not multi else None
        if not multi:
            self.blocks.append(current)  # type: ignore[arg-type]
            self.headers.append(1)
        sub: str | None = None
        for no, line in enumerate(text.splitlines(), start=1):
            if multi and self._HEADER.match(line):
                current = {}
                self.blocks.append(current)
                self.headers.append(no)
                sub = None
                continue
            m = self._TABLE.match(line)
            parts = _key_parts(m.group(1)) if m else []
            if multi and len(parts) > 1 and parts[0] == "job":  # [job.backoff], [[job.tasks]]
                parts = parts[1:]
            elif multi:
                parts = []
            if parts and current is not None:
                sub = ".".join(parts)
                current.setdefault(sub, no)
                continue
            if line.lstrip().startswith("[") and not multi:
                sub = None  # a header this map cannot read: don't credit its keys to the last table
                continue
            key = self.key_of(line)
            if key is not None and current is not None:
                current.setdefault(f"{sub}.{key}" if sub else key, no)

    def line_for(self, index: int, loc: tuple[Any, ...]) -> int | None:
        if index >= len(self.blocks):
            return None
        block = self.blocks[index]
        keys = [str(p) for p in loc if not isinstance(p, int)]
        for n in range(len(keys), 0, -1):
            dotted = ".".join(keys[:n])
            if dotted in block:
                return block[dotted]
        return self.headers[index]


def _input_loc(raw: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """``loc`` without pydantic's union-branch tags (``list[str]``, ``function-after[…]``).

    A part that is a key (or index) of the input at that point is always kept, so an
    unknown key such as ``retry-on`` or ``"a[b]"`` is still named.
    """
    out: list[Any] = []
    cur: Any = raw
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            cur = cur[part]
        elif isinstance(part, str) and re.search(r"[\[\]-]", part):
            continue  # a tag: not in the input, and the input stays where it was
        else:
            cur = None  # a missing field or a default: nothing further to walk
        out.append(part)
    return tuple(out)


def each_problem(errors: list[Any]) -> list[Any]:
    """pydantic's error dicts with a ``FieldProblems`` (several cross-field problems in one
    error) split into one dict per ``FieldProblem``."""
    out = []
    for err in errors:
        problems = getattr((err.get("ctx") or {}).get("error"), "problems", None)
        if isinstance(problems, list):
            out += [{**err, "msg": str(p), "ctx": {"error": p}} for p in problems]
        else:
            out.append(err)
    return out


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field's annotation holds (``Backoff | None``, ``list[Task]``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def field_names(model: type[BaseModel] | None, path: tuple[Any, ...]) -> list[str]:
    """The field names (and aliases) of the table at ``path`` inside ``model`` (list indexes
    skipped): what an unknown key there may have meant. [] when the path leaves the models."""
    for part in path:
        if isinstance(part, int) or model is None:
            continue
        info = model.model_fields.get(part)
        model = _model_in(info.annotation) if info is not None else None
    if model is None:
        return []
    return [name for n, f in model.model_fields.items() for name in (n, f.alias) if name]


def _unknown_field(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> str:
    """``unknown field (did you mean 'timeout'?)`` for a near miss of a field of ``model``
    (``difflib.get_close_matches``), else ``unknown field (typo?)``."""
    if loc and isinstance(loc[-1], str):
        near = difflib.get_close_matches(loc[-1], field_names(model, loc[:-1]), n=1)
        if near:
            return f"unknown field (did you mean {quoted(near[0])}?)"
    return "unknown field (typo?)"


def _with_value(msg: str, value: Any) -> str:
    """A type error's message with the value it was given, escaped and cut
    (``Input should be a valid integer, got 'three'``)."""
    if isinstance(value, (dict, list)):
        return msg
    text = str(value)
    if len(text) > VALUE_SHOWN:
        text = text[:VALUE_SHOWN - 1] + "…"
    return f"{msg}, got {quoted(text)}"


def friendly_errors(exc: ValidationError, raw: Any = None,
                    model: type[BaseModel] | None = None) -> list[tuple[str | None, tuple[Any, ...], str]]:
    """pydantic errors → (field path, loc for the source map, human message), deduplicated.

    ``raw`` is the validated input (walked to tell its keys from pydantic's tags). Field
    paths look like ``backoff.initial`` or ``retry_on[0]``; pydantic's union-branch names
    and ``[type=…]`` suffixes never reach the user. ``model`` (the validated model) lets an
    unknown field suggest the field it is a near miss of; a wrong type quotes the value given.
    """
    out: list[tuple[str | None, tuple[Any, ...], str]] = []
    seen: set[tuple[str | None, str]] = set()
    for err in each_problem(exc.errors(include_url=False)):
        loc = _input_loc(raw, tuple(err["loc"]))
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        problem = (err.get("ctx") or {}).get("error")
        if isinstance(problem, FieldProblem):
            loc = (problem.field,)
        if err["type"] == "extra_forbidden":
            msg = _unknown_field(model, loc)
        elif err["type"] == "missing":
            msg = "field required"
        elif err["type"] == "literal_error":
            msg = msg.replace("Input should be", "must be")
        elif err["type"].endswith(("_parsing", "_type")) and "input" in err:
            msg = _with_value(msg, err["input"])
        fld = ""
        for part in loc:
            fld += f"[{part}]" if isinstance(part, int) else (f".{part}" if fld else str(part))
        key = (fld or None, msg)
        if key in seen:
            continue
        seen.add(key)
        out.append((fld or None, loc, msg))
    return out


def validation_line(exc: ValidationError, raw: Any = None) -> str:
    """A pydantic error as one line for people: ``field 'name': must be …; field …`` (no
    ``[type=…]`` tags, no URL). ``raw`` as for ``friendly_errors``."""
    parts = [f"field '{fld}': {msg}" if fld else msg for fld, _loc, msg in friendly_errors(exc, raw)]
    return "; ".join(parts) or "invalid value"


def toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"line (\d+)", str(exc))
    return int(m.group(1)) if m else getattr(exc, "lineno", None)


def key_on_line(text: str, line: int | None) -> str | None:
    """The ``key`` of a ``key = …`` line, so a syntax error can still name its field."""
    lines = text.splitlines()
    if line is None or not 1 <= line <= len(lines):
        return None
    return SourceMap.key_of(lines[line - 1])


def first_key_line(text: str, key: str) -> int | None:
    """Line of the first ``key = …`` in a file, 1-based (None when absent)."""
    for no, line in enumerate(text.splitlines(), start=1):
        if SourceMap.key_of(line) == key:
            return no
    return None


def guess_name(text: str) -> str | None:
    """The first ``name = "…"`` of a file that does not parse (for the error line only)."""
    m = re.search(r'^\s*name\s*=\s*"([^"\n]+)"', text, re.MULTILINE)
    return m.group(1) if m else None
