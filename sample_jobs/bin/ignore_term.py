"""Ignores SIGTERM; only SIGKILL ends it."""
import signal
import time

signal.signal(signal.SIGTERM, lambda *_: print("SIGTERM ignored", flush=True))
print("processing queue...", flush=True)
while True:
    time.sleep(0.2)
