"""mkdocs-gen-files script: writes the reference pages (commands, settings, keys) from the code
at build time, so the manual cannot drift from it (see console/reference.py)."""

import mkdocs_gen_files

from console.reference import pages

for path, text in pages().items():
    with mkdocs_gen_files.open(path, "w") as f:
        f.write(text)
