"""Synthesis: reads every sub-task result as JSON on stdin, writes out/research.md."""
import json
import os
import sys

doc = json.load(sys.stdin)
os.makedirs("out", exist_ok=True)
with open("out/research.md", "w") as fh:
    fh.write(f"# Research ({len(doc['succeeded'])} of {len(doc['tasks'])} sources)\n")
    for t in doc["tasks"]:
        fh.write(f"- {t['task']}: {'ok' if t['ok'] else 'MISSING (' + str(t['state']) + ')'}\n")
print(f"synthesized from {', '.join(doc['succeeded'])}; missing: {', '.join(doc['failed']) or 'none'}")
