"""Runner-wide settings: ``watchkeeper.toml`` (spec folder or ``--config``), then
``WATCHKEEPER_*`` environment variables, then command-line flags — later wins.

Every setting has a default, so a folder of job specs alone is enough to run. Durations are
seconds (float); sizes are bytes.
"""

from __future__ import annotations

import contextlib
import contextvars
import getpass
import hashlib
import io
import logging
import os
import re
import tomllib
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

import humanize
from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from core.spec.durations import parse_duration
from core.spec.model import Duration, FieldProblem, FieldProblems
from core.spec.source_map import SourceMap, _key_parts, each_problem, toml_error_line
from core.vocabulary import SEVERITY_RANK, Severity

CONFIG_NAME = "watchkeeper.toml"
# The settings file's values while ``load_settings`` builds a Settings: a source of their own,
# so that precedence is flags (init kwargs) > environment > file.
_FILE_DATA: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("watchkeeper_file_settings",
                                                                                    default=None)


def _default_operator() -> str:
    try:
        return os.environ.get("USER") or getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return "operator"


class _Sink(BaseModel):
    """What every notification sink shares: its name, what it hears, and how it speaks."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., description="Sink name recorded on each notification row (``notifications.sink``).")
    min_severity: Severity = Field(Severity.INFO, description="Escalations below this severity skip this sink.")
    owners: list[str] = Field(default_factory=list, description=(
        "Owners (job ``owner``) whose escalations this sink hears; empty: every escalation. "
        "``[routes]`` adds to it."))
    recovery: bool = Field(False, description="Also send a notice when an escalation this sink was told about recovers.")
    group_wait: Duration = Field(0.0, ge=0, description=(
        "Seconds a new notification waits so a burst becomes one message (Alertmanager's group_wait); 0: at once."))
    repeat: Duration | None = Field(None, gt=0, description=(
        "Seconds after which an open (unacknowledged, unsnoozed) critical escalation is sent again; None: never."))

    def hears(self, owner: str | None, severity: str | None) -> bool:
        """True when an escalation of ``owner`` at ``severity`` goes to this sink."""
        if SEVERITY_RANK.get(severity, 0) < SEVERITY_RANK[self.min_severity.value]:
            return False
        return not self.owners or (owner is not None and owner in self.owners)


class CommandSink(_Sink):
    """Runs a program with the notification as JSON on stdin (e.g. ``notify-send``, ``mail``)."""

    type: Literal["command"] = "command"
    name: str = Field("command", description="Sink name recorded on each notification row.")
    command: list[str] = Field(..., min_length=1, description="argv of the program to run.")
    timeout: Duration = Field(10.0, gt=0, description="Seconds before the program is killed (counts as a failed delivery).")


class WebhookSink(_Sink):
    """HTTP POST of the notification as JSON, with a Slack-compatible ``text`` field."""

    type: Literal["webhook"] = "webhook"
    name: str = Field("webhook", description="Sink name recorded on each notification row.")
    url: str = Field(..., description="http:// or https:// URL to POST to.")
    timeout: Duration = Field(5.0, gt=0, description="Seconds per delivery attempt.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        parts = urllib.parse.urlsplit(v.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in v.strip()):
            raise ValueError("must be an http:// or https:// URL with a host, such as https://hooks.example.com/x")
        return v.strip()


class AppriseSink(_Sink):
    """One Apprise URL: email (``mailto://``), Slack, Telegram, ntfy, Matrix, Discord, PagerDuty, ...

    The message is a title sentence and a body with the why, the job's last output lines,
    host, run id and the command that opens the run: plain text, or an HTML layout for a
    service that sends HTML (e-mail).
    """

    type: Literal["apprise"] = "apprise"
    name: str = Field("apprise", description="Sink name recorded on each notification row.")
    url: str = Field(..., min_length=3, description="An Apprise URL, e.g. mailto://user:pass@example.com?to=ops@example.com.")
    timeout: Duration = Field(10.0, gt=0, description="Seconds to connect and to read, per delivery attempt.")

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, v: str) -> str:
        import apprise  # lazy: only settings that name an apprise sink pay its import

        with apprise_log() as log:
            server = apprise.Apprise.instantiate(v, suppress_exceptions=True)
        if server is None:
            scheme = v.split("://", 1)[0] if "://" in v else v[:20]
            # Apprise says why only in its log ("Could not load E-Mail URL: <url>"): its
            # words without the URL (which may hold a password) join our one line.
            why = [ln.split(": ", 1)[0].strip().rstrip(".") for ln in log.getvalue().splitlines() if ln.strip()]
            said = f": {why[-1]}" if why else ""
            raise ValueError(f"not a usable Apprise URL (scheme {scheme!r}{said}); see the Apprise wiki for URL forms")
        return v


@contextlib.contextmanager
def apprise_log() -> Iterator[io.StringIO]:
    """Apprise's log lines (warnings and worse, message text only) collected into the yielded
    buffer instead of reaching the root logger's stderr handler: a caller says what went
    wrong in its own one line."""
    logger = logging.getLogger("apprise")
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.setLevel(logging.WARNING)
    saved = logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    try:
        yield buf
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = saved[0], saved[1]


def _sink_type(value: Any) -> str | None:
    # ``type`` picks the model, so an error names that sink's fields only; "command" when omitted.
    if isinstance(value, dict):
        return str(value.get("type", "command"))
    return getattr(value, "type", None)


Sink = Annotated[Annotated[CommandSink, Tag("command")] | Annotated[WebhookSink, Tag("webhook")]
                 | Annotated[AppriseSink, Tag("apprise")], Discriminator(_sink_type)]


class JudgeSettings(BaseModel):
    """The optional Claude judge, consulted on the successes the rules cannot vouch for
    (``core.supervisor.reach``) and on soft anomalies; it escalates only by a checked quote."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool | None = Field(None, description="None: on when an API key is present.")
    api_key: str | None = Field(None, description="Anthropic API key; default $ANTHROPIC_API_KEY.")
    base_url: str | None = Field(None, description="Messages API base URL (tests point it at a local fake).")
    model: str = Field("claude-sonnet-4-6", description="Model name passed to the Messages API.")
    timeout: Duration = Field(20.0, gt=0, description="Seconds per API call before the rules verdict stands.")
    max_retries: int = Field(1, ge=0, description="SDK retries per call.")
    max_calls_per_hour: int = Field(30, ge=0, description="Budget: calls beyond this in a rolling hour are skipped.")
    first_successes: int = Field(5, ge=0, description=(
        "A job's first this many successes are put before the judge whatever they printed "
        "(no baseline vouches for them yet)."))

    def resolved_api_key(self) -> str | None:
        return self.api_key or os.environ.get("ANTHROPIC_API_KEY")

    def is_enabled(self) -> bool:
        return bool(self.resolved_api_key()) if self.enabled is None else (self.enabled and bool(self.resolved_api_key()))


class MetricsSettings(BaseModel):
    """Prometheus metrics of the runner (``watchkeeper run --metrics`` overrides ``bind``).
    Off unless ``bind`` is set; the figures are read-only, so anything that can reach the
    address can read them: keep it on loopback, or firewall it to the Prometheus server."""

    model_config = ConfigDict(extra="forbid")
    bind: str | None = Field(None, pattern=r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):[0-9]{1,5}$", description=(
        "HOST:PORT to serve /metrics on, e.g. 127.0.0.1:9464; none: no metrics."))


class RetentionSettings(BaseModel):
    """How much run history the ledger keeps (``watchkeeper prune``, and the runner once a day).

    On by default, so an unattended ledger does not grow forever: ended runs older than
    ``max_age`` (90 days) are pruned, keeping each job's newest ``keep_per_job`` (60).
    ``enabled = false`` keeps everything. Pruning never removes a run an active escalation
    cites, a run not yet ended, nor the newest ``keep_per_job`` ended runs of each job (the
    history its baselines are learnt from); a run and its retries go or stay together.
    """

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description=(
        "false: never prune (neither the runner nor `watchkeeper prune` without --max-age/--max-size)."))
    max_age: Duration | None = Field(90 * 86400.0, gt=0, description=(
        "Ended runs older than this many seconds are pruned ('90d').")
    )
    max_size: ByteSize | None = Field(None, gt=0, description=(
        "Ledger plus artifacts above this many bytes ('2GB'): oldest ended runs are pruned until under it."))
    keep_per_job: int = Field(60, ge=0, description="Newest ended top-level runs kept per job, whatever their age.")
    batch: int = Field(200, ge=1, le=10000, description="Runs deleted per transaction (keeps each write short).")
    interval: Duration = Field(86400.0, gt=0, description="Seconds between the runner's own prunes (once a day).")

    @property
    def active(self) -> bool:
        """True when the runner prunes: switched on, with an age or size limit."""
        return self.enabled and (self.max_age is not None or self.max_size is not None)

    def summary(self) -> str:
        """One line for people: what is pruned and how to switch it off (or that it is off)."""
        if not self.active:
            return "retention: off — every run is kept (set [retention] max_age in watchkeeper.toml to prune)"
        limits = []
        if self.max_age is not None:
            days = self.max_age / 86400
            limits.append(f"runs ended more than {days:g}d ago" if days >= 1 else f"runs ended more than {self.max_age:g}s ago")
        if self.max_size is not None:
            size = humanize.naturalsize(int(self.max_size), binary=True)
            limits.append(f"the oldest runs while ledger and artifacts exceed {size}")
        return (f"retention: on — {' and '.join(limits)} are pruned every {self.interval / 3600:g}h, keeping each"
                f" job's newest {self.keep_per_job}; [retention] enabled = false keeps everything")


def is_ledger_url(value: object) -> bool:
    """True when a ledger setting names a PostgreSQL database rather than a SQLite file."""
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


class DeadmanSettings(BaseModel):
    """``[deadman]``: a URL the runner pings every heartbeat (the Healthchecks / Cronitor ping
    protocol: an HTTP GET of the URL; ``<url>/fail`` while the runner cannot write the ledger),
    so a host that dies, or whose runner dies, is reported from outside."""

    model_config = ConfigDict(extra="forbid")
    url: str | None = Field(None, description="Ping URL, e.g. https://hc-ping.com/<uuid>; unset: no pings.")
    timeout: Duration = Field(5.0, gt=0, description="Seconds one ping may take before it is given up.")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = urlsplit(v.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {v!r}")
        return v.strip()


class Settings(BaseSettings):
    """Validated runner-wide settings. See docs/settings.md and the generated settings reference."""

    # An empty variable (``WATCHKEEPER_LEDGER=``) means unset, not "the current folder".
    model_config = SettingsConfigDict(env_prefix="WATCHKEEPER_", env_nested_delimiter="__", extra="forbid",
                                      env_ignore_empty=True)

    ledger: Path | str = Field(Path("watchkeeper.db"), description=(
        "Ledger: a SQLite file, or a postgresql:// URL (the fleet; password from libpq's own sources)."))
    artifacts: Path | None = Field(None, description="Per-run output folder; default: '<ledger name>-artifacts' beside the ledger.")
    concurrency: int = Field(8, ge=1, description="Global limit of runs executing at once.")
    heartbeat: Duration = Field(5.0, gt=0, description="Seconds between runner heartbeats (lease renewals).")
    lease: Duration = Field(30.0, gt=0, description="Seconds a run's lease lasts without renewal.")
    sweep_interval: Duration = Field(5.0, gt=0, description="Seconds between orphan-sweep passes in the runner.")
    start_timeout: Duration = Field(30.0, gt=0, description="Seconds a run may stay 'spawned' before it is settled.")
    shutdown_grace: Duration = Field(10.0, ge=0, description="Seconds running jobs get after SIGINT/SIGTERM to the runner.")
    output_cap: int = Field(1024 * 1024, ge=4096, description="Bytes of output kept per stream (head + tail).")
    handoff_max: int = Field(1024 * 1024, ge=1024, description="Largest handoff file read, bytes.")
    operator: str = Field(default_factory=_default_operator, description="Name recorded on operator actions.")
    owner: str | None = Field(None, description="Who owns runner-level escalations (runner_gap); default: the operator.")
    judge: JudgeSettings = Field(default_factory=JudgeSettings, description="Claude judge settings.")
    notify: list[Sink] = Field(default_factory=list, description="Notification sinks (command, webhook, apprise).")
    routes: dict[str, list[str]] = Field(default_factory=dict, description=(
        "Owner → names of the sinks that hear that owner's escalations (added to each sink's ``owners``)."))
    metrics: MetricsSettings = Field(default_factory=MetricsSettings, description="Prometheus metrics.")
    retention: RetentionSettings = Field(default_factory=RetentionSettings, description="Run history retention.")
    labels: list[str] = Field(default_factory=list, description=(
        "Labels of this runner's host: a job whose ``host`` names one of them (or the hostname) runs here."))
    deadman: DeadmanSettings = Field(default_factory=lambda: DeadmanSettings(), description=(
        "A dead man's switch pinged every heartbeat (Healthchecks / Cronitor), for a host without a fleet."))
    theme: str = Field("watchkeeper-dark", description="Console theme.")
    refresh: Duration = Field(0.25, gt=0, description="The console ledger watcher's pulse, seconds (a commit wakes it at once).")
    themes_dir: Path | None = Field(None, description="Folder of user console themes (*.toml, as in themes/).")

    @field_validator("ledger", mode="before")
    @classmethod
    def _ledger_place(cls, v: Any) -> Any:
        # A PostgreSQL URL stays a string (a Path would fold its '//'); anything else is a file.
        if isinstance(v, str) and is_ledger_url(v):
            return v
        return Path(v) if isinstance(v, str) else v

    @field_validator("ledger", "artifacts", "themes_dir")
    @classmethod
    def _absolute(cls, v: Path | str | None) -> Path | str | None:
        # Jobs run in their own cwd: a relative artifacts path would point somewhere else there.
        if v is None or isinstance(v, str):
            return v
        return v.expanduser().absolute()

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        problems = settings_problems({"notify": self.notify, "routes": self.routes, "heartbeat": self.heartbeat,
                                      "lease": self.lease})
        if problems:
            raise FieldProblems(problems)
        by_name = {sink.name: sink for sink in self.notify}
        for owner, names in self.routes.items():
            for name in names:
                if owner not in by_name[name].owners:
                    by_name[name].owners.append(owner)
        return self

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource):
        # Flags (init kwargs) beat the environment, which beats the file.
        return (init_settings, env_settings, InitSettingsSource(settings_cls, init_kwargs=_FILE_DATA.get() or {}))

    @property
    def runner_owner(self) -> str:
        """The owner recorded on runner-level escalations: ``owner``, else ``operator``."""
        return self.owner or self.operator

    @property
    def artifacts_dir(self) -> Path:
        # Named after the ledger: two ledgers in one folder must not share run folders
        # (run ids restart at 1 in each, and a handoff would land in the other's run).
        if self.artifacts is not None:
            return self.artifacts
        if isinstance(self.ledger, str):  # PostgreSQL: run output stays on each host, per ledger
            state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
            return state / "watchkeeper" / f"{pg_ledger_label(self.ledger)}-artifacts"
        return self.ledger.parent / f"{self.ledger.stem}-artifacts"


def pg_ledger_label(url: str) -> str:
    """A file name that tells PostgreSQL ledgers apart: server, port, database and, when the
    URL's ``options`` set one, ``search_path``, as libpq resolves them (URL, its query
    parameters, then ``PGHOST``/``PGPORT``/``PGDATABASE``; a Unix socket is ``local``), then a
    short hash of those four as given, so names that only differ in characters a file name
    cannot hold stay apart (``db1.example-5432-watchkeeper-3f9a1c``). Two ledgers that share
    a database name on two servers, or two schemas of one database, never share run folders
    (their run ids restart at 1 each). Never the user or password."""
    # As libpq reads a URI (the database driver stays in the ledger package): the query's
    # parameters fill what the URI's parts leave out.
    parts = urlsplit(url)
    info = {k: v for k, v in parse_qsl(parts.query) if v}
    with contextlib.suppress(ValueError):
        if parts.port:
            info["port"] = str(parts.port)
    if parts.hostname:
        info["host"] = unquote(parts.hostname)
    if parts.path.strip("/"):
        info["dbname"] = unquote(parts.path.strip("/"))
    host = info.get("host") or os.environ.get("PGHOST") or ""
    port = info.get("port") or os.environ.get("PGPORT") or "5432"
    db = info.get("dbname") or os.environ.get("PGDATABASE") or "ledger"
    found = re.search(r"search_path\s*=\s*(\S+)", info.get("options", ""))
    label = [host if host and not host.startswith("/") else "local", port, db, *([found.group(1)] if found else [])]
    digest = hashlib.sha256("\0".join([host, port, db, *label[3:]]).encode()).hexdigest()[:6]
    return "-".join([*(re.sub(r"[^A-Za-z0-9._]+", "_", part) for part in label), digest])


def _sink_name(sink: Any) -> Any:
    if isinstance(sink, dict):  # a raw table: a sink's name defaults to its type
        return sink.get("name", sink.get("type", "command"))
    return getattr(sink, "name", None)


def _seconds(value: Any, default: float) -> float | None:
    try:
        return default if value is None else parse_duration(value)
    except ValueError:
        return None


def settings_problems(v: dict[str, Any]) -> list[FieldProblem]:
    """Every cross-field rule of the settings that ``v`` breaks: sink names unique, routes
    naming configured sinks, heartbeat at most a third of lease. ``v`` holds validated
    values or raw file values (``load_settings`` asks both ways so these are reported with
    the field errors, not after them); a raw value that cannot be read is left to its field
    error."""
    out: list[FieldProblem] = []
    raw_sinks, raw_routes = v.get("notify"), v.get("routes")
    sinks: list[Any] = raw_sinks if isinstance(raw_sinks, list) else []
    names = [_sink_name(sink) for sink in sinks]
    for i, name in enumerate(names):
        if name in names[:i]:  # reported on the repeat, naming the sink it repeats
            out.append(FieldProblem(f"notify[{i}].name", f"sink names must be unique ({name!r} is also "
                                                         f"notify[{names.index(name)}])"))
    routes: dict[Any, Any] = raw_routes if isinstance(raw_routes, dict) else {}
    known = list(dict.fromkeys(str(n) for n in names))
    for owner, wanted in routes.items():
        for name in wanted if isinstance(wanted, list) else []:
            if name not in known:
                out.append(FieldProblem(f"routes.{owner}",
                                        f"no sink named {name!r} (sinks: {', '.join(known) or 'none'})"))
    heartbeat, lease = _seconds(v.get("heartbeat"), 5.0), _seconds(v.get("lease"), 30.0)
    if heartbeat is not None and lease is not None and heartbeat > lease / 3:
        out.append(FieldProblem("heartbeat", f"heartbeat ({heartbeat:g}s) must be at most a third of lease "
                                             f"({lease:g}s), so one missed heartbeat never expires a live run's lease"))
    return out


class SettingsError(ValueError):
    """Settings could not be loaded; the message names the file (and line) and field, one
    problem a line. ``problems``: ``[{"file", "line" (1-based or None), "field", "message"}]``
    (``file`` is the path, the variable or the flag the value came from)."""

    def __init__(self, message: str, problems: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


#: pydantic's tags for the notify sink union (not keys of the file).
_SINK_ORDER = ("command", "webhook", "apprise")
_SINK_TAGS = frozenset(_SINK_ORDER)


def _field_path(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """``loc`` without the sink union's tag (``notify.0.command.timeout`` → ``notify.0.timeout``)."""
    out: list[Any] = []
    for i, part in enumerate(loc):
        if i == 2 and loc[0] == "notify" and isinstance(loc[1], int) and part in _SINK_TAGS:
            continue
        out.append(part)
    return tuple(out)


def _dotted(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _settings_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Where each key of a settings file is written: ``("notify", 1, "timeout")`` → line
    (1-based), also for table headers (``("notify", 1)``, ``("retention",)``)."""
    lines: dict[tuple[Any, ...], int] = {}
    counts: dict[tuple[str, ...], int] = {}
    prefix: tuple[Any, ...] = ()
    for no, line in enumerate(text.splitlines(), start=1):
        m = SourceMap._TABLE.match(line)
        if m:
            parts = tuple(_key_parts(m.group(1)))
            if line.lstrip().startswith("[["):
                counts[parts] = counts.get(parts, -1) + 1
                prefix = parts + (counts[parts],)
            else:
                prefix = parts
            lines.setdefault(prefix, no)
            continue
        key = SourceMap.key_of(line)
        if key is not None:
            lines.setdefault(prefix + tuple(key.split(".")), no)
    return lines


def _line_for(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    for n in range(len(loc), 0, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def _source_of(loc: str, flags: dict[str, Any], path: Path | None) -> str:
    """Where a bad value came from, for the error message: flag, variable or file."""
    top = loc.split(".")[0]
    if top in flags:
        return f"--{top.replace('_', '-')}"
    for var in ("WATCHKEEPER_" + loc.replace(".", "__").upper(), "WATCHKEEPER_" + top.upper()):
        if os.environ.get(var):
            return var
    return str(path) if path else "settings"


def _problem_line(p: dict[str, Any]) -> str:
    where = f"{p['file']}:{p['line']}" if p["line"] else p["file"]
    return f"{where}: field '{p['field']}': {p['message']}"


def load_settings(spec_dir: str | os.PathLike[str] | None = None,
                  config: str | os.PathLike[str] | None = None,
                  **overrides: Any) -> Settings:
    """Load settings: ``config`` or ``<spec_dir>/watchkeeper.toml`` if present, then env,
    then ``overrides`` (command-line flags; ``None`` values are ignored).

    Raises:
        SettingsError: unreadable TOML or an invalid field (message names file and field).
    """
    path: Path | None = None
    if config is not None:
        path = Path(config)
        if not path.exists():
            raise SettingsError(f"{path}: config file not found")
    elif spec_dir is not None and (Path(spec_dir) / CONFIG_NAME).exists():
        path = Path(spec_dir) / CONFIG_NAME
    data: dict[str, Any] = {}
    text = ""
    if path is not None:
        try:
            text = path.read_text()
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            line = toml_error_line(exc)
            raise SettingsError(f"{path}{f':{line}' if line else ''}: {exc}",
                                [{"file": str(path), "line": line, "field": None, "message": str(exc)}]) from None
    clean = {k: v for k, v in overrides.items() if v is not None}
    token = _FILE_DATA.set(data)
    try:
        settings = Settings(**clean)
    except ValidationError as exc:
        problems = []
        where_lines = _settings_lines(text) if path is not None else {}
        errors = each_problem(exc.errors(include_url=False))
        if not any(isinstance((e.get("ctx") or {}).get("error"), FieldProblem) for e in errors):
            # Field errors stopped pydantic before the cross-field checks: ask them of the
            # file and flags as given, so one pass shows every problem.
            raw = {**data, **clean}
            errors += [{"loc": (), "msg": str(p), "ctx": {"error": p}} for p in settings_problems(raw)]
        for err in errors:
            fields = _field_path(tuple(err["loc"]))
            msg = err["msg"].removeprefix("Value error, ")
            problem = (err.get("ctx") or {}).get("error")
            if isinstance(problem, FieldProblem):  # a cross-field check names its field
                fields = tuple(int(p) if p.isdigit() else p for p in re.split(r"[.\[\]]+", problem.field) if p)
            if err.get("type") == "union_tag_invalid":  # pydantic's words name our tag function
                tag = (err.get("ctx") or {}).get("tag")
                fields, msg = (*fields, "type"), f"unknown sink type {tag!r} ({', '.join(_SINK_ORDER)})"
            loc = _dotted(fields)
            source = _source_of(loc.split("[")[0], clean, path)
            line = _line_for(where_lines, fields) if path is not None and source == str(path) else None
            problems.append({"file": source, "line": line, "field": loc, "message": msg})
        # In the order a reader meets them in the file (stable: ties keep pydantic's order).
        problems.sort(key=lambda p: (p["line"] is None, p["line"] or 0))
        parts = [_problem_line(p) for p in problems]
        raise SettingsError("\n".join(parts), problems) from None
    finally:
        _FILE_DATA.reset(token)
    return settings
