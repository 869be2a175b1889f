"""Scripted stand-in for the writer agent: an article from the research in its context.

It fails (as a refusing model would) when the mission goal contains "[writer fails]", to
show the degraded path: the mission then reports the raw research as partial.
"""
import json
import os
import sys
import time

inp = json.load(open(os.environ["WATCHKEEPER_MISSION_INPUT"])) if os.environ.get("WATCHKEEPER_MISSION_INPUT") else {}
time.sleep(1.0)
if "[writer fails]" in (inp.get("goal") or ""):
    json.dump({"status": "failed", "result": None, "error": "refusal", "steps_used": 1,
               "notes": "the writer declined the task"}, open(os.environ["WATCHKEEPER_HANDOFF"], "w"))
    print("writer: refused", file=sys.stderr)
    sys.exit(65)
facts = ((inp.get("context") or {}).get("research")) or []
body = " ".join(f["fact"] for f in facts if isinstance(f, dict) and "fact" in f)
article = f"Why the sea has two tides a day\n\n{body}" if body else ""
status = "success" if body else "partial"
print(f"wrote {len(article)} characters from {len(facts)} facts")
json.dump({"status": status, "result": article or "no research given", "confidence": 0.8 if body else 0.2,
           "steps_used": 2, "error": None, "notes": "" if body else "missing: research to write from"},
          open(os.environ["WATCHKEEPER_HANDOFF"], "w"))
