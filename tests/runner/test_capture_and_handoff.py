"""Bounded output capture and hostile handoffs are contained and recorded, never crash."""

from __future__ import annotations

import json
import os

import pytest

from core.runner.capture import Capture
from core.runner.handoff import read_handoff


def test_capture_keeps_everything_under_cap(tmp_path):
    c = Capture(tmp_path / "out.log", cap=8192)
    for _ in range(10):
        c.feed(b"x" * 500)
    c.close()
    assert (tmp_path / "out.log").read_bytes() == b"x" * 5000
    assert not c.truncated and c.total == 5000


def test_capture_keeps_head_and_tail_and_marks_the_cut(tmp_path):
    c = Capture(tmp_path / "out.log", cap=8192)
    c.feed(b"HEAD" + b"a" * 10000)
    for _ in range(1000):
        c.feed(b"b" * 100)
    c.feed(b"TAIL")
    c.close()
    data = (tmp_path / "out.log").read_bytes()
    assert data.startswith(b"HEAD") and data.endswith(b"TAIL")
    assert b"[watchkeeper: " in data and b" bytes omitted]" in data
    assert len(data) < 8192 + 100
    assert c.truncated and c.total == 4 + 10000 + 100000 + 4


def test_capture_degrades_when_file_cannot_be_written(tmp_path):
    c = Capture(tmp_path / "missing-dir" / "out.log", cap=8192)
    c.feed(b"hello")
    c.close()
    assert c.write_error and c.total == 5


def _write(tmp_path, data: bytes | str):
    p = tmp_path / "handoff.json"
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


def test_valid_handoff(tmp_path):
    p = _write(tmp_path, json.dumps({"status": "success", "confidence": 0.9, "files_changed": ["a"],
                                     "commands": [{"cmd": "ls", "exit_code": 0}], "custom": 1}))
    r = read_handoff(p)
    assert r.findings == [] and r.data["status"] == "success" and r.data["custom"] == 1
    assert r.raw.startswith("{")


HOSTILE = {
    "invalid_json": (b"{not json", "invalid_json"),
    "truncated_json": (b'{"status": "succ', "invalid_json"),
    "empty": (b"", "empty"),
    "whitespace": (b"   \n", "empty"),
    "nul_bytes": (b'{"status": "success"\x00}', "nul_bytes"),
    "invalid_utf8": (b'{"status": "\xff\xfe"}', "invalid_utf8"),
    "array": (b"[1, 2, 3]", "schema"),
    "string": (b'"success"', "schema"),
    "wrong_status": (b'{"status": "great"}', "schema"),
    "confidence_range": (b'{"status": "success", "confidence": 7}', "schema"),
    "wrong_types": (b'{"status": "success", "files_changed": "a.txt", "steps_used": "many"}', "schema"),
    "missing_status": (b'{"result": 1}', "schema"),
    "deeply_nested": (b'{"status": "success", "result": ' + b"[" * 5000 + b"]" * 5000 + b"}", "too_deep"),
    "nested_100": (b'{"status": "success", "result": ' + b"[" * 100 + b"]" * 100 + b"}", "too_deep"),
    "negative_steps": (b'{"status": "success", "steps_used": -3}', "schema"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_handoff_is_a_finding(tmp_path, case):
    data, code = HOSTILE[case]
    r = read_handoff(_write(tmp_path, data))
    assert r.data is None
    assert code in [f["code"] for f in r.findings], r.findings


def test_oversized_handoff_keeps_a_bounded_prefix(tmp_path):
    p = tmp_path / "handoff.json"
    with open(p, "wb") as fh:
        fh.write(b'{"status": "success", "notes": "')
        fh.truncate(50 * 1024 * 1024)
    r = read_handoff(p, max_bytes=1024 * 1024)
    assert [f["code"] for f in r.findings] == ["oversized"]
    assert r.data is None and len(r.raw) <= 64 * 1024


def test_missing_handoff(tmp_path):
    r = read_handoff(tmp_path / "nope.json")
    assert [f["code"] for f in r.findings] == ["missing"] and r.raw is None


def test_symlink_handoff_not_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text('{"status": "success"}')
    link = tmp_path / "handoff.json"
    os.symlink(secret, link)
    r = read_handoff(link)
    assert [f["code"] for f in r.findings] == ["symlink"] and r.data is None


def test_fifo_handoff_does_not_block(tmp_path):
    p = tmp_path / "handoff.json"
    os.mkfifo(p)
    r = read_handoff(p)
    assert [f["code"] for f in r.findings] == ["not_a_file"]


def test_directory_handoff(tmp_path):
    p = tmp_path / "handoff.json"
    p.mkdir()
    r = read_handoff(p)
    assert r.findings and r.data is None
