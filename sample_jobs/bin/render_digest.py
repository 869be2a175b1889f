"""Renders the weekly digest to out/digest.html and claims it as an artifact. Every
WRONG_EVERY-th run the template engine writes nothing (a font/template package went missing),
and the worker still says success."""
import json
import os
import random

from run_count import wrong_this_time

broken = wrong_this_time("weekly-digest")
items = random.randint(18, 26)
with open("out/digest.html", "w") as fh:
    if not broken:
        fh.write("<html><body><h1>Weekly digest</h1>\n")
        for i in range(items):
            fh.write(f"<article><h2>Item {i + 1}</h2><p>{'lorem ipsum dolor sit amet ' * 6}</p></article>\n")
        fh.write("</body></html>\n")
handoff = {"status": "success", "result": {"items": items}, "confidence": 0.9,
           "artifacts": ["out/digest.html"], "notes": f"digest with {items} items rendered"}
with open(os.environ["WATCHKEEPER_HANDOFF"], "w") as fh:
    json.dump(handoff, fh)
print("digest rendered to out/digest.html")
