"""Print the eval figures with rules alone and through Claude answering agree, always-escalate
and always-silent (the local fake server; no network, no API key): ``make eval``."""

from __future__ import annotations

import sys

from console.cli.main import cli
from tests.kit.fake_anthropic import FakeAnthropic

from .build_corpus import OUT


def main() -> None:
    with FakeAnthropic(mode="agree") as fake:
        args = ["eval", str(OUT), "--model", "fake", *sys.argv[1:]]
        for mode in ("agree", "always_escalate", "always_silent"):
            args += ["--claude-base-url", f"{fake.url}/{mode}"]
        cli.main(args, prog_name="watchkeeper", standalone_mode=True)


if __name__ == "__main__":
    main()
