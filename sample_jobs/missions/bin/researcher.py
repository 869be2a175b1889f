"""Scripted stand-in for the researcher agent (no API key): facts with sources, as a handoff."""
import json
import os
import time

inp = json.load(open(os.environ["WATCHKEEPER_MISSION_INPUT"])) if os.environ.get("WATCHKEEPER_MISSION_INPUT") else {}
time.sleep(1.0)  # a little work, so the console shows it running
facts = [
    {"fact": "Tides are caused mainly by the Moon's gravity, with the Sun adding about half as much.",
     "source": "NOAA, Tides and Water Levels"},
    {"fact": "Two bulges form: one facing the Moon, one on the far side, so most coasts get two high tides a day.",
     "source": "NOAA, Tides and Water Levels"},
    {"fact": "A lunar day is about 24 h 50 min, so high tide comes about 50 minutes later each day.",
     "source": "UK Hydrographic Office"},
]
print(f"researched {len(facts)} facts for: {inp.get('goal', '?')[:80]}")
json.dump({"status": "success", "result": facts, "confidence": 0.86, "steps_used": 3, "error": None,
           "notes": f"{len(facts)} facts, each with a source"}, open(os.environ["WATCHKEEPER_HANDOFF"], "w"))
