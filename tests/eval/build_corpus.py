"""Build ``tests/eval/corpus.jsonl``: labelled raw-evidence cases for ``watchkeeper eval``.

Each case is what the ledger would hold — the job's spec, its prior outcomes with their output,
handoff and measured files, and the outcome itself — never pre-digested facts. The scenarios
are written from failure patterns in public incident reports and postmortems (each case
carries its ``source``), not from the judge's rules: a job's routine output is written first,
then the incident is injected into it the way the report describes, and the label says what an
on-call person would have wanted (page, look later, or nothing).

Sources paraphrased (public write-ups):
  GitLab database outage 2017-01-31 (backups silently tiny: pg_dump version mismatch, empty
  S3 bucket, nobody noticed); AWS S3 us-east-1 2017-02-28 (a command removed more capacity
  than intended; slow recoveries); Cloudflare 2019-07-02 (regex CPU exhaustion); Let's
  Encrypt DST Root CA X3 expiry 2021-09-30; Dyn DNS DDoS 2016-10-21; Knight Capital 2012
  (a dormant code path ran: counts far off normal); Atlassian 2022 outage (a script deleted
  the wrong, much larger set); Slack 2021-01-04 (cold caches, timeouts); Heroku/Travis CI
  credential rotations (401s after a token leak response); GitHub 2018-10-21 (replication
  lag: partial data served under success); Google Calendar / Gmail quota and 429 incidents;
  the Tarsnap 2023 outage (a filesystem filled: ENOSPC); Facebook 2021-10-04 (a tool reported
  success on a check that did not run); many "cron job that silently did nothing for months"
  write-ups (empty exports after an upstream API change returned 200 with no rows; pagination
  stopping at page one; a report rendered to a 0-byte file; fan-outs whose children failed
  while the parent said done).

Run ``python -m tests.eval.build_corpus`` to regenerate (deterministic: fixed seed).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("corpus.jsonl")
SEED = 20260101

Rec = dict[str, Any]


def rec(stdout: str = "", stderr: str = "", *, state: str = "succeeded", status: str = "success",
        exit_code: int | None = 0, signal: int | None = None, duration: float = 1.0, reason: str | None = None,
        handoff: dict[str, Any] | None = None, files: list[tuple[str, str, int | None]] | None = None,
        checks: list[dict[str, Any]] | None = None, **run: Any) -> Rec:
    """One ``job_outcomes``-shaped record. ``files``: ``(role, path, size or None)`` measured by
    verification; ``checks``: further verification checks."""
    all_checks = [{"name": role, "ok": size is not None, "path": path, "size": size,
                   **({} if size is not None else {"detail": f"{path}: does not exist"})}
                  for role, path, size in (files or [])]
    all_checks += checks or []
    ok = all(c["ok"] or c.get("soft") for c in all_checks)
    r: Rec = {"state": state, "status": status, "exit_code": exit_code, "signal": signal, "duration_s": duration,
              "reason": reason, "stdout_head": stdout[:4000], "stdout_tail": stdout[-4000:] if len(stdout) > 4000 else None,
              "stderr_tail": stderr[-4000:], "handoff": handoff,
              "verification": {"ok": ok, "checks": all_checks, "failed": [c["name"] for c in all_checks if not c["ok"]
                                                                         and not c.get("soft")]}}
    r.update(run)
    if r.get("duration_s") is not None:
        r["duration_s"] = round(r["duration_s"], 1)
    return {k: v for k, v in r.items() if k == "exit_code" or (v is not None and v != "")}


def ts(rng: random.Random, day: int) -> str:
    return f"2026-03-{1 + day % 28:02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"


# -- job archetypes: how a healthy run of each looks ----------------------------------------------

@dataclass
class Job:
    """A job: its spec, and ``run(rng, day) -> record`` for one healthy run."""

    name: str
    spec: dict[str, Any]
    run: Callable[[random.Random, int], Rec]
    artifact: str | None = None       # the file its output depends on (for file incidents)
    count_line: str | None = None     # template of its work-count line, "{n}" for the count
    base_n: int = 0
    base_dur: float = 10.0


def _db_export(rng: random.Random, day: int, n: int | None = None, size: int | None = None, extra: str = "",
               dur: float | None = None) -> Rec:
    n = rng.randint(12_000, 19_000) if n is None else n
    out = (f"{ts(rng, day)} connecting to postgres://replica-{rng.randint(1, 3)}.db.internal:5432/prod\n"
           f"{ts(rng, day)} exported {n} rows to /srv/exports/orders-2026-03-{1 + day % 28:02d}.csv\n{extra}"
           f"{ts(rng, day)} uploaded to s3://acme-exports/orders/ in {rng.uniform(1, 4):.1f}s\n")
    return rec(out, duration=dur or rng.uniform(40, 55),
               files=[("expect_file", "exports/orders.csv", size if size is not None else n * 84 + rng.randint(0, 900))])


def _pg_backup(rng: random.Random, day: int, size: int | None = None, extra: str = "", stderr: str = "",
               dur: float | None = None) -> Rec:
    size = rng.randint(2_050_000_000, 2_200_000_000) if size is None else size
    out = (f"{ts(rng, day)} starting pg_dump of database prod (format custom)\n{extra}"
           f"{ts(rng, day)} dump written: /backups/prod-{day}.dump\n"
           f"{ts(rng, day)} uploaded backup to s3://acme-backups/prod/ (storage class STANDARD_IA)\n")
    return rec(out, stderr, duration=dur or rng.uniform(600, 700), files=[("expect_file", "backups/prod.dump", size)])


def _cleanup(rng: random.Random, day: int, k: int | None = None) -> Rec:
    k = rng.choice([0, 0, rng.randint(1, 60)]) if k is None else k
    return rec(f"scanning /var/log/app for files older than 14 days\nremoved {k} files, freed {k * 12} MB\n",
               duration=rng.uniform(0.5, 2.0))


def _digest(rng: random.Random, day: int, n: int | None = None, bounced: int | None = None, extra: str = "") -> Rec:
    n = rng.randint(1_100, 1_350) if n is None else n
    b = rng.randint(0, 14) if bounced is None else bounced
    out = (f"building daily digest for {n} subscribers\n{extra}queued {n} digests via smtp-relay-{rng.randint(1, 2)}\n"
           f"sent {n - b} emails, {b} bounced\n")
    return rec(out, duration=rng.uniform(80, 110))


def _sitemap(rng: random.Random, day: int, urls: int | None = None, size: int | None = None, extra: str = "") -> Rec:
    urls = rng.randint(5_200, 5_600) if urls is None else urls
    out = f"crawling https://www.acme.example/ (depth 6)\n{extra}crawled {urls} urls, 0 errors\nwrote sitemap.xml\n"
    return rec(out, duration=rng.uniform(25, 35),
               files=[("artifact", "public/sitemap.xml", size if size is not None else urls * 34 + rng.randint(0, 400))])


def _etl_sync(rng: random.Random, day: int, total: int | None = None, pages: int | None = None, extra: str = "") -> Rec:
    pages = rng.randint(38, 44) if pages is None else pages
    per = [100] * (pages - 1) + [rng.randint(1, 99)]
    total = sum(per) if total is None else total
    head = "".join(f"fetched page {i + 1} ({per[i]} records)\n" for i in range(min(pages, 3)))
    out = f"GET https://api.crm.example/v2/contacts?updated_since=2026-03-{1 + day % 28:02d}\n{head}...\n{extra}" \
          f"synced {total} records to warehouse.contacts\n"
    return rec(out, duration=rng.uniform(50, 70))


def _agent_triage(rng: random.Random, day: int, n: int | None = None, conf: float | None = None,
                  result: dict[str, Any] | None = None, size: int | None = None, notes: str | None = None) -> Rec:
    n = rng.randint(14, 40) if n is None else n
    conf = round(rng.uniform(0.78, 0.96), 2) if conf is None else conf
    handoff = {"status": "success", "confidence": conf, "steps_used": rng.randint(8, 20),
               "result": result if result is not None else {"triaged": n, "labelled": n, "needs_human": rng.randint(0, 3)},
               "files_changed": ["triage/report.md"], "notes": notes or f"triaged {n} new issues"}
    return rec(f"triage agent: {n} new issues since last run\ntriaged {n} issues, report in triage/report.md\n",
               duration=rng.uniform(90, 160), handoff=handoff,
               files=[("file_changed", "triage/report.md", size if size is not None else 600 + n * 95)])


def _fanout(rng: random.Random, day: int, failed: int = 0, children: int = 8, extra_result: dict[str, Any] | None = None,
            notes: str | None = None, status: str = "success") -> Rec:
    result = {"children": children, "succeeded": children - failed, "failed": failed,
              "summary": "market scan synthesized", **(extra_result or {})}
    handoff = {"status": status, "result": result, "confidence": 0.9, "notes": notes or "all sources covered"}
    out = "".join(f"child {i + 1}/{children} {'ok' if i >= failed else 'done'}\n" for i in range(children))
    return rec(out + "synthesis written to research/summary.md\n", duration=rng.uniform(200, 260), handoff=handoff,
               files=[("artifact", "research/summary.md", rng.randint(9_000, 14_000))])


def _report_pdf(rng: random.Random, day: int, size: int | None = None, pages: int | None = None, extra: str = "") -> Rec:
    pages = rng.randint(11, 14) if pages is None else pages
    out = f"rendering weekly KPI report for week {1 + day % 52}\n{extra}rendered {pages} pages\nwrote out/report.pdf\n"
    return rec(out, duration=rng.uniform(12, 18),
               files=[("artifact", "out/report.pdf", size if size is not None else rng.randint(340_000, 420_000))])


def _reindex(rng: random.Random, day: int, n: int | None = None, extra: str = "", dur: float | None = None) -> Rec:
    n = rng.randint(480_000, 520_000) if n is None else n
    out = f"opening index products_v7\n{extra}indexed {n} documents in {rng.uniform(200, 260):.1f}s\nswapped alias products -> products_v7\n"
    return rec(out, duration=dur or rng.uniform(220, 280))


def _invoices(rng: random.Random, day: int, n: int | None = None, extra: str = "") -> Rec:
    n = rng.randint(300, 420) if n is None else n
    out = (f"billing run for 2026-03-{1 + day % 28:02d}\n{extra}generated {n} invoices\n"
           f"total amount {rng.randint(20_000, 40_000)}.{rng.randint(10, 99)} EUR\n")
    return rec(out, duration=rng.uniform(30, 45))


def _cert_renew(rng: random.Random, day: int) -> Rec:
    if rng.random() < 0.2:
        out = ("Processing /etc/letsencrypt/renewal/acme.example.conf\nRenewing an existing certificate for acme.example\n"
               "Congratulations, all renewals succeeded\n")
    else:
        out = ("Processing /etc/letsencrypt/renewal/acme.example.conf\nCertificate not yet due for renewal\n"
               "No renewals were attempted.\n")
    return rec(out, duration=rng.uniform(2, 5))


def _rollup(rng: random.Random, day: int, n: int | None = None, extra: str = "") -> Rec:
    n = rng.randint(9_000, 9_400) if n is None else n
    return rec(f"{extra}rolled up {n} series for hour {rng.randint(0, 23):02d}:00\n", duration=rng.uniform(5, 9))


JOBS: dict[str, Job] = {
    "db-export": Job("db-export", {"intent": "export yesterday's orders to S3 for finance",
                                   "expect": {"files": ["exports/orders.csv"]}}, _db_export, "exports/orders.csv"),
    "pg-backup": Job("pg-backup", {"intent": "nightly restorable dump of the prod database",
                                   "expect": {"files": ["backups/prod.dump"]}}, _pg_backup, "backups/prod.dump"),
    "log-cleanup": Job("log-cleanup", {"intent": "delete application logs older than 14 days"}, _cleanup),
    "email-digest": Job("email-digest", {"intent": "send the daily digest to every subscriber"}, _digest),
    "sitemap": Job("sitemap", {"intent": "rebuild the public sitemap"}, _sitemap, "public/sitemap.xml"),
    "crm-sync": Job("crm-sync", {"intent": "sync CRM contacts changed since yesterday into the warehouse"}, _etl_sync),
    "agent-triage": Job("agent-triage", {"intent": "label every new GitHub issue and write a triage report",
                                         "confidence_threshold": 0.6}, _agent_triage, "triage/report.md"),
    "market-scan": Job("market-scan", {"intent": "research 8 competitor sources and synthesize one summary",
                                       "kind": "fanout", "tasks": [{"name": f"s{i}", "command": "true"}
                                                                  for i in range(8)]}, _fanout),
    "kpi-report": Job("kpi-report", {"intent": "render the weekly KPI report PDF for the leadership mail"},
                      _report_pdf, "out/report.pdf"),
    "search-reindex": Job("search-reindex", {"intent": "rebuild the product search index"}, _reindex),
    "billing": Job("billing", {"intent": "generate today's invoices"}, _invoices),
    "cert-renew": Job("cert-renew", {"intent": "renew TLS certificates before they expire"}, _cert_renew),
    "metrics-rollup": Job("metrics-rollup", {"intent": "roll up raw metrics into hourly series"}, _rollup),
}


def history(rng: random.Random, job: Job, n: int, *, warn_every: int = 0, warn_line: str = "") -> list[Rec]:
    out = []
    for day in range(n):
        r = job.run(rng, day)
        if warn_every and day % warn_every == 0 and warn_line:
            r["stdout_head"] = warn_line + "\n" + r["stdout_head"]
        out.append(r)
    return out


CASES: list[dict[str, Any]] = []


def add(cid: str, cls: str, source: str, job: Job, hist: list[Rec], case: Rec, kind: str | None,
        escalate: bool, spec: dict[str, Any] | None = None) -> None:
    CASES.append({"id": cid, "class": cls, "source": source, "spec": {"name": job.name, **(spec or job.spec)},
                  "history": hist, "case": case, "expect": {"escalate": escalate, "kind": kind}})


# -- hard: a person must look now -----------------------------------------------------------------

FAILURES = [
    ("pg-backup", 1, "pg_dump: error: server version: 16.2; pg_dump version: 15.6\npg_dump: error: aborting because of server version mismatch",
     "GitLab 2017: pg_dump version mismatch"),
    ("db-export", 1, "psycopg.OperationalError: connection to server at \"replica-2.db.internal\" failed: FATAL:  password authentication failed for user \"exporter\"",
     "credential rotation after a token leak: 401/auth failures"),
    ("sitemap", 60, "curl: (60) SSL certificate problem: certificate has expired",
     "Let's Encrypt DST Root CA X3 expiry 2021"),
    ("crm-sync", 6, "curl: (6) Could not resolve host: api.crm.example",
     "Dyn DNS outage 2016"),
    ("log-cleanup", 1, "rm: cannot remove '/var/log/app/app-2026-02-01.log': Permission denied",
     "permission change after a host rebuild"),
    ("kpi-report", 1, "Traceback (most recent call last):\n  File \"render.py\", line 4, in <module>\nModuleNotFoundError: No module named 'weasyprint'",
     "deploy removed a dependency"),
    ("pg-backup", 1, "pg_dump: error: could not write to output file: No space left on device",
     "Tarsnap 2023 / ENOSPC on the backup volume"),
    ("billing", 2, "ERROR: duplicate key value violates unique constraint \"invoices_number_key\"",
     "idempotency bug on re-run"),
    ("email-digest", 1, "smtplib.SMTPDataError: (554, b'5.7.1 Message rejected: sending quota exceeded')",
     "provider quota exceeded"),
    ("search-reindex", 1, "elasticsearch.exceptions.TransportError: 429 circuit_breaking_exception [parent] Data too large",
     "memory pressure on the search cluster"),
    ("metrics-rollup", 1, "sqlite3.OperationalError: database is locked", "lock contention"),
    ("crm-sync", 22, "curl: (22) The requested URL returned error: 401 Unauthorized", "API token revoked"),
]


def build_hard(rng: random.Random) -> None:
    i = 0
    for rep in range(4):
        for name, code, err, source in FAILURES:
            job = JOBS[name]
            hist = history(rng, job, rng.randint(3, 20))
            i += 1
            base = job.run(rng, 30)
            case = rec(base["stdout_head"].splitlines()[0] + "\n" if rep % 2 else "", err, state="failed",
                       status="failed", exit_code=code, duration=rng.uniform(0.5, 20), reason="exit_code")
            add(f"hard-{i:03d}", "hard", source, job, hist, case, "failed", True)
    # killed by the kernel OOM killer (SIGKILL) or SIGSEGV
    for sig, what in ((9, "OOM killer (Slack 2021 cold caches)"), (11, "segfault in a native extension"),
                      (9, "container memory limit"), (6, "abort in libc after heap corruption")):
        for name in ("search-reindex", "pg-backup", "market-scan"):
            job = JOBS[name]
            i += 1
            case = rec("starting\n", "", state="failed", status="failed", exit_code=None, signal=sig,
                       duration=rng.uniform(30, 300), reason="signal")
            add(f"hard-{i:03d}", "hard", what, job, history(rng, job, rng.randint(0, 15)), case, "failed", True)
    # timed out: hung on a lock, on a dead peer, on a regex
    for src, out in (("AWS S3 2017: requests hung on the unavailable region", "uploading part 14/40 to s3://acme-backups\n"),
                     ("Cloudflare 2019: a regex pinned the CPU", "matching 4102 rules against request log\n"),
                     ("waiting on a lock held by a stuck migration", "LOCK TABLE orders IN ACCESS EXCLUSIVE MODE\n"),
                     ("NFS server went away", "")):
        for name in ("pg-backup", "db-export", "sitemap"):
            job = JOBS[name]
            i += 1
            case = rec(out, state="timed_out", status="timed_out", exit_code=None, signal=15, duration=3600,
                       reason="timeout")
            add(f"hard-{i:03d}", "hard", src, job, history(rng, job, rng.randint(2, 15)), case, "timed_out", True)
    # orphaned: host rebooted, runner SIGKILLed
    for src in ("host kernel panic and reboot", "runner SIGKILLed by a deploy script", "VM preempted"):
        for name in ("agent-triage", "crm-sync"):
            job = JOBS[name]
            i += 1
            case = rec("", state="orphaned", status="orphaned", exit_code=None, duration=None, reason="pid_gone")
            add(f"hard-{i:03d}", "hard", src, job, history(rng, job, rng.randint(2, 12)), case, "orphaned", True)
    # verification failed: exit 0 but the restore test / checksum fails (GitLab: backups never tested)
    for src, detail in (("GitLab 2017: backups that could not be restored", "pg_restore --list backups/prod.dump: exit 1: pg_restore: error: input file is too short"),
                        ("checksum of the upload does not match", "sha256sum -c exports/orders.csv.sha256: exit 1: FAILED"),
                        ("Facebook 2021: a check reported success without running", "scripts/check_alias.sh: exit 2: alias products points at products_v6")):
        for name in ("pg-backup", "db-export", "search-reindex"):
            job = JOBS[name]
            i += 1
            base = job.run(rng, 40)
            case = {**base, "state": "failed", "status": "failed", "reason": "verification_failed",
                    "verification": {"ok": False, "checks": base["verification"]["checks"] + [
                        {"name": "verify_command", "ok": False, "detail": detail, "soft": False}],
                        "failed": ["verify_command"]}}
            add(f"hard-{i:03d}", "hard", src, job, history(rng, job, rng.randint(3, 15)), case, "verification_failed",
                True)
    # false claims: an agent says it changed files that are not there (or not touched)
    for k in range(6):
        job = JOBS["agent-triage"]
        i += 1
        base = _agent_triage(rng, 50)
        missing = "triage/report.md" if k % 2 else "triage/labels.json"
        retry = k % 3 == 0
        case = {**base, "state": "failed", "status": "failed", "reason": "verification_failed",
                "retry_queued": retry,
                "verification": {"ok": False, "checks": [{"name": "file_changed", "ok": False, "path": missing,
                                                          "size": None, "detail": f"{missing}: does not exist"}],
                                 "failed": ["file_changed"]}}
        add(f"hard-{i:03d}", "hard", "agent hallucinated a completed edit (public agent-eval write-ups)", job,
            history(rng, job, rng.randint(0, 10)), case, "false_claim", True)
    # blocked: the worker needs a person
    for blocker in ("push to protected branch main needs approval", "CAPTCHA on the vendor portal",
                    "credentials for the staging registry expired", "ambiguous instruction: which region?"):
        job = JOBS["agent-triage"]
        i += 1
        case = rec("stopped: blocked\n", state="blocked", status="blocked", reason="blocked",
                   handoff={"status": "failed", "blockers": [blocker], "confidence": 0.4})
        add(f"hard-{i:03d}", "hard", "agent run needing a human decision", job, history(rng, job, 4), case,
            "blocked", True)
    # retries exhausted: every attempt of a lineage failed
    for name, err in (("crm-sync", "HTTP 429 Too Many Requests (retry-after 600)"),
                      ("email-digest", "smtplib.SMTPServerDisconnected: Connection unexpectedly closed"),
                      ("db-export", "could not connect to server: Connection refused")):
        for att in (2, 3):
            job = JOBS[name]
            i += 1
            case = rec("", err, state="failed", status="failed", exit_code=1, reason="exit_code", attempt=att,
                       prior_failures=att - 1)
            add(f"hard-{i:03d}", "hard", "Google API quota incidents: transient errors that never cleared", job,
                history(rng, job, 8), case, "retries_exhausted", True)
    # late results: a run declared orphaned that reported afterwards
    for code in (0, 1, 0):
        job = JOBS["market-scan"]
        i += 1
        case = rec("", state="orphaned", status="orphaned", exit_code=code, reason="lease_expired", late_result=True)
        add(f"hard-{i:03d}", "hard", "network partition: the worker lived on after its lease", job,
            history(rng, job, 5), case, "late_result", True)


# -- soft: succeeded, but at the wrong thing --------------------------------------------------------

def build_soft(rng: random.Random) -> None:
    i = 0

    def s(source: str, job: Job, hist: list[Rec], case: Rec, kind: str, spec: dict[str, Any] | None = None) -> None:
        nonlocal i
        i += 1
        add(f"soft-{i:03d}", "soft", source, job, hist, case, kind, True, spec)

    for _k in range(8):
        job = JOBS["db-export"]
        s("cron export that silently exported nothing after an upstream API change (200 with no rows)", job,
          history(rng, job, rng.randint(6, 25)), _db_export(rng, 60, n=0, size=61), "zero_work")
    for _k in range(6):
        job = JOBS["crm-sync"]
        s("pagination bug: only the first page synced", job, history(rng, job, rng.randint(6, 25)),
          _etl_sync(rng, 60, total=100, pages=1), "work_count")
    for _k in range(6):
        job = JOBS["pg-backup"]
        s("GitLab 2017: backups only a few bytes in size, nobody noticed", job, history(rng, job, rng.randint(6, 20)),
          _pg_backup(rng, 60, size=rng.choice([4_096, 18_432, 512, 1_203])), "shrunken_file")
    for _k in range(6):
        job = JOBS["kpi-report"]
        s("report rendered to a 0-byte PDF after a font package went missing", job,
          history(rng, job, rng.randint(0, 15)), _report_pdf(rng, 60, size=0), "empty_file")
    for _k in range(4):
        job = JOBS["sitemap"]
        s("sitemap written empty when the crawler was blocked by the WAF", job, history(rng, job, rng.randint(2, 12)),
          _sitemap(rng, 60, urls=0, size=0), "empty_file")
    for _k in range(8):
        job = JOBS["market-scan"]
        failed = rng.randint(1, 5)
        s("fan-out parent says done while children failed (GitHub 2018: partial data served as whole)", job,
          history(rng, job, rng.randint(0, 12)), _fanout(rng, 60, failed=failed), "partial_content")
    for _k in range(4):
        job = JOBS["market-scan"]
        s("degraded synthesis under success", job, history(rng, job, rng.randint(0, 12)),
          _fanout(rng, 60, extra_result={"degraded": True}, notes="2 sources rate-limited, used cached copies"),
          "partial_content")
    for _k in range(4):
        job = JOBS["agent-triage"]
        s("agent says success, its notes say it stopped early", job, history(rng, job, rng.randint(0, 10)),
          _agent_triage(rng, 60, n=31, notes="triaged 12 of 31 issues before the step cap"), "partial_content")
    for _k in range(4):
        job = JOBS["agent-triage"]
        r = _agent_triage(rng, 60)
        r["handoff"] = {**r["handoff"], "status": "partial", "notes": "labels applied, report not written"}
        r["status"] = "partial"
        s("agent handed back a partial result", job, history(rng, job, rng.randint(0, 10)), r, "partial")
    for _k in range(6):
        job = JOBS["agent-triage"]
        s("agent unsure of its own result", job, history(rng, job, rng.randint(1, 10)),
          _agent_triage(rng, 60, conf=round(rng.uniform(0.2, 0.5), 2)), "low_confidence")
    news = [("pg-backup", "pg_dump: warning: could not read table \"audit_log\": permission denied for table audit_log\n",
             "silent permission change skipped a table"),
            ("db-export", "WARNING: 1422 rows rejected by the CSV writer (invalid UTF-8)\n", "encoding errors dropped rows"),
            ("sitemap", "error: robots.txt disallowed /products/, skipped 4100 urls\n", "WAF/robots change"),
            ("email-digest", "WARN: template render failed for 212 subscribers, sent plain fallback\n",
             "template error under success"),
            ("kpi-report", "Error loading data source 'revenue': timeout after 30s, section left blank\n",
             "Slack 2021: timeouts under a success status"),
            ("search-reindex", "failed to index 3117 documents: mapper_parsing_exception\n",
             "mapping change dropped documents"),
            ("billing", "ERROR tax service unreachable, invoices generated without VAT lines\n",
             "dependency outage degraded the output"),
            ("metrics-rollup", "skipping 412 series: retention policy missing\n", "config drift")]
    for _rep in range(2):
        for name, line, src in news:
            job = JOBS[name]
            fn = job.run
            case = fn(rng, 70)
            case["stdout_head"] = case["stdout_head"] + line
            s(src, job, history(rng, job, rng.randint(5, 20)), case, "new_output_shape")
    for _k in range(5):
        job = JOBS["crm-sync"]
        case = rec("GET https://api.crm.example/v2/contacts?updated_since=2026-03-30\nno changes since last sync\n",
                   duration=rng.uniform(1, 3))
        s("config pointed at the wrong tenant: 'no changes' for weeks", job, history(rng, job, rng.randint(8, 20)),
          case, "missing_output")
    for _k in range(5):
        job = JOBS["email-digest"]
        n = rng.randint(110_000, 130_000)
        s("Knight Capital 2012 style: a dormant path sent far more than usual", job,
          history(rng, job, rng.randint(8, 20)), _digest(rng, 70, n=n, bounced=40), "work_count")
    for _k in range(5):
        job = JOBS["search-reindex"]
        s("missing index after a migration: 10x slower", job, history(rng, job, rng.randint(10, 20)),
          _reindex(rng, 70, dur=rng.uniform(2600, 3300)), "slow")
    for _k in range(5):
        job = JOBS["db-export"]
        hist = history(rng, job, rng.randint(10, 20))
        case = _db_export(rng, 70, dur=0.4)
        s("finished in under a second against an empty replica", job, hist, case, "too_fast")
    for _k in range(4):
        job = JOBS["sitemap"]
        spec = {**job.spec, "expect": {"forbid_output": ["(?i)using cached crawl"]}}
        case = _sitemap(rng, 70, extra="using cached crawl from 2026-02-11 (origin unreachable)\n")
        s("stale cache served as fresh (declared forbid_output)", job, history(rng, job, rng.randint(0, 10)), case,
          "forbidden_output", spec)
    for _k in range(4):
        job = JOBS["kpi-report"]
        spec = {**job.spec, "expect": {"min_bytes": {"out/report.pdf": 100_000}}}
        case = _report_pdf(rng, 70, size=rng.randint(2_000, 9_000), pages=1)
        s("report with only a cover page (declared min_bytes)", job, history(rng, job, rng.randint(0, 4)), case,
          "small_file", spec)
    for _k in range(3):
        job = JOBS["billing"]
        spec = {**job.spec, "expect": {"output": r"generated \d+ invoices"}}
        case = rec("billing run for 2026-03-30\nnothing to bill: ledger period closed\n", duration=2)
        case["verification"]["checks"].append({"name": "expect_output", "ok": False, "soft": True,
                                               "detail": "stdout does not match"})
        s("billing ran against a closed period", job, history(rng, job, rng.randint(0, 10)), case, "output_mismatch",
          spec)
    # Subtle ones, kept honest: a person would want these, and nothing in the evidence is out of
    # the ordinary except what only knowledge of the business shows.
    for _k in range(2):
        job = JOBS["db-export"]
        hist = history(rng, job, 12)
        case = json.loads(json.dumps(hist[-1]))  # byte-identical to yesterday: the same day exported again
        s("stale input: yesterday's file exported again (clock/partition bug)", job, hist, case, "stale_output")
    for _k in range(2):
        job = JOBS["pg-backup"]
        case = _pg_backup(rng, 80)
        case["stdout_head"] = case["stdout_head"].replace("s3://acme-backups/",
                                                                                "s3://acme-backups-test/")
        s("GitLab 2017: backups uploaded somewhere nobody looked (wrong bucket)", job, history(rng, job, 12), case,
          "wrong_destination")
    for _k in range(3):
        job = JOBS["crm-sync"]
        hist = []
        for d in range(7):
            hist.append(job.run(rng, d) if d % 2 == 0 else rec("", "HTTP 502 Bad Gateway", state="failed",
                                                                status="failed", exit_code=1, reason="exit_code"))
        s("flapping upstream (every other run fails)", job, hist, job.run(rng, 9), "flapping")


# -- routine and near misses: nothing a person needs ------------------------------------------------

def build_routine(rng: random.Random) -> None:
    i = 0

    def r(cls: str, source: str, job: Job, hist: list[Rec], case: Rec, kind: str) -> None:
        nonlocal i
        i += 1
        add(f"{'routine' if cls == 'routine' else 'near'}-{i:03d}", cls, source, job, hist, case, kind, False)

    names = list(JOBS)
    for k in range(78):
        job = JOBS[names[k % len(names)]]
        hist = history(rng, job, rng.randint(10, 30))
        r("routine", "an ordinary day", job, hist, job.run(rng, 90 + k), "routine")
    # a weekend/holiday low: fewer rows, still well within the job's own range of work
    for _k in range(4):
        job = JOBS["db-export"]
        r("routine", "weekend volume", job, history(rng, job, 20), _db_export(rng, 99, n=rng.randint(9_000, 11_000)),
          "routine")
    # warnings the job always prints now and then (learned, not news)
    for _k in range(6):
        job = JOBS["db-export"]
        warn = "WARNING: replica lag 2s, reading anyway"
        hist = history(rng, job, 20, warn_every=3, warn_line=warn)
        case = job.run(rng, 100)
        case["stdout_head"] = warn + "\n" + case["stdout_head"]
        r("routine", "a known, harmless warning", job, hist, case, "routine")
    # a rare benign warning (about one run in twelve): sometimes in the learned history, sometimes not
    for _k in range(8):
        job = JOBS["crm-sync"]
        warn = f"WARN retrying GET page {rng.randint(2, 40)} after HTTP 503 (attempt 2/5)"
        hist = history(rng, job, rng.randint(10, 30))
        for h in hist:
            if rng.random() < 1 / 12:
                h["stdout_head"] = h["stdout_head"] + f"WARN retrying GET page {rng.randint(2, 40)} after HTTP 503 (attempt 2/5)\n"
        case = job.run(rng, 100)
        case["stdout_head"] = case["stdout_head"] + warn + "\n"
        r("routine", "a transient 503 retried inside the job", job, hist, case, "routine")
    # log-cleanup with nothing to remove: zero is normal for this job
    for _k in range(4):
        job = JOBS["log-cleanup"]
        r("routine", "nothing old enough to delete", job, history(rng, job, 20), _cleanup(rng, 100, k=0), "routine")
    # cert-renew renewing (a shape that exists in its history)
    for _k in range(4):
        job = JOBS["cert-renew"]
        r("routine", "scheduled renewal", job, history(rng, job, 25), job.run(rng, 100), "routine")
    # fan-out with every child fine, and a handoff that tallies zero failures
    for _k in range(4):
        job = JOBS["market-scan"]
        r("routine", "all sources covered", job, history(rng, job, 12), _fanout(rng, 100), "routine")
    # near misses: first successes, retried transients
    for _k in range(10):
        job = JOBS[names[(k * 5) % len(names)]]
        r("near_miss", "a new job's first clean run", job, [], job.run(rng, 0), "first_success")
    for k in range(8):
        job = JOBS[names[(k * 3) % len(names)]]
        case = job.run(rng, 100)
        case.update(attempt=2, prior_failures=1)
        r("near_miss", "transient 503 retried and recovered", job, history(rng, job, 12), case, "recovered_on_retry")


# -- the judge's reach: successes the rules cannot vouch for (issue: grounded judgement) ---------

def _purge(rng: random.Random, day: int, dry: bool = False) -> Rec:
    n = rng.randint(300, 500)
    if dry:
        out = f"DRY RUN: would delete {n} accounts closed more than 30 days ago; nothing was deleted\npurge finished\n"
    else:
        out = f"deleted {n} accounts closed more than 30 days ago\npurge finished\n"
    return rec(out, duration=rng.uniform(3, 9))


def _newsletter(rng: random.Random, day: int, subject: str | None = None) -> Rec:
    subject = subject or rng.choice(["March product news", "Your quarterly summary", "New in the API this week"])
    n = rng.randint(2_000, 2_400)
    return rec(f'sending campaign "{subject}" to {n} subscribers\nsent {n} emails, {rng.randint(0, 9)} bounced\n',
               duration=rng.uniform(30, 60))


def _test_suite(rng: random.Random, day: int, tally: str | None = None) -> Rec:
    n = rng.randint(1_180, 1_220)
    return rec(f"collected {n} items\n{tally or ''}{n} passed in {rng.uniform(60, 90):.1f}s\n",
               duration=rng.uniform(60, 95))


def _translations(rng: random.Random, day: int, summary: str | None = None) -> Rec:
    n = rng.randint(40, 60)
    result = {"strings": n, "summary": summary or f"translated {n} new strings into de, fr and ja"}
    handoff = {"status": "success", "confidence": 0.9, "result": result, "notes": "pushed to the l10n branch"}
    return rec(f"translating {n} new strings\npushed to l10n branch\n", duration=rng.uniform(60, 120), handoff=handoff)


def _mirror(rng: random.Random, day: int, regions: int = 3) -> Rec:
    names = ["eu-west-1", "us-east-1", "ap-southeast-2"][:regions]
    out = "".join(f"synced bucket assets to {r} ({rng.randint(800, 900)} objects)\n" for r in names)
    return rec(out + "mirror done\n", duration=rng.uniform(20, 40))


REACH_JOBS = {
    "account-purge": Job("account-purge", {"intent": "delete the customer accounts closed more than 30 days ago"},
                         _purge),
    "newsletter": Job("newsletter", {"intent": "send this week's newsletter to every subscriber"}, _newsletter),
    "nightly-tests": Job("nightly-tests", {"intent": "run the full test suite against main every night"},
                         _test_suite),
    "l10n-agent": Job("l10n-agent", {"intent": "translate the new UI strings into German, French and Japanese"},
                      _translations),
    "asset-mirror": Job("asset-mirror", {"intent": "mirror the assets bucket to 3 regions"}, _mirror),
}


def build_reach(rng: random.Random) -> None:
    """Cases of the judge's reach and of the smaller policy gaps: each a kind the rules alone
    left silent (or paged wrongly) before the judge was grounded."""
    i = 0

    def a(cls: str, source: str, job: Job, hist: list[Rec], case: Rec, kind: str, escalate: bool,
          spec: dict[str, Any] | None = None) -> None:
        nonlocal i
        i += 1
        add(f"reach-{i:03d}", cls, source, job, hist, case, kind, escalate, spec)

    purge, news, suite = REACH_JOBS["account-purge"], REACH_JOBS["newsletter"], REACH_JOBS["nightly-tests"]
    l10n, mirror = REACH_JOBS["l10n-agent"], REACH_JOBS["asset-mirror"]
    # A first success that contradicts its intent: nothing to compare with, no error word.
    for k in range(3):
        a("soft", "retention purge shipped with its dry-run default: 'succeeded' nightly, deleted nothing",
          purge, history(rng, purge, k), _purge(rng, 5, dry=True), "intent_mismatch", True)
    # An agent's prose result says it did something else than asked (the rules cannot read prose).
    for _k in range(3):
        a("soft", "agent 'success' whose summary admits it translated only one language",
          l10n, history(rng, l10n, 8),
          _translations(rng, 9, summary="translated the new strings into German only; the French and Japanese"
                                        " glossaries were not found so those were skipped"), "intent_mismatch", True)
    # The intent names a quantity the output never reaches ("3 regions": two synced).
    for _k in range(3):
        a("soft", "cross-region replication silently dropped a region after a config change",
          mirror, [], _mirror(rng, 1, regions=2), "intent_mismatch", True)
    # A tally of zero bad things in words the rules never listed: not an error.
    for tally in ("0 failing, 0 errored\n", "rejected: 0\n", "Failures (0)\n", "zero quarantined, 0 flaky\n"):
        hist = [_test_suite(rng, d, tally=tally) for d in range(12)]
        a("routine", "a summary line that tallies zero failures in its own words", suite,
          hist, _test_suite(rng, 20, tally=tally), "routine", False)
        a("near_miss", "a new job's first run tallies zero failures", suite, [], _test_suite(rng, 0, tally=tally),
          "first_success", False)
    # An error word inside a subject line is the subject's, not the job's.
    for subject in ("Why your builds failed last week (and how to fix it)", "Fatal errors we fixed in March",
                    "Payment failed? Update your card"):
        a("routine", "an e-mail subject that merely contains an error word", news, history(rng, news, 12),
          _newsletter(rng, 30, subject=subject), "routine", False)
        a("near_miss", "a first campaign whose subject contains an error word", news, [],
          _newsletter(rng, 0, subject=subject), "first_success", False)
    # Clean first successes of the reach jobs: consulted, and an honest reader stays silent.
    for job in (purge, mirror, l10n):
        a("near_miss", "a new job's first clean run", job, [], job.run(rng, 0), "first_success", False)
    # A failed verification whose check fails the same way again: no silent wait for a retry.
    check = {"name": "verify_command", "ok": False, "soft": False,
             "detail": "python scripts/check_schema.py out/orders.csv: exit 1: column amount_cents missing (0.3s)"}
    job = JOBS["db-export"]
    for k in range(3):
        base = job.run(rng, 40)
        first = {**base, "state": "failed", "status": "failed", "reason": "verification_failed", "attempt": 1,
                 "retry_queued": True, "verification": {"ok": False, "checks": [dict(check)], "failed": ["verify_command"]}}
        second = {**first, "attempt": 2, "verification": {"ok": False, "checks": [
            {**check, "detail": check["detail"].replace("0.3s", f"0.{k + 4}s")}], "failed": ["verify_command"]}}
        a("hard", "schema check failing the same way on every retry (upstream dropped a column)", job,
          [*history(rng, job, 10), first], second, "verification_failed", True, {**job.spec, "max_attempts": 3})
        marked = {**first, "verification": {"ok": False, "checks": [{**check, "deterministic": True}],
                                            "failed": ["verify_command"]}}
        a("hard", "a check the spec marks deterministic (a checksum of the written file)", job,
          history(rng, job, 10), marked, "verification_failed", True, {**job.spec, "max_attempts": 3})
        flaky = {**first, "verification": {"ok": False, "checks": [
            {**check, "detail": "curl -fsS https://cdn.acme.example/orders.csv: exit 28: timed out (10.0s)"}],
            "failed": ["verify_command"]}}
        a("near_miss", "a verify command that timed out once (network), retry queued", job, history(rng, job, 10),
          flaky, "retry_pending", False, {**job.spec, "max_attempts": 3})


def main() -> None:
    rng = random.Random(SEED)
    build_hard(rng)
    build_soft(rng)
    build_routine(rng)
    build_reach(rng)
    with OUT.open("w", encoding="utf-8") as fh:
        fh.write("# Raw-evidence judge cases, generated by tests/eval/build_corpus.py (see its docstring for sources).\n")
        for c in CASES:
            fh.write(json.dumps(c, sort_keys=True, separators=(",", ":")) + "\n")
    counts: dict[str, int] = {}
    for c in CASES:
        counts[c["class"]] = counts.get(c["class"], 0) + 1
    print(f"{len(CASES)} cases -> {OUT}: {counts}")


if __name__ == "__main__":
    main()
