r"""The job spec model: ``JobSpec`` and its parts (backoff, expect, verify, breaker, budget,
tasks, agent), validated by pydantic. Unknown fields are errors; a cross-field problem
raises ``FieldProblem`` naming the field it belongs to.

The package around it: ``durations`` (``"30s"`` → seconds), ``source_map`` (which line a
field is written on), ``loader`` (files and folders → ``LoadResult`` with ``SpecError``\ s
that name file, line, job and field, escaped with ``core.text.safe_text``), ``schedule``
and ``settings``. The loader imports this module, never the other way round.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from datetime import datetime
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
    field_validator,
    model_validator,
)

from core.spec.durations import (  # noqa: F401 (re-exported: callers import them from here)
    DURATION_LIMIT_MESSAGE,
    MAX_DURATION_S,
    duration_words,
    parse_duration,
)
from core.text import safe_text  # noqa: F401 (re-exported: the one escaper lives in core.text)

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
#: A local account name (as useradd takes them, plus a trailing $ for machine accounts) or a uid.
USER_RE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?|[0-9]{1,10})$")


def check_name(v: str) -> str:
    """``v`` unchanged when it is a valid job or mission name (``NAME_RE``); raises
    ValueError saying the rule otherwise (pydantic reports it against the ``name`` field)."""
    if not NAME_RE.match(v):
        raise ValueError("name must be 1-100 letters, digits, '_', '-' or '.', starting with a letter or digit")
    return v

#: The shortest ``every`` interval; shorter ones flood the ledger with queued runs.
MIN_EVERY_S = 1.0


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


class FieldProblems(ValueError):
    """Several cross-field checks that failed at once (``problems``), so a file's reader sees
    them all in one pass; ``core.spec.source_map.friendly_errors`` reports each on its field."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


def _task_name(task: Any) -> Any:
    return task.get("name") if isinstance(task, dict) else getattr(task, "name", None)


def consistency_problems(v: Mapping[str, Any]) -> list[FieldProblem]:
    """Every cross-field rule of a job spec that ``v`` breaks, in field order.

    ``v`` is a validated spec's fields, or a raw TOML table whose fields may themselves be
    invalid (the loader asks both ways, so a file's cross-field errors are reported together
    with its field errors instead of only after those are fixed): a value counts as given
    when present and not None, and only integer exit codes are compared.
    """
    out: list[FieldProblem] = []
    kind = v.get("kind") or "command"
    given = {"schedule": v.get("schedule") is not None, "every": v.get("every") is not None,
             "once": v.get("once") is True}
    triggers = [n for n, on in given.items() if on]
    if len(triggers) > 1:
        out.append(FieldProblem(triggers[1], f"give only one of schedule, every, once (got {', '.join(triggers)})"))
    if v.get("at") is not None and not given["once"]:
        out.append(FieldProblem("at", "'at' needs once = true"))
    if v.get("timezone") is not None and not given["schedule"] and v.get("at") is None:
        out.append(FieldProblem("timezone", "'timezone' applies only to a cron 'schedule' or a one-shot 'at'"))
    if kind == "command" and v.get("command") is None:
        out.append(FieldProblem("command", "field required (an argv list or a shell string)"))
    retry_on, no_retry_on = v.get("retry_on"), v.get("no_retry_on")
    if no_retry_on is None and kind == "agent":
        no_retry_on = [AGENT_EXIT_PERMANENT]  # the default an agent job gets
    codes = [{c for c in x if isinstance(c, int)} if isinstance(x, list | tuple) else set()
             for x in (retry_on, no_retry_on)]
    if retry_on is not None and codes[0] & codes[1]:
        both = ", ".join(str(c) for c in sorted(codes[0] & codes[1]))
        out.append(FieldProblem("no_retry_on", f"an exit code cannot be in both retry_on and no_retry_on ({both})"))
    if kind == "agent" and v.get("agent") is None:
        out.append(FieldProblem("agent", "an agent job needs an [agent] table (model, system, task)"))
    if v.get("agent") is not None and kind != "agent":
        out.append(FieldProblem("agent", "'agent' needs kind = \"agent\""))
    tasks = v.get("tasks") or []
    if kind == "fanout":
        if not tasks:
            out.append(FieldProblem("tasks", "a fanout job needs at least one [[job.tasks]] entry"))
        elif isinstance(tasks, list | tuple):
            names = [_task_name(t) for t in tasks]
            if len(set(map(str, names))) != len(names):
                out.append(FieldProblem("tasks", "task names must be unique within a job"))
    elif tasks:
        out.append(FieldProblem("tasks", "'tasks' needs kind = \"fanout\""))
    return out


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
    # defer_build: a spec model's validator is built when a spec is first validated, not when
    # this module is imported (most CLI commands import it and never validate a spec).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


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
    #: The check answers the same on a retry (a schema or checksum check of what the run
    #: wrote): its failure escalates at once, naming it, instead of waiting silently for a
    #: retry that will fail the same way.
    deterministic: bool = False


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
    #: The account the job runs as (a name or uid, as a system crontab's user column); see
    #: ``core.runas``: honoured when the runner may switch to it, else an error, never ignored.
    user: str | None = None
    #: Pins the job to hosts: a hostname or runner label, or a list of them (any matches).
    #: Only runners whose hostname or ``labels`` setting matches claim its runs; None: any.
    host: NonEmptyStr | list[NonEmptyStr] | None = None
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
        return check_name(v)

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

    @field_validator("user")
    @classmethod
    def _user(cls, v: str | None) -> str | None:
        if v is not None and not USER_RE.match(v):
            raise ValueError(f"invalid user name {v!r} (a local account name such as 'backup', or a uid)")
        return v

    @field_validator("every")
    @classmethod
    def _every(cls, v: float | None) -> float | None:
        if v is not None and v < MIN_EVERY_S:
            raise ValueError(f"every must be at least 1s (got {duration_words(v)}); "
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
        problems = consistency_problems({name: getattr(self, name) for name in type(self).model_fields})
        if problems:
            raise FieldProblems(problems)
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
            return f"every {duration_words(self.every)}"
        if self.once:
            return f"once at {self.at.isoformat()}" if self.at else "once"
        return "manual"

    def run_timeout(self, task: str = "") -> tuple[float, bool]:
        """(seconds, whether it is ``budget.wall``) a run of this job may take: its sub-task's
        ``timeout`` for a fan-out ``task``, else the job's, or ``budget.wall`` when shorter.
        What the runner's watchdog and the run's monitor enforce."""
        sub = next((t for t in self.tasks if t.name == task), None) if task else None
        timeout = sub.timeout if sub is not None else self.timeout
        if self.budget.wall is not None and self.budget.wall < timeout:
            return self.budget.wall, True
        return timeout, False

    def spec_hash(self) -> str:
        """16 hex digits identifying the validated spec (stored on runs as ``spec_hash``)."""
        # An unpinned job hashes as before ``host`` existed: its runs keep their spec hash.
        dumped = self.model_dump_json(exclude={"host"} if self.host is None else None)
        return hashlib.sha256(dumped.encode()).hexdigest()[:16]

    @property
    def hosts(self) -> list[str]:
        """The hostnames or labels the job is pinned to (``host``); [] when any host may run it."""
        if self.host is None:
            return []
        return [self.host] if isinstance(self.host, str) else list(self.host)


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

