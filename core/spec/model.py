"""Job specs: TOML files in a folder, validated by pydantic.

A file holds one job (top-level keys) or several ``[[job]]`` tables. Unknown fields are
errors. Errors are reported as ``file:line: job 'x': field 'timeout': message``; the line
comes from the TOML parser (syntax errors) or from a small source map of the file (field
errors), and is omitted only when neither can tell. Every piece of that text (file, job
name, field, message) is shown with control and bidi/format characters escaped
(``safe_text``), so a hostile spec cannot drive the terminal that prints it.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import math
import os
import re
import shlex
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import regex
from cronsim import CronSim, CronSimError
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from core.text import safe_text  # noqa: F401 (re-exported: the one escaper lives in core.text)

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
_DUR_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
#: The longest duration anything accepts: 10 years. Longer (or inf/nan) values overflow
#: asyncio timers and datetime arithmetic later, far from the spec that caused them.
MAX_DURATION_S = 315_360_000.0
DURATION_LIMIT_MESSAGE = "must be a finite duration of at most 10 years"
#: The shortest ``every`` interval; shorter ones flood the ledger with queued runs.
MIN_EVERY_S = 1.0
#: Job files larger than this are refused before they are read.
MAX_SPEC_FILE_BYTES = 1024 * 1024


#: Characters never printed raw in error text: C0/C1 controls, DEL, format (bidi, zero
#: width) and unpaired surrogates, and line/paragraph separators.
def parse_duration(value: Any) -> float:
    """``"30s"``, ``"5m"``, ``"1h30m"``, ``"250ms"`` or a number of seconds → seconds (float).

    Raises:
        ValueError: not a duration, or not finite, or longer than 10 years
            (``MAX_DURATION_S``).
    """
    seconds = _parse_duration(value)
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise ValueError(f"{DURATION_LIMIT_MESSAGE}, got {value!r}")
    return seconds


def _parse_duration(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a duration such as '30s', '5m' or a number of seconds")
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int too large for a float
            return math.inf
    if isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if not text:
            raise ValueError("empty duration")
        pos, total = 0, 0.0
        for m in _DUR_RE.finditer(text):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos == len(text):
            return total
        try:
            return float(text)
        except ValueError:
            pass
    raise ValueError(f"expected a duration such as '30s', '5m', '1h30m' or seconds, got {value!r}")


Duration = Annotated[float, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]
# Strict numbers: a quoted "3" in TOML is almost always a mistake worth reporting.
Int = Annotated[int, Field(strict=True)]
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
ExitCode = Annotated[int, Field(strict=True, ge=0, le=255)]


class FieldProblem(ValueError):
    """A cross-field check that failed, carrying the field it should be reported on."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _check_command(value: Any) -> Any:
    # One clear message instead of pydantic's per-union-branch errors.
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("command must not be empty")
        return value
    if isinstance(value, list):
        if not value or not all(isinstance(x, str) and x for x in value):
            raise ValueError("command must be a non-empty list of non-empty strings, or a shell string")
        return value
    raise ValueError(f"command must be an argv list of strings or a shell string, got {type(value).__name__}")


Command = Annotated[list[str] | str, BeforeValidator(_check_command)]


def _nonempty_str(value: Any) -> Any:
    if isinstance(value, str) and (not value.strip() or "\x00" in value):
        raise ValueError("must be a non-empty string without NUL characters")
    return value


NonEmptyStr = Annotated[str, BeforeValidator(_nonempty_str)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Backoff(_Strict):
    """Retry delay: ``min(max, initial * factor**(attempt-1))``, with full jitter when set."""

    initial: PositiveDuration = 1.0
    factor: Number = Field(2.0, ge=1.0)
    max: PositiveDuration = 300.0
    jitter: StrictBool = True


class Expect(_Strict):
    """What a healthy run looks like (checked by the supervisor)."""

    duration: tuple[Duration, Duration] | None = Field(None, description="[min, max] seconds")
    output: str | None = Field(None, description="regex that stdout must match")
    files: list[NonEmptyStr] = Field(default_factory=list, description="files that must exist after the run")
    forbid_output: list[NonEmptyStr] = Field(
        default_factory=list, description="regexes no line of stdout or stderr may match (a success that prints "
                                          "one is a forbidden_output warning)")
    min_bytes: dict[NonEmptyStr, Annotated[int, Field(strict=True, ge=0)]] = Field(
        default_factory=dict, description="file path -> smallest healthy size in bytes (checked like expect.files; "
                                          "smaller or missing is a small_file warning)")

    @field_validator("duration", mode="before")
    @classmethod
    def _pair(cls, v: Any) -> Any:
        if v is not None and (not isinstance(v, list | tuple) or len(v) != 2):
            raise ValueError("duration must be a [min, max] pair such as [\"1s\", \"5m\"]")
        return v

    @field_validator("output")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        # The same engine as at match time (core.supervisor.verify), so both accept the same syntax.
        if v is not None:
            try:
                regex.compile(v, regex.MULTILINE)
            except (regex.error, RecursionError, OverflowError) as exc:
                raise ValueError(f"invalid regex: {exc}") from None
        return v

    @field_validator("forbid_output")
    @classmethod
    def _forbid(cls, v: list[str]) -> list[str]:
        for i, pat in enumerate(v):
            try:
                regex.compile(pat)
            except (regex.error, RecursionError, OverflowError) as exc:
                raise ValueError(f"forbid_output[{i}]: invalid regex ({exc})") from None
        return v

    @field_validator("duration")
    @classmethod
    def _range(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not (0 <= v[0] <= v[1]):
            raise ValueError("duration must be [min, max] with 0 <= min <= max")
        return v


class VerifyCommand(_Strict):
    """A check the supervisor runs itself after the worker exits; exit 0 passes."""

    command: Command
    timeout: PositiveDuration = 30.0


class Breaker(_Strict):
    """Circuit breaker: ``failures`` failed runs within ``window`` open it for ``cooldown``.

    ``window`` and ``cooldown`` left out are fitted to the job's period P (seconds between
    scheduled slots, ``JobSpec._fit_breaker``): ``window = failures × P × 2`` (the failures
    must fall among the last few slots, whatever the job's pace) and ``cooldown =
    max(P, min(10 × P, 1h))`` (about ten slots skipped, at most an hour, at least one slot).
    A job with no period (manual, once) uses 5 min and 10 min. ``enabled = false`` (or
    ``breaker = false``) turns the breaker off for the job, its fallback's too.
    """

    enabled: StrictBool = True
    failures: Int = Field(3, ge=1)
    window: PositiveDuration | None = None
    cooldown: PositiveDuration | None = None

    @model_validator(mode="before")
    @classmethod
    def _switch(cls, data: Any) -> Any:
        if isinstance(data, bool):  # breaker = false / true
            return {"enabled": data}
        return data


class Budget(_Strict):
    """Per-run bounds: wall time (seconds) and figures the worker reports in its handoff."""

    wall: PositiveDuration | None = None
    cost: Number | None = Field(None, gt=0)
    tokens: Int | None = Field(None, gt=0)


class Task(_Strict):
    """One sub-task of a fan-out job: its own command, timeout and attempts."""

    name: str
    command: Command
    timeout: PositiveDuration = 600.0
    max_attempts: Int = Field(1, ge=1, le=100)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("task name must be 1-100 letters, digits, '_', '-' or '.'")
        return v


class Agent(_Strict):
    """An agent worker (``kind = "agent"``): a Claude session that ends by writing the
    structured result (status, result, confidence, steps_used, error) as its handoff.

    ``task`` is a template: ``{task}``, ``{context}`` and ``{goal}`` are filled from the
    mission that spawned the worker (empty outside a mission). ``tools`` are taken from
    the small allowed set (``read_file``/``write_file`` under the job's cwd, ``run_command``
    limited to ``allow_commands`` by program name); none by default. Prices are dollars per
    million tokens, used to report ``cost`` against ``budget.cost``.
    """

    model: NonEmptyStr = "claude-sonnet-4-6"
    system: str = "You are a careful worker. Do the task, then call submit_result once."
    task: str = "{task}"
    max_tokens: Int = Field(2048, ge=16, le=64000)
    tools: list[Literal["read_file", "write_file", "run_command"]] = Field(default_factory=list)
    allow_commands: list[NonEmptyStr] = Field(default_factory=list)
    price_in: Number = Field(3.0, ge=0, description="$ per million input tokens")
    price_out: Number = Field(15.0, ge=0, description="$ per million output tokens")
    offline: Command | None = Field(None, description="stand-in command when no API key is set (demo)")

    @model_validator(mode="after")
    def _commands(self) -> Agent:
        if self.allow_commands and "run_command" not in self.tools:
            raise FieldProblem("agent.allow_commands", "allow_commands needs 'run_command' in tools")
        if "run_command" in self.tools and not self.allow_commands:
            raise FieldProblem("agent.allow_commands", "run_command needs at least one allowed program")
        return self


#: Exit codes of the agent worker process (``core.mission.agent``): transient (rate limit,
#: overload, connection) is retried with backoff; refusal or invalid output is not.
AGENT_EXIT_TRANSIENT = 75
AGENT_EXIT_PERMANENT = 65


class JobSpec(_Strict):
    """One job. Times are seconds; exactly one of ``schedule``/``every``/``once`` or none
    (a manual-only job, run with ``watchkeeper trigger``)."""

    name: str
    command: Command | None = None
    cwd: NonEmptyStr | None = None
    env: dict[str, str] = Field(default_factory=dict)
    schedule: str | None = None
    timezone: str | None = None
    every: PositiveDuration | None = None
    once: StrictBool = False
    at: datetime | None = None
    timeout: PositiveDuration = 3600.0
    grace: Duration = Field(5.0, ge=0)
    max_attempts: Int = Field(1, ge=1, le=100)
    backoff: Backoff = Field(default_factory=Backoff)
    retry_on: list[ExitCode] | None = None
    no_retry_on: list[ExitCode] = Field(default_factory=list)
    concurrency: Int = Field(1, ge=1, le=1000)
    misfire: Literal["skip", "run_once"] = "skip"
    intent: NonEmptyStr | None = None
    owner: NonEmptyStr | None = None
    expect: Expect = Field(default_factory=Expect)
    verify: list[VerifyCommand] = Field(default_factory=list)
    kind: Literal["command", "fanout", "agent"] = "command"
    agent: Agent | None = None
    tags: list[NonEmptyStr] = Field(default_factory=list)
    # orchestration (fan-out, fallback, breaker, budgets)
    tasks: list[Task] = Field(default_factory=list)
    synthesize: Command | None = None
    fallback: Command | None = None
    allow_partial: StrictBool = True
    breaker: Breaker = Field(default_factory=Breaker)
    max_steps: Int | None = Field(None, ge=1)
    budget: Budget = Field(default_factory=Budget)
    confidence_threshold: Number = Field(0.6, ge=0, le=1)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("name must be 1-100 letters, digits, '_', '-' or '.', starting with a letter or digit")
        return v

    @model_validator(mode="before")
    @classmethod
    def _agent_defaults(cls, data: Any) -> Any:
        # An agent's rate limits and overloads are transient (exit 75, retried with backoff up
        # to 3 attempts); a refusal or invalid output (exit 65) is not.
        if isinstance(data, dict) and data.get("kind") == "agent":
            data = dict(data)
            data.setdefault("max_attempts", 3)
            data.setdefault("no_retry_on", [AGENT_EXIT_PERMANENT])
            data.setdefault("max_steps", 10)
        return data

    @field_validator("every")
    @classmethod
    def _every(cls, v: float | None) -> float | None:
        if v is not None and v < MIN_EVERY_S:
            raise ValueError(f"every must be at least 1s (got {_fmt_seconds(v)}); "
                             "shorter intervals flood the ledger with queued runs")
        return v

    @field_validator("verify", mode="before")
    @classmethod
    def _verify(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"command": x} if isinstance(x, str | list) else x for x in v]
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not key or "=" in key or "\x00" in key or "\x00" in value:
                raise ValueError(f"invalid environment variable {key!r} (no '=' or NUL allowed)")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                ZoneInfo(v)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"unknown timezone {v!r} (use an IANA name such as 'Europe/Berlin')") from None
        return v

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is not None:
            fields = v.split()
            if len(fields) != 5:
                # cronsim would take six fields as Quartz's seconds-first form, so
                # "0 */5 * * * *" (meant as seconds last, or a year) would silently mean
                # something else; refused rather than guessed.
                raise ValueError(
                    f"invalid cron expression {v!r}: cron has five fields (minute hour day-of-month month"
                    f" day-of-week), this has {len(fields)}; for runs more often than once a minute use"
                    " `every` (e.g. every = \"10s\")")
            try:
                CronSim(v, datetime(2025, 1, 1))
            except (CronSimError, ValueError, KeyError, IndexError) as exc:
                raise ValueError(f"invalid cron expression {v!r}: {exc}") from None
        return v

    @model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        triggers = [n for n, on in (("schedule", self.schedule is not None), ("every", self.every is not None),
                                    ("once", self.once)) if on]
        if len(triggers) > 1:
            raise FieldProblem(triggers[1], f"give only one of schedule, every, once (got {', '.join(triggers)})")
        if self.at is not None and not self.once:
            raise FieldProblem("at", "'at' needs once = true")
        if self.timezone is not None and self.schedule is None and self.at is None:
            raise FieldProblem("timezone", "'timezone' applies only to a cron 'schedule' or a one-shot 'at'")
        if self.kind == "command" and self.command is None:
            raise FieldProblem("command", "field required (an argv list or a shell string)")
        if self.retry_on is not None and set(self.retry_on) & set(self.no_retry_on):
            raise FieldProblem("no_retry_on", "an exit code cannot be in both retry_on and no_retry_on")
        if self.kind == "agent" and self.agent is None:
            raise FieldProblem("agent", "an agent job needs an [agent] table (model, system, task)")
        if self.agent is not None and self.kind != "agent":
            raise FieldProblem("agent", "'agent' needs kind = \"agent\"")
        if self.kind == "fanout":
            if not self.tasks:
                raise FieldProblem("tasks", "a fanout job needs at least one [[job.tasks]] entry")
            names = [t.name for t in self.tasks]
            if len(set(names)) != len(names):
                raise FieldProblem("tasks", "task names must be unique within a job")
        elif self.tasks:
            raise FieldProblem("tasks", "'tasks' needs kind = \"fanout\"")
        return self

    @model_validator(mode="after")
    def _fit_breaker(self) -> JobSpec:
        # The breaker's defaults follow the job's pace: "three failures in five minutes" is a
        # 5% failure rate for a 5-second job and can never happen to a daily one. Resolved
        # here once, so every reader (breaker, fallback policy, console) sees plain numbers.
        b = self.breaker
        if b.window is not None and b.cooldown is not None:
            return self
        period = typical_period(self)
        if period is None:
            window, cooldown = 300.0, 600.0
        else:
            window, cooldown = b.failures * period * 2, max(period, min(10 * period, 3600.0))
        object.__setattr__(self, "breaker", b.model_copy(update={
            "window": b.window if b.window is not None else window,
            "cooldown": b.cooldown if b.cooldown is not None else cooldown}))
        return self

    # -- derived ------------------------------------------------------------------------
    def argv(self, command: list[str] | str | None = None) -> list[str]:
        """The argv to exec: a list as is, a string through ``/bin/sh -c``."""
        cmd = self.command if command is None else command
        if isinstance(cmd, str):
            return ["/bin/sh", "-c", cmd]
        return list(cmd or [])

    def schedule_text(self) -> str:
        """Short schedule description: cron expression (with zone), 'every 30s', 'once', 'manual'."""
        if self.schedule:
            return f"{self.schedule} ({self.timezone})" if self.timezone else self.schedule
        if self.every:
            return f"every {_fmt_seconds(self.every)}"
        if self.once:
            return f"once at {self.at.isoformat()}" if self.at else "once"
        return "manual"

    def spec_hash(self) -> str:
        """16 hex digits identifying the validated spec (stored on runs as ``spec_hash``)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


def _fmt_seconds(s: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{int(s // size)}{unit}"
    return f"{s:g}s"


@dataclass(frozen=True)
class SpecError:
    """One problem in a spec file. ``line`` is 1-based or None when unknown."""

    file: str
    line: int | None
    job: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        # The fields keep the exact data; only the text is escaped (every part may come
        # from the spec file, its name, or a message quoting either).
        where = f"{safe_text(self.file)}:{self.line}" if self.line else safe_text(self.file)
        parts = [where]
        if self.job:
            parts.append(f"job '{safe_text(self.job)}'")
        if self.field:
            parts.append(f"field '{safe_text(self.field)}'")
        parts.append(safe_text(self.message))
        return ": ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "job": self.job, "field": self.field,
                "message": self.message, "text": str(self)}


@dataclass
class LoadedJob:
    """A valid spec with where it came from."""

    spec: JobSpec
    source: str
    line: int | None


@dataclass
class LoadResult:
    """Outcome of loading a folder: valid jobs by name, and every error found."""

    jobs: dict[str, LoadedJob] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)
    #: files that had at least one error (their jobs keep the last good spec on reload)
    bad_files: set[str] = field(default_factory=set)
    #: the spec folder itself is gone (``core.runner.reload``): ``jobs`` is empty because nothing
    #: could be read, not because jobs were removed; keep the last good specs.
    folder_missing: bool = False


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


class _SourceMap:
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


def _friendly_errors(exc: ValidationError, raw: Any = None) -> list[tuple[str | None, tuple[Any, ...], str]]:
    """pydantic errors → (field path, loc for the source map, human message), deduplicated.

    ``raw`` is the validated input (walked to tell its keys from pydantic's tags). Field
    paths look like ``backoff.initial`` or ``retry_on[0]``; pydantic's union-branch names
    and ``[type=…]`` suffixes never reach the user.
    """
    out: list[tuple[str | None, tuple[Any, ...], str]] = []
    seen: set[tuple[str | None, str]] = set()
    for err in exc.errors(include_url=False):
        loc = _input_loc(raw, tuple(err["loc"]))
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        problem = (err.get("ctx") or {}).get("error")
        if isinstance(problem, FieldProblem):
            loc = (problem.field,)
        if err["type"] == "extra_forbidden":
            msg = "unknown field (typo?)"
        elif err["type"] == "missing":
            msg = "field required"
        elif err["type"] == "literal_error":
            msg = msg.replace("Input should be", "must be")
        fld = ""
        for part in loc:
            fld += f"[{part}]" if isinstance(part, int) else (f".{part}" if fld else str(part))
        key = (fld or None, msg)
        if key in seen:
            continue
        seen.add(key)
        out.append((fld or None, loc, msg))
    return out


def _toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"line (\d+)", str(exc))
    return int(m.group(1)) if m else getattr(exc, "lineno", None)


def _key_on_line(text: str, line: int | None) -> str | None:
    """The ``key`` of a ``key = …`` line, so a syntax error can still name its field."""
    lines = text.splitlines()
    if line is None or not 1 <= line <= len(lines):
        return None
    return _SourceMap.key_of(lines[line - 1])


def _first_key_line(text: str, key: str) -> int | None:
    """Line of the first ``key = …`` in a file, 1-based (None when absent)."""
    for no, line in enumerate(text.splitlines(), start=1):
        if _SourceMap.key_of(line) == key:
            return no
    return None


def _guess_name(text: str) -> str | None:
    """The first ``name = "…"`` of a file that does not parse (for the error line only)."""
    m = re.search(r'^\s*name\s*=\s*"([^"\n]+)"', text, re.MULTILINE)
    return m.group(1) if m else None


class _Unreadable(Exception):
    """A job file that cannot be read as text (its message is the whole error)."""


def _too_large(size: int) -> _Unreadable:
    return _Unreadable(f"too large ({size} bytes, limit 1 MiB)")


def _read_spec_text(p: Path) -> str:
    """The text of a job file, refusing anything that is not a small regular file.

    ``stat`` comes first, so a FIFO, a device or a huge (sparse) file is never opened or
    read; the open is non-blocking and re-checked with ``fstat`` in case the path was
    swapped in between, and at most ``MAX_SPEC_FILE_BYTES + 1`` bytes are ever read.
    """
    try:
        st = os.stat(p)
    except OSError as exc:
        raise _Unreadable(f"cannot read: {exc.strerror or exc}"
                          + (" (dangling symlink)" if p.is_symlink() else "")) from None
    if not stat.S_ISREG(st.st_mode):
        raise _Unreadable("not a regular file")
    if st.st_size > MAX_SPEC_FILE_BYTES:
        raise _too_large(st.st_size)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _Unreadable(f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Unreadable("not a regular file")
        if st.st_size > MAX_SPEC_FILE_BYTES:
            raise _too_large(st.st_size)
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_SPEC_FILE_BYTES:
            chunk = os.read(fd, MAX_SPEC_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _Unreadable(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MAX_SPEC_FILE_BYTES:
        raise _too_large(size)
    data = b"".join(chunks)
    # Some editors (Notepad) write a BOM; TOML would call it an invalid statement. It is no
    # line break, so dropping it keeps every line number; ``skip`` keeps byte offsets true.
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Unreadable(f"cannot read: not UTF-8 text ({exc.reason} at byte {exc.start + skip})") from None


def load_file(path: str | os.PathLike[str]) -> LoadResult:
    """Parse and validate one TOML file; never raises for bad content."""
    p = Path(path)
    res = LoadResult()
    name = str(p)
    try:
        text = _read_spec_text(p)
    except _Unreadable as exc:
        res.errors.append(SpecError(name, None, None, None, str(exc)))
        res.bad_files.add(name)
        return res
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        line = _toml_error_line(exc)
        res.errors.append(SpecError(name, line, _guess_name(text), _key_on_line(text, line),
                                    f"TOML syntax: {msg}"))
        res.bad_files.add(name)
        return res
    multi = "job" in data
    if multi:
        extra = sorted(k for k in data if k != "job")
        if extra:
            res.errors.append(SpecError(name, _first_key_line(text, extra[0]), None, extra[0],
                                        "top-level keys are not allowed beside [[job]] tables"))
        raw_jobs = data["job"]
        if not isinstance(raw_jobs, list):
            raw_jobs = [raw_jobs]
        if not all(isinstance(r, dict) for r in raw_jobs):
            res.errors.append(SpecError(name, _first_key_line(text, "job"), None, "job",
                                        "'job' must be [[job]] tables"))
            res.bad_files.add(name)
            return res
    else:
        raw_jobs = [data]
    smap = _SourceMap(text, multi)
    for index, raw in enumerate(raw_jobs):
        if not isinstance(raw, dict):
            res.errors.append(SpecError(name, smap.line_for(index, ()), None, None, "job must be a table"))
            continue
        job_name = raw.get("name") if isinstance(raw.get("name"), str) else None
        try:
            spec = JobSpec.model_validate(raw)
        except ValidationError as exc:
            found = [SpecError(name, smap.line_for(index, loc), job_name, fld, msg)
                     for fld, loc, msg in _friendly_errors(exc, raw)]
            # In the order a reader meets them in the file (stable: ties keep pydantic's order).
            found.sort(key=lambda e: (e.line is None, e.line or 0))
            res.errors.extend(found)
            continue
        if spec.name in res.jobs:
            res.errors.append(SpecError(name, smap.line_for(index, ("name",)), spec.name, "name",
                                        "duplicate job name in this file"))
            continue
        res.jobs[spec.name] = LoadedJob(spec, name, smap.line_for(index, ("name",)))
    if res.errors:
        res.bad_files.add(name)
    return res


def spec_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The ``*.toml`` job files of a folder, sorted.

    ``watchkeeper.toml`` is settings, not a job, and hidden names (``.a.toml.swp``, an
    editor's ``.#a.toml`` lock symlink) are skipped. Anything else named ``*.toml`` is
    returned even when it is not a regular file, so ``load_file`` reports it instead of
    silently ignoring it.
    """
    return sorted(p for p in Path(folder).glob("*.toml")
                  if p.name != "watchkeeper.toml" and not p.name.startswith("."))


def _same_source(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    return a == b or os.path.abspath(a) == os.path.abspath(b)


def load_dir(folder: str | os.PathLike[str], *, prefer: Mapping[str, str] | None = None) -> LoadResult:
    """Load every job file of a folder.

    A job name defined in several files is kept from one of them and reported as a
    duplicate in the others. Which one keeps it:

    - with ``prefer`` (job name → source file that owns it now, as the runner knows it),
      the preferred file, so a new file cannot take over a running job by redefining it;
      while the preferred file has errors that may hide its definition, no other file
      takes the name either (the runner keeps the last good spec);
    - otherwise (or when the preferred file no longer defines the job) the first file in
      sorted order.

    Raises:
        FileNotFoundError: the folder does not exist.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a folder of job specs")
    prefer = prefer or {}
    loaded_files = [(str(path), load_file(path)) for path in spec_files(root)]

    # The preferred files that failed in a way that may hide a definition of the job.
    def blocked_by(jname: str) -> str | None:
        owner = prefer.get(jname)
        for source, res in loaded_files:
            if not _same_source(source, owner) or source not in res.bad_files:
                continue
            if not res.jobs or any(e.job in (None, jname) for e in res.errors):
                return source
        return None

    winners: dict[str, LoadedJob] = {}
    for _source, res in loaded_files:
        for jname, loaded in res.jobs.items():
            current = winners.get(jname)
            if current is None or (_same_source(loaded.source, prefer.get(jname))
                                   and not _same_source(current.source, prefer.get(jname))):
                winners[jname] = loaded

    total = LoadResult()
    for _source, res in loaded_files:
        total.errors.extend(res.errors)
        total.bad_files |= res.bad_files
        for jname, loaded in res.jobs.items():
            blocker = blocked_by(jname)
            if blocker is not None and not _same_source(loaded.source, blocker):
                total.errors.append(SpecError(loaded.source, loaded.line, jname, "name",
                                              f"duplicate job name (owned by {blocker}, which has errors; "
                                              "fix that file or remove this definition)"))
                total.bad_files.add(loaded.source)
                continue
            first = winners[jname]
            if first is not loaded:
                total.errors.append(SpecError(loaded.source, loaded.line, jname, "name",
                                              f"duplicate job name (already defined in {first.source}:{first.line})"))
                total.bad_files.add(loaded.source)
                continue
            total.jobs[jname] = loaded
    return total


def typical_period(spec: JobSpec) -> float | None:
    """Seconds between the job's scheduled slots: ``every``, or for a cron ``schedule`` the
    median gap of its first slots from a fixed date (so the answer, and the spec hash built
    on it, never depend on when it is asked). None for manual and one-shot jobs."""
    if spec.every:
        return float(spec.every)
    if not spec.schedule:
        return None
    try:
        it = CronSim(spec.schedule, datetime(2025, 1, 1))
        fires = [next(it) for _ in range(9)]
    except (CronSimError, ValueError, KeyError, IndexError, StopIteration):
        return None
    gaps = sorted((b - a).total_seconds() for a, b in zip(fires, fires[1:], strict=False))
    return gaps[len(gaps) // 2] if gaps else None


def resolve_cwd(job: LoadedJob) -> str:
    """The working directory for a job: ``cwd`` relative to its spec file's folder."""
    base = Path(job.source).resolve().parent
    if job.spec.cwd is None:
        return str(base)
    return str((base / job.spec.cwd).resolve())


def field_line(job: LoadedJob, loc: tuple[Any, ...]) -> int | None:
    """The line in ``job.source`` where field ``loc`` (e.g. ``("cwd",)``) of ``job`` is
    written, else the job's own line; None when the file cannot be read any more."""
    try:
        text = _read_spec_text(Path(job.source))
    except (_Unreadable, ValueError, OSError):
        return job.line
    multi = any(_SourceMap._HEADER.match(ln) for ln in text.splitlines())
    smap = _SourceMap(text, multi)
    index = 0
    if multi and job.line is not None:
        # The job's block is the last [[job]] header at or before its name line.
        index = max((i for i, h in enumerate(smap.headers) if h <= job.line), default=0)
    return smap.line_for(index, loc) or job.line


def spec_json(spec: JobSpec) -> str:
    """Canonical JSON of a spec (what the ``jobs.spec`` column holds)."""
    return json.dumps(spec.model_dump(mode="json"), sort_keys=True)


def spec_from_json(text: str) -> JobSpec:
    """Inverse of ``spec_json``. Raises pydantic.ValidationError on a bad stored spec."""
    return JobSpec.model_validate(json.loads(text))


def command_text(cmd: list[str] | str | None) -> str:
    """A command for display (argv joined with shell quoting)."""
    if cmd is None:
        return ""
    return cmd if isinstance(cmd, str) else shlex.join(cmd)
