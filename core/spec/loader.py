"""Loading job specs: one TOML file (``load_file``) or a folder (``load_dir``), never raising
for bad content. Every problem is a ``SpecError`` naming file, line, job and field; a file is
read only when it is a small regular file (``MAX_SPEC_FILE_BYTES``).
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ValidationError

from core.spec.model import JobSpec, consistency_problems
from core.spec.source_map import (
    SourceMap,
    first_key_line,
    friendly_errors,
    guess_name,
    key_on_line,
    toml_error_line,
)
from core.text import safe_text

#: Job files larger than this are refused before they are read.
MAX_SPEC_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class SpecError:
    """One problem in a spec file. ``line`` is 1-based or None when unknown. ``KIND`` names
    what ``job`` is the name of in the text (a subclass for mission files says "mission")."""

    KIND: ClassVar[str] = "job"

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
            parts.append(f"{self.KIND} '{safe_text(self.job)}'")
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


class Unreadable(Exception):
    """A job file that cannot be read as text (its message is the whole error)."""


def _too_large(size: int) -> Unreadable:
    return Unreadable(f"too large ({size} bytes, limit 1 MiB)")


def read_spec_text(p: Path) -> str:
    """The text of a job file, refusing anything that is not a small regular file.

    ``stat`` comes first, so a FIFO, a device or a huge (sparse) file is never opened or
    read; the open is non-blocking and re-checked with ``fstat`` in case the path was
    swapped in between, and at most ``MAX_SPEC_FILE_BYTES + 1`` bytes are ever read.
    """
    try:
        st = os.stat(p)
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror or exc}"
                          + (" (dangling symlink)" if p.is_symlink() else "")) from None
    if not stat.S_ISREG(st.st_mode):
        raise Unreadable("not a regular file")
    if st.st_size > MAX_SPEC_FILE_BYTES:
        raise _too_large(st.st_size)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("not a regular file")
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
        raise Unreadable(f"cannot read: {exc.strerror or exc}") from None
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
        raise Unreadable(f"cannot read: not UTF-8 text ({exc.reason} at byte {exc.start + skip})") from None


def load_file(path: str | os.PathLike[str]) -> LoadResult:
    """Parse and validate one TOML file; never raises for bad content."""
    p = Path(path)
    res = LoadResult()
    name = str(p)
    try:
        text = read_spec_text(p)
    except Unreadable as exc:
        res.errors.append(SpecError(name, None, None, None, str(exc)))
        res.bad_files.add(name)
        return res
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        line = toml_error_line(exc)
        res.errors.append(SpecError(name, line, guess_name(text), key_on_line(text, line),
                                    f"TOML syntax: {msg}"))
        res.bad_files.add(name)
        return res
    multi = "job" in data
    if multi:
        extra = sorted(k for k in data if k != "job")
        if extra:
            res.errors.append(SpecError(name, first_key_line(text, extra[0]), None, extra[0],
                                        "top-level keys are not allowed beside [[job]] tables"))
        raw_jobs = data["job"]
        if not isinstance(raw_jobs, list):
            raw_jobs = [raw_jobs]
        if not all(isinstance(r, dict) for r in raw_jobs):
            res.errors.append(SpecError(name, first_key_line(text, "job"), None, "job",
                                        "'job' must be [[job]] tables"))
            res.bad_files.add(name)
            return res
    else:
        raw_jobs = [data]
    smap = SourceMap(text, multi)
    for index, raw in enumerate(raw_jobs):
        if not isinstance(raw, dict):
            res.errors.append(SpecError(name, smap.line_for(index, ()), None, None, "job must be a table"))
            continue
        job_name = raw.get("name") if isinstance(raw.get("name"), str) else None
        try:
            spec = JobSpec.model_validate(raw)
        except ValidationError as exc:
            found = [SpecError(name, smap.line_for(index, loc), job_name, fld, msg)
                     for fld, loc, msg in friendly_errors(exc, raw, JobSpec)]
            # With field errors pydantic never reached the cross-field checks: ask them of
            # the raw table, so one pass over the file shows every problem.
            reported = {(e.field, e.message) for e in found}
            found += [SpecError(name, smap.line_for(index, (p.field,)), job_name, p.field, str(p))
                      for p in consistency_problems(raw) if (p.field, str(p)) not in reported]
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
        text = read_spec_text(Path(job.source))
    except (Unreadable, ValueError, OSError):
        return job.line
    multi = any(SourceMap._HEADER.match(ln) for ln in text.splitlines())
    smap = SourceMap(text, multi)
    index = 0
    if multi and job.line is not None:
        # The job's block is the last [[job]] header at or before its name line.
        index = max((i for i, h in enumerate(smap.headers) if h <= job.line), default=0)
    return smap.line_for(index, loc) or job.line
