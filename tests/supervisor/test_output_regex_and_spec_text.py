"""Tester findings: a pathological ``expect.output`` regex must not freeze the runner, and
spec error text must be safe for a terminal, survive a BOM and name odd unknown keys."""

from __future__ import annotations

import re
import threading
import time
import unicodedata
from pathlib import Path

import pytest

from core.ledger.records import Outcome, Run
from core.spec.loader import load_file
from core.spec.model import JobSpec
from core.supervisor import verify
from core.supervisor.verify import verify_outcome

EVIL = "^(a|aa)+$"
EVIL_OUTPUT = "a" * 40 + "!"  # ~24 s of backtracking with the stdlib re


def _run(tmp_path: Path) -> Run:
    return Run(id=1, job="j", lineage="l", attempt=1, state="verifying", started_at=time.time())


def _verify_output(tmp_path: Path, pattern: str, stdout: str) -> verify.Check:
    spec = JobSpec(name="j", command="true", expect={"output": pattern})
    out = Outcome(run_id=1, job="j", lineage="l", attempt=1, state="verifying", status="success",
                  exit_code=0, stdout_head=stdout, stdout_tail="")
    vf = verify_outcome(out, _run(tmp_path), spec, tmp_path, exit_code=0, run_commands=False)
    [check] = [c for c in vf.checks if c.name == "expect_output"]
    return check


# -- 1. ReDoS ---------------------------------------------------------------------------------

def test_pathological_output_regex_times_out_as_a_failed_check(tmp_path: Path):
    # Behaviour, not wall time: the match is cut off by its own timeout and reported as a failed
    # soft check saying so (a loaded machine may take longer to get there; the verdict is the same).
    check = _verify_output(tmp_path, EVIL, EVIL_OUTPUT)
    assert check.ok is False and check.soft is True
    assert check.detail == (f"expect.output: pattern took longer than {verify.OUTPUT_MATCH_TIMEOUT_S:g} s "
                            "on the output; treated as not matching")


def test_matching_releases_the_gil_so_other_threads_keep_running(tmp_path: Path, monkeypatch):
    # The runner's heartbeats and other jobs are threads/event loop beside the settle pool.
    monkeypatch.setattr(verify, "OUTPUT_MATCH_TIMEOUT_S", 1.5)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (_verify_output(tmp_path, EVIL, EVIL_OUTPUT), done.set()),
                              daemon=True)
    worker.start()
    time.sleep(0.05)  # let the match start
    ticks, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 0.5:
        time.sleep(0.005)
        ticks += 1
    assert not done.is_set(), "the match should still be running"
    assert ticks >= 20, f"main thread got only {ticks} ticks in 0.5 s: the match holds the GIL"
    # It ends (its timeout stops it); how soon depends on the CPU it gets: two suites side by
    # side on 2 cores left it short of 10 s.
    worker.join(120)
    assert done.is_set()


@pytest.mark.parametrize(("pattern", "stdout", "ok"), [
    (r"total \d+ bytes", "x\ntotal 12 bytes\n", True),
    (r"^ok$", "first\nok\nlast", True),  # MULTILINE, as before
    (r"rows=\d+", "rows=none", False),
    (r"(?i)DONE", "done", True),
])
def test_ordinary_patterns_still_match(tmp_path: Path, pattern: str, stdout: str, ok: bool):
    check = _verify_output(tmp_path, pattern, stdout)
    assert check.ok is ok
    assert check.detail.startswith("stdout matches" if ok else "stdout does not match")


@pytest.mark.parametrize("pattern", [r"total \d+ bytes", r"(?P<n>\d+)", r"(?>a+)b", r"a++",
                                     r"(a)(?(1)b|c)", r"(?x) a b # c", r"\N{LATIN SMALL LETTER A}",
                                     r"(?<=ab)c", r"[]a]", r"(?s).", r"\Z", r"\u00e9"])
def test_patterns_re_accepts_still_validate(pattern: str):
    re.compile(pattern)  # the premise: the stdlib accepts it
    JobSpec(name="j", command="true", expect={"output": pattern})


@pytest.mark.parametrize("pattern", ["([a-z", "(", "a{2,1}", "\\"])
def test_invalid_patterns_are_still_rejected(tmp_path: Path, pattern: str):
    p = tmp_path / "bad.toml"
    p.write_text(f"name = \"j\"\ncommand = \"true\"\n[expect]\noutput = '{pattern}'\n")  # literal string
    res = load_file(p)
    [err] = res.errors
    assert err.field == "expect.output" and err.line == 4
    assert err.message.startswith("invalid regex:")


# -- 2. control characters in error text ------------------------------------------------------

def _unsafe(text: str) -> list[str]:
    return [ch for ch in text if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


def test_job_name_with_escape_sequence_is_escaped(tmp_path: Path):
    p = tmp_path / "esc.toml"
    p.write_text('name = "esc\\u001b]0;PWNED\\u0007X"\ncommand = "true"\n')
    [err] = load_file(p).errors
    text = str(err)
    assert not _unsafe(text), text
    assert "job 'esc\\x1b]0;PWNED\\x07X'" in text
    assert err.to_dict()["text"] == text


def test_unknown_fields_and_values_with_c1_bidi_and_del_are_escaped(tmp_path: Path):
    p = tmp_path / "mixed.toml"
    p.write_text('name = "j"\ncommand = "true"\n"x\\u202ey\\u009b\\u007f" = 1\n'
                 'schedule = "* * \\u2066 *"\n')
    errs = load_file(p).errors
    assert errs
    for err in errs:
        assert not _unsafe(str(err)), str(err)
    texts = "\n".join(map(str, errs))
    assert "field 'x\\u202ey\\x9b\\x7f'" in texts


def test_raw_control_byte_in_a_file_that_does_not_parse_is_escaped(tmp_path: Path):
    # TOML refuses raw control characters, so the name is guessed from the raw text.
    p = tmp_path / "raw.toml"
    p.write_bytes(b'name = "a\x1b[2Jb"\ncommand = = 1\n')
    [err] = load_file(p).errors
    assert not _unsafe(str(err)), str(err)
    assert "job 'a\\x1b[2Jb'" in str(err)


def test_file_name_with_control_characters_is_escaped(tmp_path: Path):
    p = tmp_path / "e\x1b]0;xvil.toml"
    p.write_text('name = "j"\n')
    [err] = load_file(p).errors
    assert err.file == str(p)  # the data stays exact; only the text is escaped
    assert not _unsafe(str(err)) and "e\\x1b]0;xvil.toml" in str(err)


# -- 3. UTF-8 BOM -----------------------------------------------------------------------------

def test_leading_bom_is_accepted_and_lines_stay_right(tmp_path: Path):
    p = tmp_path / "bom.toml"
    p.write_bytes(b'\xef\xbb\xbfname = "bom"\ncommand = "true"\ntimeout = "x"\n')
    [err] = load_file(p).errors
    assert err.line == 3 and err.field == "timeout", str(err)
    p.write_bytes(b'\xef\xbb\xbfname = "bom"\ncommand = "true"\n')
    res = load_file(p)
    assert not res.errors and "bom" in res.jobs


def test_bad_utf8_after_a_bom_reports_the_file_offset(tmp_path: Path):
    p = tmp_path / "bom.toml"
    p.write_bytes(b'\xef\xbb\xbfab\xff\n')
    [err] = load_file(p).errors
    assert "at byte 5" in err.message, err.message


# -- 4. odd unknown keys are named, with their line --------------------------------------------

def test_quoted_unknown_key_with_control_character_names_field_and_line(tmp_path: Path):
    p = tmp_path / "esckey.toml"
    p.write_text('[[job]]\nname = "okname2"\n"bad\\u0001key" = 1\ncommand = "true"\n')
    [err] = load_file(p).errors
    assert err.field == "bad\x01key" and err.line == 3, str(err)
    assert str(err) == f"{p}:3: job 'okname2': field 'bad\\x01key': unknown field (typo?)"


@pytest.mark.parametrize(("body", "field", "line"), [
    ('name = "j"\ncommand = "true"\nretry-on = [1]\n', "retry-on", 3),
    ('name = "j"\ncommand = "true"\n[backoff]\nfactor = 2.0\n\'lit-key\' = 1\n', "backoff.lit-key", 5),
    ('name = "j"\ncommand = "true"\nbackoff . "in[it]" = 1\n', "backoff.in[it]", 3),
])
def test_unknown_keys_with_hyphens_brackets_or_quotes_are_named(tmp_path: Path, body: str, field: str, line: int):
    p = tmp_path / "k.toml"
    p.write_text(body)
    [err] = load_file(p).errors
    assert (err.field, err.line) == (field, line), str(err)
