"""The sample pipeline mission (sample_jobs/missions) without an API key: the scripted
coordinator and the scripted agent-style workers, driven through the CLI as the demo does.
The happy path closes with the article; when the writer fails, the report is the raw
research, partial, with a note of what is missing, and the fact-checker still delivers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger import missions as ml
from core.ledger.connection import Ledger
from core.mission import actions as mactions
from tests.kit.fake_anthropic import FakeAnthropic, message, tool_names, tool_results, tool_use
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for

pytestmark = pytest.mark.slow
SAMPLES = Path(__file__).resolve().parents[2] / "sample_jobs"


def _folder(tmp: Path) -> Path:
    jobs = tmp / "jobs"
    jobs.mkdir()
    shutil.copy(SAMPLES / "missions.toml", jobs / "missions.toml")
    shutil.copytree(SAMPLES / "missions", jobs / "missions")
    return jobs


def _run(tmp: Path, goal: str | None, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int, CliRunner]:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    jobs = _folder(tmp)
    settings = fast_settings(tmp)
    cli_runner = CliRunner()
    with RunnerThread(jobs, settings):
        args = ["mission", "start", "--specs", str(jobs), "--name", "pipeline", "--ledger", str(settings.ledger)]
        res = cli_runner.invoke(cli, args + ([goal] if goal else []))
        assert res.exit_code == 0, res.output
        assert "scripted coordinator" in res.output
        mid = int(res.output.split()[1])
        wait_for(lambda: query(settings.ledger, "SELECT state FROM missions WHERE id = ?", (mid,))[0]["state"]
                 == "awaiting_approval", timeout=60)
    return settings.ledger, mid, cli_runner


def test_the_sample_pipeline_goes_from_goal_to_approved_report(tmp_path, monkeypatch) -> None:
    db, mid, runner = _run(tmp_path, None, monkeypatch)
    with Ledger(db) as led:
        m = ml.get(led.conn, mid)
        assert m["report_status"] == "success" and m["report"].startswith("Why the sea has two tides a day")
        assert [(w["worker"], w["state"]) for w in ml.workers_of(led.conn, mid)] == [
            ("mission-researcher", "delivered"), ("mission-writer", "delivered"), ("mission-fact-checker", "delivered")]
    shown = runner.invoke(cli, ["mission", "show", str(mid), "--ledger", str(db)])
    assert shown.exit_code == 0 and "awaiting_approval" in shown.output and "mission-fact-checker" in shown.output
    res = runner.invoke(cli, ["mission", "approve", str(mid), "--as", "ana", "--ledger", str(db), "--yes"])
    assert res.exit_code == 0 and "report approved by ana" in res.output
    again = runner.invoke(cli, ["mission", "approve", str(mid), "--as", "bob", "--ledger", str(db), "--yes"])
    assert again.exit_code == 1 and "closed" in again.output
    listed = runner.invoke(cli, ["mission", "list", "--json", "--ledger", str(db)])
    assert json.loads(listed.output.splitlines()[0])["state"] == "closed"


def test_the_writer_failing_gives_the_raw_research_as_partial(tmp_path, monkeypatch) -> None:
    db, mid, runner = _run(tmp_path, "Explain tides [writer fails]", monkeypatch)
    with Ledger(db) as led:
        m = ml.get(led.conn, mid)
        workers = {w["worker"]: w for w in ml.workers_of(led.conn, mid)}
    assert m["report_status"] == "partial"
    assert "Raw research" in m["report"] and "NOAA" in m["report"] and "Missing: mission-writer (failed" in m["report"]
    assert workers["mission-writer"]["state"] == "failed" and workers["mission-writer"]["error"] == "refusal"
    checker = workers["mission-fact-checker"]
    assert checker["state"] == "delivered" and checker["status"] == "partial"  # no draft: research only
    res = runner.invoke(cli, ["mission", "approve", str(mid), "--ledger", str(db), "--yes"])
    assert res.exit_code == 1 and "mission-writer" in res.output
    seq = workers["mission-writer"]["seq"]
    assert runner.invoke(cli, ["mission", "abandon-worker", str(mid), str(seq), "--ledger", str(db), "--yes"]).exit_code == 0
    assert runner.invoke(cli, ["mission", "approve", str(mid), "--ledger", str(db), "--yes"]).exit_code == 0
    assert runner.invoke(cli, ["mission", "show", "999", "--ledger", str(db)]).exit_code == 2


class SampleModel:
    """The fake Claude for the sample mission: the coordinator follows the pipeline, the
    three agent workers answer by their system prompts."""

    def __call__(self, body: dict) -> object:
        if "spawn_worker" in tool_names(body):
            done = [json.loads(r["content"]) for r in tool_results(body)]
            if not done:
                return message(tool_use("spawn_worker", {"worker": "mission-researcher", "task": "facts on tides"}))
            if len(done) == 1:
                return message(tool_use("spawn_worker", {"worker": "mission-writer", "task": "write",
                                                         "context": {"research": done[0]["result"]}}))
            if len(done) == 2:
                return message(tool_use("spawn_worker", {"worker": "mission-fact-checker", "task": "check", "context": {
                    "research": done[0]["result"], "draft": done[1]["result"]}}))
            return message(tool_use("report", {"text": f"{done[1]['result']}\n\nChecked: {done[2]['result']}",
                                               "status": "success"}), tool_use("close_mission"))
        system = body.get("system", "")
        role = "researcher" if "researcher" in system else "writer" if "writer" in system else "checker"
        result = {"researcher": "Moon and Sun pull two bulges", "writer": "ARTICLE: two bulges, two tides",
                  "checker": "2 claims supported"}[role]
        assert "Mission goal: Explain" in body["messages"][0]["content"]
        return message(tool_use("submit_result", {"status": "success", "result": result, "confidence": 0.9}))


def test_the_same_sample_mission_runs_with_claude(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    jobs = _folder(tmp_path)
    with FakeAnthropic() as fake:
        fake.handler = SampleModel()
        settings = fast_settings(tmp_path, judge={"base_url": fake.url, "enabled": False})
        with RunnerThread(jobs, settings):
            res = CliRunner().invoke(cli, ["mission", "start", "--specs", str(jobs), "--name", "pipeline",
                                           "--ledger", str(settings.ledger)])
            assert res.exit_code == 0 and "claude coordinator" in res.output, res.output
            mid = int(res.output.split()[1])
            wait_for(lambda: query(settings.ledger, "SELECT state FROM missions WHERE id = ?", (mid,))[0]["state"]
                     == "awaiting_approval", timeout=60)
    with Ledger(settings.ledger) as led:
        m = ml.get(led.conn, mid)
        assert m["report"].startswith("ARTICLE: two bulges") and m["turns"] == 4 and m["tokens"] == 4 * 130
        workers = ml.workers_of(led.conn, mid)
        assert [w["state"] for w in workers] == ["delivered"] * 3
        assert all(w["tokens"] == 130 and w["steps_used"] == 1 for w in workers)  # real agent processes
        assert mactions.approve(led, mid, "ana").ok
