"""Shared by the wrong-thing sample workers: count this job's runs in out/.<name>.count and say
whether this one is the run that does the wrong thing (every WRONG_EVERY-th run, default 8)."""
import os


def wrong_this_time(name: str) -> bool:
    os.makedirs("out", exist_ok=True)
    path = f"out/.{name}.count"
    try:
        with open(path) as fh:
            n = int(fh.read().strip() or 0) + 1
    except (OSError, ValueError):
        n = 1
    with open(path, "w") as fh:
        fh.write(str(n))
    return n % int(os.environ.get("WRONG_EVERY", "8")) == 0
