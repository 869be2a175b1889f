"""An agent-style worker: plans steps, writes a result file and a full handoff."""
import json
import os
import random
import subprocess
import sys
import time

max_steps = int(os.environ.get("WATCHKEEPER_MAX_STEPS", "10"))
tickets = [{"id": i, "title": t} for i, t in enumerate(["login fails", "invoice wrong", "slow page"], 1)]
commands = []
steps = 0
for t in tickets:
    steps += 1
    t["queue"] = "billing" if "invoice" in t["title"] else "web"
    time.sleep(0.1)
r = subprocess.run([sys.executable, "-c", "print('lint ok')"], capture_output=True, text=True)
commands.append({"cmd": "python -c print('lint ok')", "exit_code": r.returncode})
steps += 1
os.makedirs("out", exist_ok=True)
with open("out/triage.json", "w") as fh:
    json.dump(tickets, fh)
handoff = {
    "status": "success", "result": {"triaged": len(tickets)}, "confidence": round(random.uniform(0.75, 0.95), 2),
    "steps_used": min(steps, max_steps), "error": None, "files_changed": ["out/triage.json"],
    "artifacts": ["out/triage.json"], "commands": commands, "blockers": [],
    "notes": f"triaged {len(tickets)} tickets", "exit_state": "done",
}
with open(os.environ["WATCHKEEPER_HANDOFF"], "w") as fh:
    json.dump(handoff, fh)
print(f"triaged {len(tickets)} tickets in {steps} steps")
