"""JobSpec validation details and derived values."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from core.spec.loader import load_file
from core.spec.model import (
    JobSpec,
    command_text,
    parse_duration,
    spec_from_json,
    spec_json,
)


@pytest.mark.parametrize("text,seconds", [("30s", 30), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25),
                                          ("2d", 172800), (45, 45), (1.5, 1.5), ("90", 90)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "soon", "5 fortnights", "1h-", True, None, [1]])
def test_parse_duration_rejects(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_defaults_and_derived():
    spec = JobSpec(name="j", command="echo hi")
    assert spec.argv() == ["/bin/sh", "-c", "echo hi"]
    assert spec.schedule_text() == "manual"
    assert (spec.timeout, spec.grace, spec.max_attempts, spec.misfire, spec.kind) == (3600, 5, 1, "skip", "command")
    assert JobSpec(name="j", command=["ls", "-l"]).argv() == ["ls", "-l"]
    assert JobSpec(name="j", command="x", every=90).schedule_text() == "every 90s"
    assert command_text(["echo", "a b"]) == "echo 'a b'"


def test_expect_duration_accepts_durations():
    spec = JobSpec(name="j", command="x", expect={"duration": ["1s", "5m"], "output": "^ok"})
    assert spec.expect.duration == (1.0, 300.0)


def test_spec_json_round_trip_and_hash():
    spec = JobSpec(name="j", command="x", every="30s", once=False, retry_on=[1, 2], env={"A": "b"},
                   expect={"duration": ["1s", "2s"]}, verify=["test -f out"], at=None)
    again = spec_from_json(spec_json(spec))
    assert again == spec and again.spec_hash() == spec.spec_hash()
    assert JobSpec(name="j", command="y").spec_hash() != JobSpec(name="j", command="x").spec_hash()


@pytest.mark.parametrize("kw", [{"env": {"A=B": "x"}}, {"env": {"A": "x\x00y"}}, {"retry_on": [1], "no_retry_on": [1]},
                                {"tags": [""]}, {"verify": [42]}, {"budget": {"tokens": "many"}}])
def test_more_rejections(kw):
    with pytest.raises(ValidationError):
        JobSpec(name="j", command="x", **kw)


def test_fanout_with_tasks_is_valid(tmp_path: Path):
    p = tmp_path / "f.toml"
    p.write_text('name = "f"\nkind = "fanout"\n[[tasks]]\nname = "a"\ncommand = "true"\n'
                 '[[tasks]]\nname = "b"\ncommand = ["echo", "b"]\ntimeout = "1m"\n')
    res = load_file(p)
    assert res.errors == [] and [t.name for t in res.jobs["f"].spec.tasks] == ["a", "b"]


def test_multi_job_file_lines(tmp_path: Path):
    p = tmp_path / "m.toml"
    p.write_text('[[job]]\nname = "a"\ncommand = "true"\n\n[[job]]\nname = "b"\ncommand = "true"\n'
                 '[job.backoff]\nfactor = 0\n')
    res = load_file(p)
    assert "a" in res.jobs
    (err,) = res.errors
    assert (err.line, err.job, err.field) == (9, "b", "backoff.factor")
