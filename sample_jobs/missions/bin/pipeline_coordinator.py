"""The scripted coordinator of the pipeline mission: one turn per call.

Reads the mission as JSON on stdin ({mission, workers, calls}) and prints the turn's tool
calls: {"tool_calls": [{"name": ..., "input": {...}}], "text": ...}. It keeps no state of
its own: everything it needs is in the workers' states and results.
"""
import json
import sys

doc = json.load(sys.stdin)
goal = doc["mission"]["goal"]
workers = {w["worker"]: w for w in doc["workers"]}
research, writer, checker = (workers.get(n) for n in ("mission-researcher", "mission-writer", "mission-fact-checker"))


def say(text, *calls):
    print(json.dumps({"text": text, "tool_calls": [{"name": n, "input": i} for n, i in calls]}))
    sys.exit(0)


if research is None:
    say("Plan: research, write, check.", ("spawn_worker", {"worker": "mission-researcher",
                                                           "task": f"Gather the facts needed for: {goal}"}))
if research["state"] != "delivered":
    say("Nothing was researched: report the failure.",
        ("report", {"status": "failed", "text": f"No research was delivered ({research.get('note')}); nothing to write."}),
        ("close_mission", {}))
if writer is None:
    say("Research is in: write.", ("spawn_worker", {"worker": "mission-writer", "task": "Write a short article.",
                                                    "context": {"research": research["result"]}}))
if checker is None:
    draft = writer["result"] if writer["state"] == "delivered" else None
    say("Check the draft (or the research alone if the writer failed).",
        ("spawn_worker", {"worker": "mission-fact-checker", "task": "Check every claim.",
                          "context": {"research": research["result"], "draft": draft}}))
lines = []
if writer["state"] == "delivered" and checker["state"] == "delivered":
    status = "success" if checker.get("status") == "success" else "partial"
    lines += [str(writer["result"]), "", f"Fact check ({checker.get('status')}): {json.dumps(checker['result'])}"]
else:
    status = "partial"
    lines += ["Raw research (no article was written):", json.dumps(research["result"], indent=2)]
    if checker["state"] == "delivered":
        lines += ["", f"Fact check of the research: {json.dumps(checker['result'])}"]
    missing = [f"{w['worker']} ({w['state']}: {w.get('note') or w.get('error')})"
               for w in (writer, checker) if w["state"] != "delivered"]
    lines += ["", "Missing: " + "; ".join(missing)]
say("Report and close.", ("report", {"status": status, "text": "\n".join(lines)}), ("close_mission", {}))
