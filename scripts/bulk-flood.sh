#!/usr/bin/env bash
# A legitimate client beside a flood of the largest calls: commits and p99 alone, then beside
# ATTACKERS clients that send calls of OPS reads back to back, all with the cluster's one
# client certificate; then each node's executor metrics. docs/design.md, "The executor
# thread: two lanes and a bulk share", reports its figures.
#
#   scripts/bulk-flood.sh [REDT] [SECONDS] [ATTACKERS] [OPS]
#
# Defaults: target/release/redt, 10, 8, 1024, on configs/local-fast.yaml. Run it in its own
# network namespace so no other process holds the ports:
#   unshare -n sh -c 'ip link set lo up; scripts/bulk-flood.sh'
set -euo pipefail
cd "$(dirname "$0")/.."
redt=$(realpath "${1:-target/release/redt}")
secs=${2:-10}
attackers=${3:-8}
ops=${4:-1024}
config=$(realpath configs/local-fast.yaml)
run=$(mktemp -d)
# A MemStore of its own in shared memory: every run starts from an empty store.
shm=$(mktemp -d -p /dev/shm redt-flood.XXXXXX)
trap '"$redt" cluster down --run-dir "$run/run" >/dev/null 2>&1 || true; rm -rf "$run" "$shm"' EXIT
"$redt" cluster up --config "$config" --run-dir "$run/run" --shm-dir "$shm" >"$run/up.log" 2>&1 || { cat "$run/up.log"; exit 1; }
python3 - "$redt" "$config" "$run/run/certs" "$secs" "$attackers" "$ops" <<'PY'
import json, subprocess, sys, threading, time
redt, config, certs, secs, attackers, ops = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
nodes = ["dc1-n1", "dc2-n1", "dc3-n1", "dc4-n1"]

def client(node):
    return subprocess.Popen([redt, "client", "--jsonl", "--cluster", config, "--certs", certs, "--node", node],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)

stop = threading.Event()
answered = [0]
def attacker(i):
    p, k = client(nodes[i % len(nodes)]), 0
    while not stop.is_set():
        reads = [["r", (k * ops + j) % 100000, None] for j in range(ops)]
        k += 1
        p.stdin.write(json.dumps({"type": "invoke", "f": "txn", "value": reads}) + "\n")
        p.stdin.flush()
        if not p.stdout.readline():
            break
        answered[0] += 1
    p.stdin.close()
    p.wait()

def legitimate(secs):
    p, lat, ok, other, i = client(nodes[0]), [], 0, 0, 0
    end = time.time() + secs
    while time.time() < end:
        i += 1
        t0 = time.time()
        p.stdin.write(json.dumps({"type": "invoke", "f": "txn", "value": [["append", 200000 + i % 2000, i], ["r", 8, None]]}) + "\n")
        p.stdin.flush()
        answer = json.loads(p.stdout.readline())
        if answer.get("type") == "ok":
            ok += 1
            lat.append((time.time() - t0) * 1000)
        else:
            other += 1
    p.stdin.close()
    p.wait()
    lat.sort()
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] if lat else float("nan")
    return ok, other, q(0.5), q(0.99)

alone = legitimate(secs)
print(f"alone: {alone[0]} committed, {alone[1]} not, p50 {alone[2]:.1f} ms, p99 {alone[3]:.1f} ms", flush=True)
threads = [threading.Thread(target=attacker, args=(i,)) for i in range(attackers)]
for t in threads:
    t.start()
time.sleep(1)
beside = legitimate(secs)
stop.set()
for t in threads:
    t.join()
print(f"beside {attackers} attackers of {ops}-read calls ({answered[0]} answered): {beside[0]} committed, "
      f"{beside[1]} not, p50 {beside[2]:.1f} ms, p99 {beside[3]:.1f} ms")
print(f"kept {beside[0] / max(alone[0], 1):.2f} of the commits; p99 {beside[3] / alone[3]:.2f}x")
PY
for ip in 127.0.1.1 127.0.2.1 127.0.3.1 127.0.4.1; do
  curl -s "http://$ip:7101/metrics" | grep -E '^redt_executor_(jobs|busy|longest)' || true
done
