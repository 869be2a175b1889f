"""Hangs far past any sane timeout."""
import time

print("exporting...", flush=True)
time.sleep(3600)
