"""Prints about N MB of log lines, then exits 0."""
import sys

mb = int(sys.argv[1]) if len(sys.argv) > 1 else 30
line = ("127.0.0.1 - - [30/Nov/2026:04:00:00 +0000] \"GET /index.html HTTP/1.1\" 200 5120 \"-\" \"curl\"\n")
out = sys.stdout
n = (mb * 1024 * 1024) // len(line)
for i in range(n):
    out.write(line)
print(f"replayed {n} lines")
