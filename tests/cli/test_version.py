"""``watchkeeper --version`` names the installed version and the ledger schema it writes."""

from __future__ import annotations

import importlib.metadata

from core.ledger.connection import SCHEMA_VERSION
from tests.kit.cli import wk


def test_version_prints_the_package_version_and_ledger_schema(tmp_path):
    res = wk("--version", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout.startswith(f"watchkeeper {importlib.metadata.version('watchkeeper')} "
                                 f"(ledger schema {SCHEMA_VERSION}, Python 3.")
