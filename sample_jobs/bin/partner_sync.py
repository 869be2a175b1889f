"""Syncs six partner feeds and hands back a summary. Every WRONG_EVERY-th run two partners time
out; the worker still reports status success, but its own result says 2 of 6 failed."""
import json
import os

from run_count import wrong_this_time

partners = ["acme", "globex", "initech", "umbrella", "hooli", "stark"]
failed = partners[:2] if wrong_this_time("partner-sync") else []
for p in partners:
    print(f"partner {p}: {'timed out after 30s' if p in failed else 'feed synced'}")
handoff = {"status": "success", "confidence": 0.85,
           "result": {"partners": len(partners), "synced": len(partners) - len(failed), "failed": len(failed),
                      "failed_partners": failed},
           "notes": f"{len(partners) - len(failed)} of {len(partners)} partner feeds synced"}
with open(os.environ["WATCHKEEPER_HANDOFF"], "w") as fh:
    json.dump(handoff, fh)
