"""Interactive list-append through the gRPC API: optimistic transactions whose writes depend
on their reads, with a history for Elle.

    python3 clients/python/append_interactive.py --run-dir run --duration 20 --history h.jsonl
    redt workload check append --cluster CONFIG --run-dir run --history h.jsonl

Each transaction reads 1 to 3 lists with a versioned read (no locks), then appends a fresh
value to the shortest list it read (and, one time in three, to a random other key too), and
commits one transaction of a ``check`` of every version read and the appends. A ``stale_read``
abort is a failed transaction; the client goes on with a new one. The history is Jepsen's
JSON lines (``invoke``, then ``ok``, ``fail`` or ``info``), the reads as the versioned read
returned them: a committed transaction's checks prove that is what it read at its commit.
A transaction is invoked, in the history, when its commit is sent: it takes effect at its
commit, where its checks hold what it read. ``redt workload init append`` must have run on
the cluster (the check reads its table).
"""

import argparse
import json
import random
import sys
import threading
import time

from redt_client import Aborted, Cluster, OutcomeUnknown, pb

LIST_TAG = 3


def items(value):
    """The u64 items of a list value (trailing zero bytes dropped on the wire)."""
    if not value or value[0] != LIST_TAG:
        return []
    v = value.ljust(5, b"\0")
    n = int.from_bytes(v[1:5], "little")
    v = value.ljust(5 + 8 * n, b"\0")
    return [int.from_bytes(v[5 + 8 * i: 13 + 8 * i], "little") for i in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--table", default="kv")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--keys", type=int, default=20, help="keys in use at a time")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--max-writes-per-key", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--history", required=True)
    a = ap.parse_args()

    c = Cluster.from_run_dir(a.run_dir, retries=3)
    base = (1 << 41) + (int(time.time()) % 100_000) * 1_000_000  # fresh keys for each run
    lock = threading.Lock()
    counts = {"ok": 0, "fail": 0, "info": 0}
    causes = {}
    history = []
    state = {"next_value": 0, "next_key": a.keys, "writes": {}}
    active = [base + i for i in range(a.keys)]
    start = time.monotonic()
    deadline = start + a.duration

    def now_ns():
        return int((time.monotonic() - start) * 1e9)

    def fresh_value(k):
        state["next_value"] += 1
        state["writes"][k] = state["writes"].get(k, 0) + 1
        if state["writes"][k] >= a.max_writes_per_key and k in active:
            active[active.index(k)] = base + state["next_key"]
            state["next_key"] += 1
        return state["next_value"]

    def client(process):
        rng = random.Random(a.seed * 1000 + process)
        while time.monotonic() < deadline:
            with lock:
                reads = rng.sample(active, rng.randint(1, 3))
            try:
                got = c.read(a.table, reads, prefer=process)
            except OutcomeUnknown:
                continue  # nothing was attempted
            lists = {v.key: items(v.value) for v in got}
            # The decision depends on what was read: the shortest list grows.
            target = min(reads, key=lambda k: (len(lists[k]), k))
            with lock:
                appends = [(target, fresh_value(target))]
                if rng.random() < 1 / 3:
                    other = rng.choice(active)
                    appends.append((other, fresh_value(other)))
                # The transaction takes effect at its commit, where its checks hold its reads:
                # it is invoked when the commit is sent.
                planned = [["r", k, None] for k in reads] + [["append", k, v] for k, v in appends]
                history.append({"type": "invoke", "f": "txn", "value": planned, "process": process, "time": now_ns()})
            commit = [c.check(v.key, v.version) for v in got] + [c.append(k, v) for k, v in appends]
            error = None
            try:
                c.run(a.table, commit, prefer=process)
                kind = "ok"
            except Aborted as e:
                kind, error = "fail", "%s: %s; attempts: %s" % (e.cause, e, " | ".join(e.attempts))
                with lock:
                    causes[e.cause] = causes.get(e.cause, 0) + 1
            except OutcomeUnknown as e:
                kind, error = "info", str(e)
            done = [["r", k, lists[k]] for k in reads] + [["append", k, v] for k, v in appends]
            event = {"type": kind, "f": "txn", "value": done if kind == "ok" else planned,
                     "process": process, "time": now_ns()}
            if error:
                event["error"] = error
            with lock:
                counts[kind] += 1
                history.append(event)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    total = sum(counts.values())
    with open(a.history, "w") as f:
        for i, e in enumerate(history):
            f.write(json.dumps({"index": i, **e}) + "\n")
    print(json.dumps({**counts, "fail_rate": round(counts["fail"] / max(total, 1), 3),
                      "ok_per_s": round(counts["ok"] / elapsed, 1), "causes": causes, "events": len(history)}))
    return 0 if counts["ok"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
