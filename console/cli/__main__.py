"""``python -m console.cli``: the same entry point as the ``watchkeeper`` script."""

from console.cli.main import main

main()
