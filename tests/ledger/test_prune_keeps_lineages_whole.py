"""Prune keeps or drops a lineage (a run and its retries) whole, so ``doctor`` is clean after
any prune: random ledgers, random limits (hypothesis), and the issue's case through the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli.main import cli
from core.ledger import invariants, retention
from core.ledger.connection import Ledger, add_event
from tests.kit.runs import add_run

DAY = 86400.0
NOW = 1_800_000_000.0
ENDED = ["succeeded", "failed", "timed_out", "orphaned", "abandoned", "blocked"]
UNENDED = ["queued", "running"]


def _run(c, *, job: str, lineage: str, attempt: int, state: str, at: float, parent: int | None = None,
         task: str = "") -> int:
    ended = state in ENDED
    return add_run(c, job, state, lineage=lineage, attempt=attempt, slot=f"slot-{lineage}", task=task,
                   trigger="schedule" if attempt == 1 else "retry", parent_run_id=parent, at=at,
                   ended_at=at if ended else None, outcome={} if ended else None)


# One lineage: its job, its attempts' states (only the last may be unfinished), its age in
# days, and the fan-out sub-tasks of its first attempt (each a list of attempt states).
attempts = st.tuples(st.lists(st.sampled_from(ENDED), max_size=2), st.sampled_from(ENDED + UNENDED)).map(
    lambda t: [*t[0], t[1]])
lineage_st = st.tuples(st.sampled_from(["backup", "report", "sync"]), attempts, st.floats(0, 200),
                       st.lists(st.lists(st.sampled_from(ENDED), min_size=1, max_size=2), max_size=2))
ledger_st = st.tuples(st.lists(lineage_st, min_size=1, max_size=25),
                      st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(["open", "resolved"]),
                                         st.booleans()), max_size=6))


def _fill(led: Ledger, lineages, escalations) -> list[int]:
    ids: list[int] = []

    def tx(c):
        for n, (job, states, age_days, subtasks) in enumerate(lineages):
            at = NOW - age_days * DAY
            for attempt, state in enumerate(states, start=1):
                rid = _run(c, job=job, lineage=f"L{n}", attempt=attempt, state=state, at=at + attempt)
                ids.append(rid)
                if attempt == 1 and state in ENDED:
                    for k, sub in enumerate(subtasks):
                        for sa, sstate in enumerate(sub, start=1):
                            ids.append(_run(c, job=job, lineage=f"L{n}.{k}", attempt=sa, state=sstate,
                                            at=at + attempt, parent=rid, task=f"t{k}"))
        for k, (pick, state, occurrence) in enumerate(escalations):
            run_id = ids[pick % len(ids)]
            job = c.execute("SELECT job FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
            cur = c.execute(
                "INSERT INTO escalations (dedup_key, job, kind, severity, state, first_seen, last_seen, latest_run_id,"
                " updated_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (f"{job}:k{k}", job, "failed", "critical", state, NOW, NOW, None if occurrence else run_id, NOW))
            if occurrence:  # cited only as an occurrence, through its audit event
                add_event(c, actor="test", kind="escalation_opened", run_id=run_id, job=job,
                          detail={"escalation_id": cur.lastrowid}, at=NOW)
    led.write(tx)
    return ids


def _lineages(led: Ledger) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in led.query("SELECT lineage, attempt FROM runs ORDER BY attempt"):
        out.setdefault(r[0], []).append(r[1])
    return out


# database=None: no .hypothesis folder in the checkout; a failure prints its example to rerun.
@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=ledger_st, max_age_days=st.one_of(st.none(), st.floats(0.001, 150)),
       keep=st.integers(0, 4), size_share=st.one_of(st.none(), st.floats(0.05, 1.5)))
def test_doctor_is_clean_after_any_prune(tmp_path_factory, data, max_age_days, keep, size_share):
    lineages, escalations = data
    with Ledger(tmp_path_factory.mktemp("p") / "wk.db") as led:
        _fill(led, lineages, escalations)
        assert invariants.check(led.conn) == []  # the generated ledger is a valid one
        before = _lineages(led)
        max_size = None if size_share is None else max(1, int(retention.total_size(led, None) * size_share))
        if max_age_days is None and max_size is None:
            max_age_days = 1.0
        retention.prune(led, max_age=None if max_age_days is None else max_age_days * DAY, max_size=max_size,
                        keep_per_job=keep, artifacts_dir=None, now=NOW, vacuum=False)
        assert [str(v) for v in invariants.check(led.conn)] == []
        after = _lineages(led)
        assert all(after[k] == before[k] for k in after)  # every lineage left is whole
        cited = led.query("SELECT latest_run_id FROM escalations WHERE state != 'resolved'"
                          " AND latest_run_id IS NOT NULL")
        assert all(led.one("SELECT 1 FROM runs WHERE id = ?", (r[0],)) for r in cited)


def _exec(args: list[str]) -> None:
    res = CliRunner().invoke(cli, ["exec", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output


def test_prune_then_doctor_through_the_cli(tmp_path: Path):
    # The trial's case: a retried job whose attempt 2 an open escalation cites, aged past
    # --max-age 1m: prune must keep attempt 1 with it, and doctor must then be clean.
    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "jobs.toml").write_text(
        '[[job]]\nname = "flaky"\ncommand = "exit 3"\nevery = "1h"\nmax_attempts = 2\n'
        'backoff = { initial = "0.1s", jitter = false }\n\n'
        '[[job]]\nname = "fine"\ncommand = "true"\nevery = "1h"\n')
    db = tmp_path / "wk.db"
    _exec(["--job", "fine", "--jobs", str(specs), "--ledger", str(db)])
    _exec(["--job", "flaky", "--jobs", str(specs), "--ledger", str(db)])
    _exec(["--job", "fine", "--jobs", str(specs), "--ledger", str(db)])  # holds the highest run id
    with Ledger(db) as led:
        assert _lineages(led)  # ran
        flaky = led.query("SELECT id, attempt FROM runs WHERE job = 'flaky' ORDER BY attempt")
        assert [r[1] for r in flaky] == [1, 2]
        assert led.one("SELECT latest_run_id FROM escalations WHERE state = 'open'")[0] == flaky[1][0]
        hour = time.time() - 3600  # every run ended an hour ago
        led.write(lambda c: c.execute("UPDATE runs SET created_at = created_at - 3600, ended_at = ended_at - 3600"
                                      " WHERE ended_at IS NOT NULL AND ended_at > ?", (hour,)))
    res = CliRunner().invoke(cli, ["prune", "--ledger", str(db), "--max-age", "1m", "--keep-per-job", "0",
                                   "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["runs"] == 1 and rep["kept_cited"] == 1 and rep["kept_lineage"] == 1 and rep["kept_pinned"] == 1
    res = CliRunner().invoke(cli, ["doctor", "--ledger", str(db)])
    assert res.exit_code == 0, res.output
    with Ledger(db, read_only=True) as led:
        assert [r[0] for r in led.query("SELECT attempt FROM runs WHERE job = 'flaky' ORDER BY attempt")] == [1, 2]
