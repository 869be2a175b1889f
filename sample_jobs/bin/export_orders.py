"""Exports orders to out/orders.csv. Every WRONG_EVERY-th run the upstream API answers 200 with
an empty page (a classic postmortem: the job "succeeds" and exports nothing)."""
import random
import time

from run_count import wrong_this_time

empty = wrong_this_time("orders-export")
rows = 0 if empty else random.randint(12_000, 16_000)
print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} fetching orders updated since yesterday")
with open("out/orders.csv", "w") as fh:
    fh.write("order_id,amount_cents\n")
    for i in range(rows):
        fh.write(f"{100000 + i},{random.randint(100, 99999)}\n")
print(f"exported {rows} rows to out/orders.csv")
