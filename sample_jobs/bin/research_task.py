"""One research sub-task: sleeps a while, writes a handoff with its findings (or fails)."""
import json
import os
import sys
import time

topic, seconds = sys.argv[1], float(sys.argv[2])
time.sleep(seconds)
if "--fail" in sys.argv:
    print(f"{topic}: source unreachable (HTTP 503)", file=sys.stderr)
    with open(os.environ["WATCHKEEPER_HANDOFF"], "w") as fh:
        json.dump({"status": "failed", "error": "source_unreachable"}, fh)
    sys.exit(1)
with open(os.environ["WATCHKEEPER_HANDOFF"], "w") as fh:
    json.dump({"status": "success", "result": {"topic": topic, "items": 3}, "confidence": 0.9}, fh)
print(f"{topic}: 3 items")
