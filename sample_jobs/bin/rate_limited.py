"""An LLM-style worker that hits a rate limit on its first attempt of each run."""
import json
import os
import sys

attempt = int(os.environ.get("WATCHKEEPER_ATTEMPT", "1"))
with open(os.environ["WATCHKEEPER_HANDOFF"], "w") as fh:
    if attempt == 1:
        json.dump({"status": "failed", "error": "rate_limit", "notes": "429 from the model API"}, fh)
        print("rate limited (429)", file=sys.stderr)
        sys.exit(1)
    json.dump({"status": "success", "result": {"summarised": 12}, "confidence": 0.85, "steps_used": 4}, fh)
print("inbox summarised: 12 threads")
