"""A handoff with numbers standard JSON cannot hold (1e999, NaN, Infinity) is invalid JSON.

Python's ``json`` accepts them and turns them into float inf/nan, which ``json.dumps`` then
writes back as ``Infinity``/``NaN``: SQLite's JSON functions call that malformed and strict
parsers of ``watchkeeper show --json`` refuse it. Such a handoff must be an ``invalid_json``
finding with the raw text kept verbatim, and the validated handoff must always dump strictly.
"""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.runner.executor import budget_findings
from core.runner.handoff import read_handoff
from core.spec.model import JobSpec
from tests.kit.harness import RunnerThread, fast_settings, query, terminal_runs, wait_for, write_specs

PY = sys.executable


def _read(tmp_path, text: str):
    p = tmp_path / "handoff.json"
    p.write_bytes(text.encode())
    return read_handoff(p)


def _strict(obj) -> str:
    return json.dumps(obj, allow_nan=False)


NON_FINITE = {
    "overflow": '{"status": "success", "cost": 1e999}',
    "negative_overflow": '{"status": "failed", "cost": -1E+400}',
    "nan_literal": '{"status": "success", "confidence": NaN}',
    "infinity_literal": '{"status": "success", "cost": Infinity}',
    "minus_infinity_literal": '{"status": "success", "cost": -Infinity}',
    "nested_in_result": '{"status": "success", "result": {"scores": [1, 2.5, NaN]}}',
    "extra_key": '{"status": "success", "mine": {"big": 1.0e309}}',
    "top_level_number": "1e999",
}


@pytest.mark.parametrize("text", NON_FINITE.values(), ids=NON_FINITE.keys())
def test_non_finite_numbers_are_invalid_json(tmp_path, text):
    r = _read(tmp_path, text)
    assert r.present and r.data is None
    assert r.raw == text  # stored verbatim, as evidence
    assert [f["code"] for f in r.findings] == ["invalid_json"], r.findings
    msg = r.findings[0]["message"]
    assert msg.startswith("handoff is not valid JSON: ")
    assert "finite" in msg or "NaN and Infinity are not JSON" in msg
    _strict(r.findings)


def test_finding_names_the_offending_number(tmp_path):
    assert "1e999" in _read(tmp_path, '{"status": "success", "cost": 1e999}').findings[0]["message"]
    assert "-Infinity" in _read(tmp_path, '{"status": "success", "cost": -Infinity}').findings[0]["message"]


@pytest.mark.parametrize("field,value", [("cost", "inf"), ("cost", "Infinity"), ("cost", "1e999"),
                                         ("confidence", "nan"), ("confidence", "-inf")])
def test_non_finite_strings_in_numeric_fields_are_refused(tmp_path, field, value):
    # pydantic would coerce "inf" to float inf in a float field; the handoff refuses it.
    r = _read(tmp_path, json.dumps({"status": "success", field: value}))
    assert r.data is None
    assert any(f["code"] == "schema" and f"'{field}'" in f["message"] for f in r.findings), r.findings


def test_legit_numbers_still_parse_and_dump_strictly(tmp_path):
    text = ('{"status": "success", "cost": 1.5e300, "confidence": 0.25, "tokens": 123456789012345678901234567890,'
            ' "steps_used": 3, "result": {"tiny": 1e-999, "neg": -2.5E-3, "int": -7}}')
    r = _read(tmp_path, text)
    assert r.findings == [] and r.data is not None
    assert r.data["cost"] == 1.5e300 and r.data["confidence"] == 0.25
    assert r.data["result"] == {"tiny": 0.0, "neg": -0.0025, "int": -7}
    dumped = _strict(r.data)
    with sqlite3.connect(":memory:") as conn:
        assert conn.execute("SELECT json_valid(?)", (dumped,)).fetchone()[0] == 1


def test_budget_checks_still_work_for_legit_numbers(tmp_path):
    spec = JobSpec.model_validate({"name": "b", "command": ["true"], "max_steps": 7,
                                   "budget": {"cost": 1.0, "tokens": 100}})
    over = _read(tmp_path, '{"status": "success", "cost": 3.5, "tokens": 1000, "steps_used": 12}').data
    msgs = [f["message"] for f in budget_findings(spec, over)]
    assert any("cost=3.5 exceeds budget.cost=1" in m for m in msgs)
    assert any("tokens=1000 exceeds budget.tokens=100" in m for m in msgs)
    assert any("steps_used=12 exceeds max_steps=7" in m for m in msgs)
    under = _read(tmp_path, '{"status": "success", "cost": 0.5, "tokens": 10, "steps_used": 2}').data
    assert budget_findings(spec, under) == []
    # A non-finite cost never reaches the budget check as inf: there is no validated handoff.
    assert budget_findings(spec, _read(tmp_path, '{"status": "success", "cost": 1e999}').data) == []


def test_runner_stores_raw_and_show_json_is_strict(tmp_path):
    raw = '{"status": "success", "cost": 1e999, "notes": "n"}'
    worker = tmp_path / "worker.py"
    worker.write_text(f"import os\nopen(os.environ['WATCHKEEPER_HANDOFF'], 'w').write({raw!r})\n")
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "inf-cost"
command = ["{PY}", "{worker}"]
once = true
[budget]
cost = 1.0
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: terminal_runs(s.ledger, "inf-cost"), timeout=30)
    run_id = terminal_runs(s.ledger, "inf-cost")[0]["id"]
    o = query(s.ledger, "SELECT handoff, handoff_raw, handoff_findings, json_valid(handoff_findings) AS ok "
                        "FROM job_outcomes WHERE run_id = ?", (run_id,))[0]
    assert o["handoff"] is None and o["handoff_raw"] == raw and o["ok"] == 1
    assert "invalid_json" in [f["code"] for f in json.loads(o["handoff_findings"])]
    res = CliRunner().invoke(cli, ["show", str(run_id), "--ledger", str(s.ledger), "--json"])
    assert res.exit_code == 0, res.output

    def refuse(name: str):
        raise AssertionError(f"show --json emitted non-standard {name}")
    doc = json.loads(res.output, parse_constant=refuse)
    assert doc["outcome"]["handoff_raw"] == raw
