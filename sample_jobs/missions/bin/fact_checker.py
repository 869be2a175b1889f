"""Scripted stand-in for the fact-checker agent: checks the draft against the research, or
the research alone (partial) when no draft came."""
import json
import os
import time

inp = json.load(open(os.environ["WATCHKEEPER_MISSION_INPUT"])) if os.environ.get("WATCHKEEPER_MISSION_INPUT") else {}
time.sleep(1.0)
ctx = inp.get("context") or {}
facts = ctx.get("research") or []
draft = ctx.get("draft")
checked = [{"claim": f["fact"][:60], "supported_by": f.get("source")} for f in facts if isinstance(f, dict)]
if draft:
    doc = {"status": "success", "result": {"claims_checked": len(checked), "unsupported": 0}, "confidence": 0.9,
           "steps_used": 2, "error": None}
else:
    doc = {"status": "partial", "result": {"claims_checked": len(checked), "checked_against": "research only"},
           "confidence": 0.6, "steps_used": 1, "error": None, "notes": "missing: a draft to check"}
print(f"checked {len(checked)} claims" + ("" if draft else " (no draft: research only)"))
json.dump(doc, open(os.environ["WATCHKEEPER_HANDOFF"], "w"))
