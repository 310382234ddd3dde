#!/usr/bin/env bash
# A kill/restart drill on real node processes: YCSB through `redt bench ycsb
# --cluster` while one node process is killed with SIGKILL and later started again on its
# MemStore file. Prints the bench's JSON summary of a run without the kill and of one with it.
#
#   scripts/kill-restart.sh [CONFIG] [NODE] [KILL_AT_S] [RESTART_AFTER_S] [DURATION_S]
#
# Defaults: configs/local-fast.yaml, dc3-n1, 8, 3, 20. Needs a release build
# (target/release/redt); run it in its own network namespace so no other process holds the
# ports: unshare -n sh -c 'ip link set lo up; scripts/kill-restart.sh'.
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-configs/local-fast.yaml}
node=${2:-dc3-n1}
kill_at=${3:-8}
restart_after=${4:-3}
duration=${5:-20}
redt=target/release/redt
# The nodes log each recovery at info level; the summary at the end counts them.
export RUST_LOG=${RUST_LOG:-redt_coordinator=info}
run=$(mktemp -d /tmp/redt-drill.XXXXXX)
shm=$(mktemp -d /dev/shm/redt-drill.XXXXXX)
trap '$redt cluster down --run-dir "$run" --wipe >/dev/null 2>&1 || true; rm -rf "$run" "$shm"' EXIT

summary() {
  python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
keys = ["committed", "aborted", "unknown", "committed_per_s", "abort_rate"]
out = {k: d[k] for k in keys if k in d}
out["latency_ms"] = d.get("latency_ms")
print(json.dumps(out))'
}

bench() {
  $redt bench ycsb --cluster "$config" --certs "$run/certs" --records-per-partition 2000 --warmup 2s \
    --duration "${duration}s" --json 2>/dev/null
}

$redt cluster up --config "$config" --run-dir "$run" --shm-dir "$shm" --records-per-partition 2000 >/dev/null
echo "== no kill ($duration s)"
bench | summary

echo "== kill -9 $node at ${kill_at}s of the measured run, restart ${restart_after}s later"
bench > "$run/with-kill.json" &
bench_pid=$!
sleep $((2 + kill_at))
pid=$(cat "$run/pids/$node.pid")
kill -KILL "$pid"
echo "killed $node (pid $pid) at $(date +%T.%N | cut -c1-12)"
sleep "$restart_after"
$redt node --node "$node" --config "$config" --certs "$run/certs" --shm-dir "$shm" \
  --records-per-partition 2000 >"$run/logs/$node-restart.log" 2>&1 &
echo $! > "$run/pids/$node.pid"
until grep -q " ready on " "$run/logs/$node-restart.log"; do sleep 0.1; done
echo "restarted $node at $(date +%T.%N | cut -c1-12)"
wait "$bench_pid"
summary < "$run/with-kill.json"
echo "== recoveries in the node logs"
grep -h "recovery ends" "$run"/logs/*.log | sed 's/\x1b\[[0-9;]*m//g' | grep -o "outcome=[A-Za-z]*" | sort | uniq -c || true
