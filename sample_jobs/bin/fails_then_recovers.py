"""Fails for the first N runs (counted in a file), then succeeds: trips and closes a breaker."""
import os
import sys

path, failures = sys.argv[1], int(sys.argv[2])
os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
n = int(open(path).read() or 0) if os.path.exists(path) else 0
with open(path, "w") as fh:
    fh.write(str(n + 1))
if n < failures:
    print(f"partner API: 502 Bad Gateway (call {n + 1})", file=sys.stderr)
    sys.exit(1)
print(f"partner API ok (call {n + 1})")
