"""The bad-input corpus: every malformed spec gives a clear error naming file and field
(and line where the parser or source map can tell), and valid jobs beside them still load."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from core.spec.loader import load_dir, load_file
from core.spec.settings import SettingsError, load_settings

CORPUS = Path(__file__).parent / "spec_corpus"
BAD = sorted((CORPUS / "bad").glob("*.toml"))


def _expectation(path: Path) -> dict[str, str]:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect:"), f"{path.name} lacks its '# expect:' header"
    return dict(part.split("=", 1) for part in first[len("# expect:"):].split())


def test_corpus_is_large_enough():
    assert len(BAD) >= 30


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_spec_names_file_field_and_line(path: Path):
    want = _expectation(path)
    res = load_file(path)
    assert res.errors, f"{path.name} loaded without error"
    assert str(path) in res.bad_files
    err = res.errors[0]
    text = str(err)
    assert text.startswith(str(path)), text
    if "field" in want:
        assert err.field == want["field"], text
        assert f"field '{want['field']}'" in text
    if "line" in want:
        assert err.line == int(want["line"]), text
        assert text.startswith(f"{path}:{want['line']}: ")
    # pydantic's internals never leak into a message
    for e in res.errors:
        assert "[type=" not in str(e) and "pydantic" not in str(e).lower()
        assert "function-after" not in str(e) and "list[str]" not in str(e)
        assert e.message and len(e.message) < 300


def test_valid_jobs_beside_the_corpus_still_load(tmp_path: Path):
    for p in BAD:
        shutil.copy(p, tmp_path / p.name)
    (tmp_path / "good.toml").write_text('name = "good"\ncommand = ["echo", "ok"]\nevery = "30s"\n')
    (tmp_path / "more_good.toml").write_text(
        '[[job]]\nname = "g1"\ncommand = "true"\n\n[[job]]\nname = "g2"\ncommand = "true"\nonce = true\n')
    res = load_dir(tmp_path)
    assert {"good", "g1", "g2"} <= set(res.jobs)
    assert str(tmp_path / "good.toml") not in res.bad_files
    assert len({e.file for e in res.errors}) == len(BAD)
    # a file with a duplicate keeps its first job valid
    assert "twin" in res.jobs


def test_settings_heartbeat_not_under_lease_names_file_and_field():
    with pytest.raises(SettingsError) as info:
        load_settings(CORPUS / "settings_bad")
    msg = str(info.value)
    assert "settings_bad/watchkeeper.toml" in msg
    assert re.search(r"heartbeat \(10s\) must be at most a third of lease \(20s\)", msg)


def test_settings_file_is_not_loaded_as_a_job():
    res = load_dir(CORPUS / "settings_bad")
    assert res.jobs == {} and res.errors == []
