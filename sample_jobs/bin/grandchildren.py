"""Starts two levels of children that hold the output pipe, then hangs."""
import subprocess
import sys
import time

code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)']); time.sleep(3600)"
for _ in range(3):
    subprocess.Popen([sys.executable, "-c", code])
print("crawlers started", flush=True)
time.sleep(3600)
