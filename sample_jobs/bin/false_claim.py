"""Claims a file it never wrote."""
import json
import os

with open(os.environ["WATCHKEEPER_HANDOFF"], "w") as fh:
    json.dump({"status": "success", "files_changed": ["out/invoice.pdf"], "confidence": 0.9,
               "notes": "invoice generated"}, fh)
print("invoice generated")
