"""Build ``tests/eval/corpus_fresh.jsonl``: a second labelled corpus for ``watchkeeper eval``,
written after the judge's reach and grounding, from incident reports *other than* those
``build_corpus.py`` used — so the figures are not the judge grading its own homework.

Same shape as ``corpus.jsonl`` (raw evidence: spec, prior outcomes, the outcome; a label). Each
case names its public source. The jobs are new archetypes, their healthy output written first;
the incident is injected the way the report describes it. Sources (public write-ups):

* Sentry, "Transaction ID Wraparound in Postgres" (2015): writes refused to avoid wraparound.
* Datadog, "2023-03-08 Incident" (an automatic systemd update deleted the CNI routes).
* Reddit, "You Broke Reddit: The Pi-Day Outage" (2023): a Kubernetes 1.24 upgrade removed the
  ``master`` node label; the route reflectors selected by it became none.
* Roblox, "Return to Service" (Oct 2021): Consul streaming + BoltDB contention, everything slow.
* The 2012 leap second (LKML, Mozilla bug 769972): hrtimer livelock, jobs spinning to timeout.
* Cloudflare, "18 November 2025 outage": a permissions change duplicated rows in the Bot
  Management feature file; twice the features, past the proxy's 200 limit.
* Google, "Dec 14 2020 User ID Service" incident: a quota system reported usage 0 and the
  automation cut the quota.
* CrowdStrike, "Channel File 291" (July 2024): a content file that passed validation carried
  a template with nothing the sensor could use.
* Salesforce (May 2019): a permissions script granted write access far beyond its scope.
* "The backup ran. It never backed up." (cueapi blog): 47 KB schema-only dumps for 47 days.
* "The Database That Wasn't Backing Up" (grokdevops war story): a 14-byte dump holding
  pg_dump's own auth error, rsynced nightly for 97 days.
* CronGuard, "Anatomy of a Cron Job Disaster": an SMTP TLS failure swallowed; invoices
  generated, never sent, exit 0.
* EPForecast changelog, "Zero-Rows Invariant" (2026): an intraday collector logged success 14
  times while writing zero rows.
* "DEPEND_002 — Upstream job completed with success status but wrote zero rows" (toph-eval
  taxonomy): a run at 5-15% of its usual duration.
* Elliot Digital runbook, "Debug: data pipeline failing": a NOT NULL column added upstream, rows
  rejected silently; a stale watermark re-processing the same window.

Run ``python -m tests.eval.build_fresh`` to regenerate (deterministic: fixed seed).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.eval.build_corpus import Job, Rec, rec

OUT = Path(__file__).with_name("corpus_fresh.jsonl")
SEED = 20261202
CASES: list[dict[str, Any]] = []

SENTRY = "Sentry 2015: Postgres transaction ID wraparound"
DATADOG = "Datadog 2023-03-08: automatic systemd update deleted CNI routes"
REDDIT = "Reddit Pi-Day 2023: k8s 1.24 upgrade removed the 'master' node label"
ROBLOX = "Roblox Oct 2021: Consul streaming and BoltDB contention"
LEAP = "2012 leap second: hrtimer livelock, CPUs spinning"
CLOUDFLARE = "Cloudflare 2025-11-18: Bot Management feature file doubled"
GOOGLE = "Google 2020-12-14: quota system reported usage 0"
CROWDSTRIKE = "CrowdStrike July 2024: Channel File 291 passed validation"
SALESFORCE = "Salesforce May 2019: permissions script over-granted write access"
CUEAPI = "cueapi blog: 'The backup ran. It never backed up.' (47 KB schema-only dumps)"
GROK = "grokdevops: 'The Database That Wasn't Backing Up' (14-byte dumps of an auth error)"
CRONGUARD = "CronGuard postmortem: SMTP TLS failure swallowed, invoices never sent"
EPF = "EPForecast 2026: intraday collector logged success 14 times with zero rows"
DEPEND = "toph-eval DEPEND_002: success status, zero rows, 5-15% of usual duration"
ELLIOT = "Elliot Digital runbook: NOT NULL column rejects rows; stale watermark"


def add(cid: str, cls: str, source: str, job: Job, hist: list[Rec], case: Rec, kind: str | None,
        escalate: bool, spec: dict[str, Any] | None = None) -> None:
    CASES.append({"id": cid, "class": cls, "source": source, "spec": {"name": job.name, **(spec or job.spec)},
                  "history": hist, "case": case, "expect": {"escalate": escalate, "kind": kind}})


def day(d: int) -> str:
    return f"2026-04-{1 + d % 28:02d}"


# -- healthy runs of the new archetypes ---------------------------------------------------------

def _prices(rng: random.Random, d: int, rows: int = 24, dur: float | None = None, extra: str = "") -> Rec:
    return rec(f"fetching OMIE intraday session for {day(d)}\n{extra}inserted {rows} rows into prices_intraday\n",
               duration=dur or rng.uniform(8, 14))


def _features(rng: random.Random, d: int, n: int | None = None) -> Rec:
    n = rng.randint(56, 64) if n is None else n
    size = n * 820 + rng.randint(0, 400)
    return rec(f"querying r0.bot_features\nwrote feature file with {n} features ({size} bytes)\n"
               "propagated to 330 edge locations\n", duration=rng.uniform(3, 6),
               files=[("artifact", "out/features.bin", size)])


def _quota(rng: random.Random, d: int, usage: int | None = None, quota: int | None = None) -> Rec:
    usage = rng.randint(80_000, 95_000) if usage is None else usage
    quota = quota if quota is not None else 150_000
    return rec(f"service user-id: measured usage {usage} qps\nservice user-id: quota kept at {quota} qps\n"
               f"reviewed {rng.randint(410, 430)} services\n", duration=rng.uniform(20, 30))


def _invoices(rng: random.Random, d: int, sent: bool = True, n: int | None = None) -> Rec:
    n = rng.randint(180, 240) if n is None else n
    out = f"rendering {n} pending invoices\ngenerated {n} invoice PDFs\n"
    if sent:
        out += f"emailed {n} invoices via smtp.acme.example\n"
    return rec(out, duration=rng.uniform(40, 70))


def _dump(rng: random.Random, d: int, size: int | None = None, extra: str = "", stderr: str = "") -> Rec:
    size = rng.randint(2_300_000_000, 2_450_000_000) if size is None else size
    return rec(f"pg_dump shipments (format custom)\n{extra}rsync dump to s3://logistics-backups/nightly/ done\n",
               stderr, duration=rng.uniform(900, 1100), files=[("expect_file", "backups/shipments.dump", size)])


def _orders_load(rng: random.Random, d: int, n: int | None = None, extra: str = "", dur: float | None = None,
                 window: str | None = None) -> Rec:
    n = rng.randint(45_000, 52_000) if n is None else n
    w = window or day(d)
    return rec(f"extracting orders for window {w}\nextracted {n} rows\n{extra}loaded {n} rows into orders_fact\n",
               duration=dur or rng.uniform(250, 300))


def _upgrade(rng: random.Random, d: int, reflectors: int = 3) -> Rec:
    return rec("kubeadm upgrade apply v1.24.0\n[upgrade/successful] SUCCESS! Your cluster was upgraded to \"v1.24.0\"."
               f" Enjoy!\ncalico: route reflectors selected: {reflectors} nodes\n", duration=rng.uniform(300, 500))


def _vacuum(rng: random.Random, d: int) -> Rec:
    return rec(f"VACUUM (FREEZE) sentry_groupedmessage\noldest xid age {rng.randint(150, 400)} million\n",
               duration=rng.uniform(600, 900))


def _patch(rng: random.Random, d: int) -> Rec:
    return rec("unattended-upgrade: checking for security updates\nNo packages found that can be upgraded unattended"
               " and no pending auto-removals\n", duration=rng.uniform(10, 30))


def _channel(rng: random.Random, d: int, templates: int | None = None) -> Rec:
    t = rng.randint(20, 24) if templates is None else templates
    return rec(f"validated channel file 291 ({rng.randint(40, 44)} KB, {t} template instances)\n"
               "published to ring 0 (internal), ring 1 (early adopters), ring 2 (general)\n",
               duration=rng.uniform(60, 90))


def _grants(rng: random.Random, d: int, n: int | None = None) -> Rec:
    n = rng.randint(280, 340) if n is None else n
    return rec(f"applying permission set 'pardot-integration'\ngranted write access to {n} users in 4 orgs\n",
               duration=rng.uniform(5, 15))


def _consul_sync(rng: random.Random, d: int, dur: float | None = None) -> Rec:
    return rec(f"registered {rng.randint(1_700, 1_800)} service instances with consul\n",
               duration=dur or rng.uniform(20, 40))


JOBS = {j.name: j for j in (
    Job("price-collector", {"intent": "collect the 24 hourly intraday prices into the warehouse every day"}, _prices),
    Job("bot-features", {"intent": "publish the bot feature file (never more than 200 features) to the edge"},
        _features),
    Job("quota-sync", {"intent": "adjust each service's quota to its measured usage, never below it"}, _quota),
    Job("invoice-mailer", {"intent": "email every pending invoice PDF to its customer"}, _invoices),
    Job("shipments-backup", {"intent": "nightly restorable dump of the shipments database",
                             "expect": {"files": ["backups/shipments.dump"]}}, _dump),
    Job("orders-load", {"intent": "load yesterday's orders into the warehouse fact table"}, _orders_load),
    Job("cluster-upgrade", {"intent": "upgrade the cluster to v1.24 with its 3 route reflectors in place"},
        _upgrade),
    Job("xid-vacuum", {"intent": "freeze old transaction ids before wraparound"}, _vacuum),
    Job("os-patch", {"intent": "apply pending security updates to the base image"}, _patch),
    Job("channel-publish", {"intent": "validate and publish the sensor content file in staged rings"}, _channel),
    Job("perm-sync", {"intent": "grant the integration's write permission to its 4 orgs' admins only"}, _grants),
    Job("consul-sync", {"intent": "register every service instance with consul"}, _consul_sync),
)}


def history(rng: random.Random, job: Job, n: int, run: Callable[..., Rec] | None = None, **kw: Any) -> list[Rec]:
    return [(run or job.run)(rng, d, **kw) for d in range(n)]


def build(rng: random.Random) -> None:
    n = {"hard": 0, "soft": 0, "routine": 0, "near_miss": 0}

    def case(cls: str, source: str, job: Job, hist: list[Rec], outcome: Rec, kind: str | None,
             spec: dict[str, Any] | None = None) -> None:
        n[cls] += 1
        add(f"fresh-{cls}-{n[cls]:03d}", cls, source, job, hist, outcome, kind, cls in ("hard", "soft"), spec)

    J = JOBS
    # -- hard: failures, timeouts, deaths, failed checks ------------------------------------------
    failures = [
        ("xid-vacuum", 1, 'ERROR:  database is not accepting commands to avoid wraparound data loss in database'
                          ' "sentry"\nHINT:  Stop the postmaster and vacuum that database in single-user mode.', SENTRY),
        ("os-patch", 100, "E: Sub-process /usr/bin/dpkg returned an error code (1)\nsystemd-networkd: flushed 112 foreign"
                          " routing policy rules", DATADOG),
        ("consul-sync", 1, "consul: rpc error making call: i/o deadline reached (leader election in progress)", ROBLOX),
        ("price-collector", 1, "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='www.omie.es', port=443):"
                               " Max retries exceeded", EPF),
        ("shipments-backup", 1, 'pg_dump: error: connection to server at "10.0.4.12", port 5432 failed: FATAL:  password'
                                ' authentication failed for user "backup_svc"', GROK),
        ("cluster-upgrade", 1, "[ERROR CoreDNSUnsupportedPlugins]: couldn't retrieve DNS addon deployments: Get"
                               " \"https://10.0.0.1:6443/apis/apps/v1\": dial tcp 10.0.0.1:6443: connect: connection"
                               " refused", REDDIT),
        ("invoice-mailer", 1, "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify"
                              " failed: unable to get local issuer certificate", CRONGUARD),
        ("bot-features", 101, "thread 'fl2_worker_thread' panicked: called `Result::unwrap()` on an `Err` value:"
                              " feature count 412 exceeds limit 200", CLOUDFLARE),
    ]
    for rep in range(2):
        for name, code, err, src in failures:
            job = J[name]
            out = job.run(rng, 30)["stdout_head"].splitlines()[0] + "\n" if rep else ""
            case("hard", src, job, history(rng, job, rng.randint(2, 14)),
                 rec(out, err, state="failed", status="failed", exit_code=code, duration=rng.uniform(1, 60),
                     reason="exit_code"), "failed")
    for name in ("consul-sync", "xid-vacuum", "orders-load"):
        for src, why in ((LEAP, "spinning at 100% CPU after the leap second"), (ROBLOX, "blocked on consul KV reads")):
            job = J[name]
            case("hard", f"{src} ({why})", job, history(rng, job, rng.randint(3, 12)),
                 rec("starting\n", state="timed_out", status="timed_out", exit_code=None, signal=15, duration=1800,
                     reason="timeout"), "timed_out")
    for name in ("cluster-upgrade", "os-patch", "channel-publish"):
        job = J[name]
        case("hard", f"{DATADOG} (the host lost its network mid-run; the runner with it)", job,
             history(rng, job, rng.randint(2, 8)),
             rec("", state="orphaned", status="orphaned", exit_code=None, duration=None, reason="lease_expired"),
             "orphaned")
    # verification: exit 0, but the restore test fails — and fails the same way on the retry
    restore = {"name": "verify_command", "ok": False, "soft": False,
               "detail": "pg_restore --list backups/shipments.dump: exit 1: pg_restore: error: input file appears to"
                         " be a text format dump (0.2s)"}
    job = J["shipments-backup"]
    for k in range(3):
        base = _dump(rng, 40, size=14)
        first = {**base, "state": "failed", "status": "failed", "reason": "verification_failed", "retry_queued": True,
                 "verification": {"ok": False, "checks": [*base["verification"]["checks"], dict(restore)],
                                  "failed": ["verify_command"]}}
        again = {**first, "attempt": 2, "verification": {"ok": False, "checks": [
            *base["verification"]["checks"], {**restore, "detail": restore["detail"].replace("0.2s", f"0.{k + 3}s")}],
            "failed": ["verify_command"]}}
        case("hard", f"{GROK} (the restore check fails the same way on every attempt)", job,
             [*history(rng, job, 8), first], again, "verification_failed", {**job.spec, "max_attempts": 3})
    schema = {"name": "verify_command", "ok": False, "soft": False, "deterministic": True,
              "detail": "python checks/not_null.py orders_fact: exit 1: 3114 rows with NULL customer_region (1.1s)"}
    job = J["orders-load"]
    for _k in range(3):
        base = _orders_load(rng, 41)
        case("hard", f"{ELLIOT} (a check the spec marks deterministic)", job, history(rng, job, 10),
             {**base, "state": "failed", "status": "failed", "reason": "verification_failed", "retry_queued": True,
              "verification": {"ok": False, "checks": [dict(schema)], "failed": ["verify_command"]}},
             "verification_failed", {**job.spec, "max_attempts": 3})
    for name, err in (("price-collector", "HTTP 503 from www.omie.es"), ("consul-sync", "consul: no cluster leader")):
        job = J[name]
        case("hard", f"{EPF if name == 'price-collector' else ROBLOX} (every attempt failed)", job,
             history(rng, job, 8), rec("", err, state="failed", status="failed", exit_code=1, reason="exit_code",
                                       attempt=3, prior_failures=2), "retries_exhausted")

    # -- soft: succeeded at the wrong thing -------------------------------------------------------
    # Most incidents hit a job with a history (the rules see the departure); one case per source
    # hits a new job, where the intent is the only yardstick and only the model can page.
    reps = 6
    job = J["price-collector"]
    for _k in range(reps):
        case("soft", EPF, job, history(rng, job, rng.randint(8, 20)), _prices(rng, 50, rows=0, dur=1.2), "zero_work")
    case("soft", f"{EPF} (a new collector's first run)", job, [], _prices(rng, 50, rows=0), "intent_mismatch")
    job = J["orders-load"]
    for _k in range(reps):
        case("soft", DEPEND, job, history(rng, job, rng.randint(10, 20)), _orders_load(rng, 51, n=0, dur=14),
             "zero_work")
    for _k in range(reps):
        case("soft", ELLIOT, job, history(rng, job, rng.randint(6, 16)),
             _orders_load(rng, 52, extra="rejected 3114 rows: null value in column \"customer_region\" violates"
                                         " not-null constraint\n"), "new_output_shape")
    hist = history(rng, job, 12)
    case("soft", f"{ELLIOT} (stale watermark: yesterday's window loaded again)", job, hist,
         json.loads(json.dumps(hist[-1])), "stale_output")
    job = J["shipments-backup"]
    for _k in range(reps):
        case("soft", CUEAPI, job, history(rng, job, rng.randint(6, 15)),
             _dump(rng, 53, size=rng.randint(46_000, 49_000)), "shrunken_file")
    case("soft", f"{CUEAPI} (a new backup job: schema only from its first night)", job, [],
         _dump(rng, 53, size=47_000, extra="pg_dump: dumping schema only (--schema-only set in PGDUMP_OPTS)\n"),
         "intent_mismatch")
    for _k in range(reps):
        case("soft", GROK, job, history(rng, job, rng.randint(6, 12)),
             _dump(rng, 54, size=14, stderr="pg_dump: error: connection to server failed: FATAL:  password"
                                            " authentication failed for user \"backup_svc\"\n"), "shrunken_file")
    job = J["invoice-mailer"]
    for _k in range(reps):
        case("soft", CRONGUARD, job, history(rng, job, rng.randint(6, 15)), _invoices(rng, 55, sent=False),
             "missing_output")
    case("soft", f"{CRONGUARD} (the rewritten mailer's first run)", job, [], _invoices(rng, 55, sent=False),
         "intent_mismatch")
    job = J["bot-features"]
    case("soft", CLOUDFLARE, job, history(rng, job, rng.randint(6, 15)), _features(rng, 56, n=rng.randint(400, 430)),
         "intent_mismatch")
    job = J["quota-sync"]
    for _k in range(reps):
        case("soft", GOOGLE, job, history(rng, job, rng.randint(6, 15)), _quota(rng, 57, usage=0, quota=0), "zero_work")
    job = J["cluster-upgrade"]
    case("soft", REDDIT, job, [], _upgrade(rng, 58, reflectors=0), "intent_mismatch")
    job = J["channel-publish"]
    for _k in range(reps):
        case("soft", CROWDSTRIKE, job, history(rng, job, rng.randint(6, 12)), _channel(rng, 59, templates=0),
             "zero_work")
    job = J["perm-sync"]
    for _k in range(reps):
        case("soft", SALESFORCE, job, history(rng, job, rng.randint(6, 12)),
             _grants(rng, 60, n=rng.randint(48_000, 52_000)), "work_count")
    job = J["consul-sync"]
    for _k in range(reps):
        case("soft", ROBLOX, job, history(rng, job, rng.randint(10, 20)),
             _consul_sync(rng, 61, dur=rng.uniform(900, 1200)), "slow")

    # -- routine: ordinary days, including the words that used to page -----------------------------
    names = list(J)
    for k in range(36):
        job = J[names[k % len(names)]]
        case("routine", "an ordinary day", job, history(rng, job, rng.randint(8, 25)), job.run(rng, 90 + k), "routine")
    job = J["os-patch"]
    for _k in range(2):  # a zero tally in words no rule lists, printed every run
        tally = "0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded; 0 failed\n"
        hist = [rec(tally + _patch(rng, d)["stdout_head"], duration=rng.uniform(10, 30)) for d in range(10)]
        case("routine", f"{DATADOG} (apt's own tally of nothing done)", job, hist,
             rec(tally + _patch(rng, 20)["stdout_head"], duration=15), "routine")
    job = J["invoice-mailer"]
    for subject in ('"Your payment failed - please update your card"', '"Error in your March invoice (corrected)"'):
        line = f"subject line: {subject}\n"
        hist = [rec(f'subject line: "Invoice {day(d)}"\n' + _invoices(rng, d)["stdout_head"],
                    duration=rng.uniform(40, 70)) for d in range(10)]
        case("routine", f"{CRONGUARD} (a subject line that merely contains an error word)", job, hist,
             rec(line + _invoices(rng, 20)["stdout_head"], duration=50), "routine")

    # -- near misses: first clean runs and recoveries -------------------------------------------------
    for name in ("price-collector", "quota-sync", "invoice-mailer", "cluster-upgrade", "perm-sync", "orders-load"):
        job = J[name]
        case("near_miss", "a new job's first clean run", job, [], job.run(rng, 0), "first_success")
    for name in ("consul-sync", "shipments-backup", "bot-features", "channel-publish"):
        job = J[name]
        r = job.run(rng, 70)
        r.update(attempt=2, prior_failures=1)
        case("near_miss", f"{ROBLOX} (a transient consul error, retried and recovered)", job, history(rng, job, 10), r,
             "recovered_on_retry")
    job = J["orders-load"]
    flaky = {"name": "verify_command", "ok": False, "soft": False,
             "detail": "curl -fsS https://warehouse.internal/health: exit 28: timed out (10.0s)"}
    base = _orders_load(rng, 62)
    case("near_miss", "a verify command that timed out once (network), retry queued", job, history(rng, job, 10),
         {**base, "state": "failed", "status": "failed", "reason": "verification_failed", "retry_queued": True,
          "verification": {"ok": False, "checks": [flaky], "failed": ["verify_command"]}}, "retry_pending",
         {**job.spec, "max_attempts": 3})
    job = J["os-patch"]
    case("near_miss", "a first run whose tally of failures is zero", job, [],
         rec("0 upgraded, 0 newly installed, 0 to remove; 0 failed, 0 rejected\n" + _patch(rng, 0)["stdout_head"],
             duration=12), "first_success")


def main() -> None:
    rng = random.Random(SEED)
    build(rng)
    with OUT.open("w", encoding="utf-8") as fh:
        fh.write("# Fresh judge cases from other incident reports, generated by tests/eval/build_fresh.py"
                 " (see its docstring for sources).\n")
        for c in CASES:
            fh.write(json.dumps(c, sort_keys=True, separators=(",", ":")) + "\n")
    counts: dict[str, int] = {}
    for c in CASES:
        counts[c["class"]] = counts.get(c["class"], 0) + 1
    print(f"{len(CASES)} cases -> {OUT}: {counts}")


if __name__ == "__main__":
    main()
