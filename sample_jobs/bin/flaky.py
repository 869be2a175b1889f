"""Fails with EX_TEMPFAIL (75) about half the time."""
import random
import sys
import time

time.sleep(0.3)
if random.random() < 0.5:
    print("mirror: connection reset by peer (temporary)", file=sys.stderr)
    sys.exit(75)
print("mirror synced: 42 objects")
