"""Bank transfers through redt's gRPC API, checking that money is neither made nor lost.

    python3 clients/python/bank.py --run-dir run --accounts 8 --duration 20

Loads ``--accounts`` balances of ``--initial`` each (key ``--first-key`` on), runs
transfers (one transaction: ``Add(from, -x)``, ``Add(to, +x)``) from ``--clients`` threads for
``--duration`` seconds, then reads every balance in one transaction and checks the total.
Prints one JSON line of counts; exits 1 if the total changed. Meant to run while DCs fail
(see ``tests/python_client.rs``).
"""

import argparse
import json
import random
import struct
import sys
import threading
import time

from redt_client import Aborted, Cluster, OutcomeUnknown


def balance(result):
    """An account's balance from a ``Get``'s result (an i64, trailing zero bytes dropped)."""
    v = result.value
    return struct.unpack("<q", v.ljust(8, b"\0")[:8])[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--table", default="kv")
    ap.add_argument("--accounts", type=int, default=8)
    ap.add_argument("--first-key", type=int, default=1_000_000)
    ap.add_argument("--initial", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--progress", help="a file to write the committed count to, every 0.5 s")
    a = ap.parse_args()

    c = Cluster.from_run_dir(a.run_dir)
    keys = [a.first_key + i for i in range(a.accounts)]
    c.run(a.table, [c.put(k, struct.pack("<q", a.initial)) for k in keys])

    counts = {"committed": 0, "aborted": 0, "unknown": 0}
    lock = threading.Lock()
    stop = time.monotonic() + a.duration

    def client(n):
        rng = random.Random(n)
        while time.monotonic() < stop:
            src, dst = rng.sample(keys, 2)
            amount = rng.randint(1, 50)
            try:
                c.run(a.table, [c.add(src, -amount), c.add(dst, amount)], prefer=n)
                what = "committed"
            except Aborted:
                what = "aborted"
            except OutcomeUnknown:
                what = "unknown"
            with lock:
                counts[what] += 1

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(a.clients)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        time.sleep(0.5)
        if a.progress:
            with lock, open(a.progress, "w") as f:
                f.write(str(counts["committed"]))
    results = c.run(a.table, [c.get(k) for k in keys])
    total = sum(balance(r) for r in results)
    counts.update(total=total, expected=a.initial * a.accounts)
    print(json.dumps(counts), flush=True)
    if total != a.initial * a.accounts:
        print("the total changed: %d, expected %d" % (total, a.initial * a.accounts), file=sys.stderr)
        return 1
    if counts["unknown"]:
        print("%d transfers ended with an unknown outcome" % counts["unknown"], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
