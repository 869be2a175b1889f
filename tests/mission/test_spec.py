"""Agent job specs and mission definitions: validation with file, line and field, and the
defaults that make an agent's rate limits transient and its refusals final."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from console.cli.main import cli
from core.spec.loader import load_file
from core.spec.mission import load_mission_file
from core.spec.model import AGENT_EXIT_PERMANENT


def test_an_agent_job_retries_transient_failures_but_not_refusals(tmp_path: Path) -> None:
    f = tmp_path / "a.toml"
    f.write_text('name = "a"\nkind = "agent"\n[agent]\nsystem = "s"\n')
    spec = load_file(f).jobs["a"].spec
    assert spec.max_attempts == 3 and spec.no_retry_on == [AGENT_EXIT_PERMANENT] and spec.max_steps == 10
    assert spec.agent.tools == [] and spec.command is None


def test_agent_spec_errors_name_the_field_and_line(tmp_path: Path) -> None:
    f = tmp_path / "a.toml"
    f.write_text('name = "a"\nkind = "agent"\n')
    (err,) = load_file(f).errors
    assert err.field == "agent" and "needs an [agent] table" in err.message
    f.write_text('name = "a"\nkind = "agent"\n[agent]\ntools = ["run_command", "format_disk"]\n')
    errs = load_file(f).errors
    assert any(e.line == 4 and "tools" in (e.field or "") for e in errs)
    f.write_text('name = "a"\nkind = "agent"\n[agent]\ntools = ["run_command"]\n')
    (err,) = load_file(f).errors
    assert err.field == "agent.allow_commands" and "at least one allowed program" in err.message
    f.write_text('name = "a"\ncommand = "true"\n[agent]\nsystem = "s"\n')
    (err,) = load_file(f).errors
    assert err.field == "agent" and 'needs kind = "agent"' in err.message


def test_mission_file_errors_say_mission_file_line_and_field(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text('name = "m"\ncoordinator = "scripted"\nworkers = ["w"]\n[budget]\nturns = 0\n')
    errs = load_mission_file(f).errors
    texts = [str(e) for e in errs]
    assert any(":5: mission 'm': field 'budget.turns'" in t for t in texts), texts
    f.write_text('name = "m"\ncoordinator = "scripted"\nworkers = ["w"]\n')
    (err,) = load_mission_file(f).errors
    assert err.field == "command" and "needs 'command'" in err.message


def test_check_reports_a_mission_naming_an_unknown_worker(tmp_path: Path) -> None:
    (tmp_path / "missions").mkdir()
    (tmp_path / "j.toml").write_text('name = "writer"\ncommand = ["true"]\n')
    (tmp_path / "missions" / "m.toml").write_text('name = "m"\ncoordinator = "claude"\nworkers = ["writer", "ghost"]\n')
    res = CliRunner().invoke(cli, ["check", str(tmp_path)])
    assert res.exit_code == 1
    assert "mission 'm': field 'workers': no job named 'ghost'" in res.output
