"""Writes out/report.txt and a handoff claiming it."""
import json
import os
import time

os.makedirs("out", exist_ok=True)
with open("out/report.txt", "w") as fh:
    fh.write(f"report generated at {time.strftime('%Y-%m-%d %H:%M:%S')}\nrows: 1234\n")
handoff = {"status": "success", "result": {"rows": 1234}, "confidence": 0.95,
           "files_changed": ["out/report.txt"], "notes": "report written"}
with open(os.environ["WATCHKEEPER_HANDOFF"], "w") as fh:
    json.dump(handoff, fh)
print("report written to out/report.txt")
