"""Mission definitions: TOML files in ``<spec folder>/missions/``, validated by pydantic.

A file holds one mission (top-level keys) or several ``[[mission]]`` tables. A mission
names its goal (a default; ``watchkeeper mission start GOAL`` gives its own), its
coordinator, the worker jobs it may spawn (jobs of the spec folder, usually
``kind = "agent"``), its budgets and its owner. Errors are ``SpecError`` lines naming file,
line and field, like job specs.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from core.spec.loader import SpecError, Unreadable, read_spec_text
from core.spec.model import (
    Command,
    FieldProblem,
    Int,
    NonEmptyStr,
    Number,
    _Strict,
    check_name,
)
from core.spec.source_map import SourceMap, friendly_errors, toml_error_line


@dataclass(frozen=True)
class MissionError(SpecError):
    """A ``SpecError`` of a mission file: the name is a mission's (``job`` holds it)."""

    KIND: ClassVar[str] = "mission"


#: Sub-folder of the spec folder that holds mission definitions (not loaded as jobs).
MISSIONS_DIR = "missions"


class MissionBudget(_Strict):
    """Hard caps: ``turns`` (coordinator calls), ``workers`` (spawns), ``tokens`` and ``cost``
    (dollars), which count the coordinator's usage and every worker's (as their handoffs
    report it). When one is exhausted the mission stops planning and waits for a person
    with a partial report."""

    turns: Int = Field(20, ge=1, le=1000)
    workers: Int = Field(10, ge=1, le=1000)
    tokens: Int | None = Field(None, gt=0)
    cost: Number | None = Field(None, gt=0)


class MissionSpec(_Strict):
    """One mission definition.

    ``coordinator``: ``claude`` (tool use through the Messages API), ``scripted`` (the
    program ``command``, called once per turn with the mission as JSON on stdin) or ``auto``
    (Claude when an API key is configured, else ``command``).
    """

    name: str
    goal: NonEmptyStr | None = None
    coordinator: Literal["claude", "scripted", "auto"] = "auto"
    command: Command | None = None
    model: NonEmptyStr = "claude-sonnet-4-6"
    system: str = ""
    workers: list[NonEmptyStr] = Field(min_length=1)
    owner: NonEmptyStr | None = None
    budget: MissionBudget = Field(default_factory=MissionBudget)
    timeout: Number = Field(600.0, gt=0, description="seconds one scripted coordinator turn may take")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v)

    @model_validator(mode="after")
    def _consistent(self) -> MissionSpec:
        if self.coordinator in ("scripted", "auto") and self.command is None:
            raise FieldProblem("command", f"a {self.coordinator} coordinator needs 'command' (the scripted coordinator)")
        if len(set(self.workers)) != len(self.workers):
            raise FieldProblem("workers", "worker names must be unique")
        return self


@dataclass
class LoadedMission:
    """A valid mission definition with the file it came from (its cwd for ``command``)."""

    spec: MissionSpec
    source: str
    line: int | None


@dataclass
class MissionLoad:
    missions: dict[str, LoadedMission] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)


def load_mission_file(path: str | os.PathLike[str]) -> MissionLoad:
    """Parse and validate one mission file; never raises for bad content."""
    p = Path(path)
    name = str(p)
    res = MissionLoad()
    try:
        text = read_spec_text(p)
    except Unreadable as exc:
        res.errors.append(MissionError(name, None, None, None, str(exc)))
        return res
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        res.errors.append(MissionError(name, toml_error_line(exc), None, None, f"TOML syntax: {exc}"))
        return res
    multi = "mission" in data
    raws: list[Any] = data["mission"] if multi else [data]
    if not isinstance(raws, list):
        raws = [raws]
    # The job source map reads [[job]] headers; a mission file uses [[mission]].
    smap = SourceMap(text.replace("[[mission]]", "[[job]]").replace("[mission.", "[job."), multi)
    for index, raw in enumerate(raws):
        if not isinstance(raw, dict):
            res.errors.append(MissionError(name, None, None, None, "mission must be a table"))
            continue
        mname = raw.get("name") if isinstance(raw.get("name"), str) else None
        try:
            spec = MissionSpec.model_validate(raw)
        except ValidationError as exc:
            res.errors.extend(MissionError(name, smap.line_for(index, loc), mname, fld, msg)
                              for fld, loc, msg in friendly_errors(exc, raw, MissionSpec))
            continue
        if spec.name in res.missions:
            res.errors.append(MissionError(name, smap.line_for(index, ("name",)), spec.name, "name",
                                        "duplicate mission name in this file"))
            continue
        res.missions[spec.name] = LoadedMission(spec, name, smap.line_for(index, ("name",)))
    return res


def load_missions(spec_dir: str | os.PathLike[str]) -> MissionLoad:
    """Every mission of ``<spec_dir>/missions/*.toml`` (an absent folder: none)."""
    total = MissionLoad()
    folder = Path(spec_dir) / MISSIONS_DIR
    if not folder.is_dir():
        return total
    for path in sorted(folder.glob("*.toml")):
        if path.name.startswith("."):
            continue
        res = load_mission_file(path)
        total.errors.extend(res.errors)
        for mname, lm in res.missions.items():
            if mname in total.missions:
                total.errors.append(MissionError(lm.source, lm.line, mname, "name",
                                              f"duplicate mission name (already in {total.missions[mname].source})"))
                continue
            total.missions[mname] = lm
    return total


def check_missions(spec_dir: str | os.PathLike[str], job_names: set[str]) -> list[SpecError]:
    """Errors of ``<spec_dir>/missions``: invalid definitions, and workers that name no job
    of the folder (field ``workers``)."""
    res = load_missions(spec_dir)
    errors = list(res.errors)
    for lm in res.missions.values():
        missing = [w for w in lm.spec.workers if w not in job_names]
        if missing:
            errors.append(MissionError(lm.source, lm.line, lm.spec.name, "workers",
                                    f"no job named {', '.join(repr(w) for w in missing)} in {spec_dir}"))
    return errors
