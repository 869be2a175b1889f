"""Routine job: sum the sizes of files under a folder."""
import os
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
total = files = 0
for dirpath, _dirs, names in os.walk(root):
    for n in names:
        try:
            total += os.path.getsize(os.path.join(dirpath, n))
            files += 1
        except OSError:
            pass
print(f"{root}: {files} files, total {total} bytes")
