#!/usr/bin/env python3
"""Jepsen list-append through `redt client --jsonl`, with closed-loop clients.

Starts CLIENTS `redt client --jsonl` processes against a running cluster (all through one
coordinator node, `redt client`'s default, unless --node says otherwise), each submitting one
transaction at a time for DURATION seconds: 1 to 4 operations, half of them reads, over KEYS
integer keys at a time, every appended value unique; a key that took --max-writes-per-key
appends is retired for a fresh one (a list holds at most 255 items), as Jepsen's generator
does. Prints how the transactions ended (ok, fail,
info) and the fail rate, and writes the history in Elle's JSON-lines format to --history, for
`redt workload check append --history FILE` (which reads the lists back and checks it).

    scripts/jsonl-append.py --redt target/release/redt --cluster configs/local-fast.yaml \\
        --run-dir run --clients 8 --keys 30 --duration 15 --history h.jsonl
"""

import argparse
import json
import random
import subprocess
import sys
import threading
import time


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--redt", default="redt", help="the redt binary")
    p.add_argument("--cluster", required=True, help="topology file of the running cluster")
    p.add_argument("--run-dir", default="run", help="its run directory (certificates)")
    p.add_argument("--node", help="coordinator node name (default: redt client's, the first node)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--keys", type=int, default=30)
    p.add_argument("--duration", type=float, default=15.0, help="seconds")
    p.add_argument("--max-writes-per-key", type=int, default=128)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--history", help="write the history here")
    a = p.parse_args()

    lock = threading.Lock()
    counts = {"ok": 0, "fail": 0, "info": 0}
    history = []
    next_value = [0]
    active = list(range(a.keys))
    writes = {}
    next_key = [a.keys]
    start = time.monotonic()
    deadline = start + a.duration

    def now_ns():
        return int((time.monotonic() - start) * 1e9)

    def client(process):
        rng = random.Random(a.seed * 1000 + process)
        cmd = [a.redt, "client", "--jsonl", "--cluster", a.cluster, "--run-dir", a.run_dir]
        if a.node:
            cmd += ["--node", a.node]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        while time.monotonic() < deadline:
            ops = []
            for _ in range(rng.randint(1, 4)):
                slot = rng.randrange(a.keys)
                with lock:
                    k = active[slot]
                    if rng.random() < 0.5:
                        ops.append(["r", k, None])
                        continue
                    next_value[0] += 1
                    v = next_value[0]
                    writes[k] = writes.get(k, 0) + 1
                    if writes[k] >= a.max_writes_per_key:
                        active[slot] = next_key[0]
                        next_key[0] += 1
                ops.append(["append", k, v])
            with lock:
                history.append({"type": "invoke", "f": "txn", "value": ops, "process": process, "time": now_ns()})
            proc.stdin.write(json.dumps({"value": ops}) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line:
                sys.exit(f"client {process}: redt client ended early (exit {proc.poll()})")
            answer = json.loads(line)
            kind = answer.get("type", "info")
            value = answer.get("value", ops) if kind == "ok" else ops
            if kind == "ok":
                # A key nothing was appended to reads as missing: its list is empty.
                value = [["r", k, []] if f == "r" and v is None else [f, k, v] for f, k, v in value]
            with lock:
                counts[kind] = counts.get(kind, 0) + 1
                history.append({"type": kind, "f": "txn", "value": value, "process": process, "time": now_ns()})
        proc.stdin.close()
        proc.wait()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    total = sum(counts.values())
    print(f"{a.clients} clients, {a.keys} keys, {elapsed:.1f} s: {total} transactions, "
          f"{counts['ok']} ok, {counts['fail']} fail, {counts['info']} info; "
          f"fail rate {counts['fail'] / max(total, 1):.3f}; {counts['ok'] / elapsed:.1f} ok/s")
    if a.history:
        with open(a.history, "w") as f:
            for i, e in enumerate(history):
                f.write(json.dumps({"index": i, **e}) + "\n")


if __name__ == "__main__":
    main()
