"""stderr without ``-v`` shows errors, and the few warnings an operator must see: the ledger
lost and back (one line each). A PostgreSQL outage under ``watchkeeper run`` printed nothing
at all by default, and with ``-v`` about twenty lines of psycopg-pool's own retries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import logging, sys
import click
from console.cli.main import cli
from core.ledger.connection import OPERATOR_LINE

@cli.command("say")
def say():
    logging.getLogger("core.runner").warning("a breaker warning")
    logging.getLogger("core.ledger.connection").warning("ledger lost", extra={OPERATOR_LINE: True})
    logging.getLogger("psycopg.pool").warning("error connecting in 'pool'")
    logging.getLogger("core.runner").error("an error")

cli(sys.argv[1:], prog_name="watchkeeper")
"""


def _stderr(*args: str) -> str:
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60).stderr


def test_default_stderr_is_errors_and_operator_lines():
    err = _stderr("say")
    assert "ledger lost" in err and "an error" in err
    assert "a breaker warning" not in err and "error connecting" not in err


def test_v_adds_warnings_but_never_the_pools_retry_flood():
    err = _stderr("-v", "say")
    assert "a breaker warning" in err and "ledger lost" in err and "an error" in err
    assert "error connecting" not in err
