"""Runner-wide settings: ``watchkeeper.toml`` (spec folder or ``--config``), then
``WATCHKEEPER_*`` environment variables, then command-line flags — later wins.

Every setting has a default, so a folder of job specs alone is enough to run. Durations are
seconds (float); sizes are bytes.
"""

from __future__ import annotations

import contextvars
import getpass
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from core.spec.model import Duration

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


class CommandSink(BaseModel):
    """Runs a program with the notification as JSON on stdin (e.g. ``notify-send``, ``mail``)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["command"] = "command"
    name: str = Field("command", description="Sink name recorded on each notification row.")
    command: list[str] = Field(..., min_length=1, description="argv of the program to run.")
    timeout: float = Field(10.0, gt=0, description="Seconds before the program is killed (counts as a failed delivery).")


class WebhookSink(BaseModel):
    """HTTP POST of the notification as JSON, with a Slack-compatible ``text`` field."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["webhook"] = "webhook"
    name: str = Field("webhook", description="Sink name recorded on each notification row.")
    url: str = Field(..., description="http:// or https:// URL to POST to.")
    timeout: float = Field(5.0, gt=0, description="Seconds per delivery attempt.")


class JudgeSettings(BaseModel):
    """The optional Claude judge, consulted only for soft anomalies."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool | None = Field(None, description="None: on when an API key is present.")
    api_key: str | None = Field(None, description="Anthropic API key; default $ANTHROPIC_API_KEY.")
    base_url: str | None = Field(None, description="Messages API base URL (tests point it at a local fake).")
    model: str = Field("claude-sonnet-4-6", description="Model name passed to the Messages API.")
    timeout: float = Field(20.0, gt=0, description="Seconds per API call before the rules verdict stands.")
    max_retries: int = Field(1, ge=0, description="SDK retries per call.")
    max_calls_per_hour: int = Field(30, ge=0, description="Budget: calls beyond this in a rolling hour are skipped.")

    def resolved_api_key(self) -> str | None:
        return self.api_key or os.environ.get("ANTHROPIC_API_KEY")

    def is_enabled(self) -> bool:
        return bool(self.resolved_api_key()) if self.enabled is None else (self.enabled and bool(self.resolved_api_key()))


class Settings(BaseSettings):
    """Validated runner-wide settings. See README "Settings" for the table of defaults."""

    # An empty variable (``WATCHKEEPER_LEDGER=``) means unset, not "the current folder".
    model_config = SettingsConfigDict(env_prefix="WATCHKEEPER_", env_nested_delimiter="__", extra="forbid",
                                      env_ignore_empty=True)

    ledger: Path = Field(Path("watchkeeper.db"), description="Ledger file (SQLite).")
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
    notify: list[CommandSink | WebhookSink] = Field(default_factory=list, description="Notification sinks.")
    theme: str = Field("watchkeeper-dark", description="Console theme.")
    refresh: Duration = Field(0.25, gt=0, description="Console poll interval, seconds.")

    @field_validator("ledger", "artifacts")
    @classmethod
    def _absolute(cls, v: Path | None) -> Path | None:
        # Jobs run in their own cwd: a relative artifacts path would point somewhere else there.
        return None if v is None else v.expanduser().absolute()

    @model_validator(mode="after")
    def _heartbeat_under_lease(self) -> Settings:
        if self.heartbeat > self.lease / 3:
            raise ValueError(
                f"heartbeat ({self.heartbeat:g}s) must be at most a third of lease ({self.lease:g}s), "
                "so one missed heartbeat never expires a live run's lease")
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
        return self.artifacts if self.artifacts is not None else self.ledger.parent / f"{self.ledger.stem}-artifacts"


class SettingsError(ValueError):
    """Settings could not be loaded; the message names the file and field."""


def _source_of(loc: str, flags: dict[str, Any], path: Path | None) -> str:
    """Where a bad value came from, for the error message: flag, variable or file."""
    top = loc.split(".")[0]
    if top in flags:
        return f"--{top.replace('_', '-')}"
    for var in ("WATCHKEEPER_" + loc.replace(".", "__").upper(), "WATCHKEEPER_" + top.upper()):
        if os.environ.get(var):
            return var
    return str(path) if path else "settings"


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
    if path is not None:
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{path}: {exc}") from None
    clean = {k: v for k, v in overrides.items() if v is not None}
    token = _FILE_DATA.set(data)
    try:
        settings = Settings(**clean)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            if not loc:  # a cross-field check: name the field its message is about
                loc = "heartbeat" if "heartbeat" in err["msg"] else "(settings)"
            msg = err["msg"].removeprefix("Value error, ")
            parts.append(f"{_source_of(loc, clean, path)}: field '{loc}': {msg}")
        raise SettingsError("\n".join(parts)) from None
    finally:
        _FILE_DATA.reset(token)
    return settings
