#!/usr/bin/env bash
# `redt bench attack` on a fresh `redt cluster up` of configs/local-fast.yaml: a legitimate
# client alone, then beside each attack in turn (docs/security.md, "Attacks measured").
#
#   scripts/attacks.sh [REDT] [redt bench attack flags…]
#
# Default REDT: target/release/redt. Run it in its own network namespace so no other process
# holds the ports:
#   unshare -n sh -c 'ip link set lo up; scripts/attacks.sh'
set -euo pipefail
cd "$(dirname "$0")/.."
redt=$(realpath "${1:-target/release/redt}")
shift || true
config=$(realpath configs/local-fast.yaml)
run=$(mktemp -d)
# A MemStore of its own in shared memory: every run starts from an empty store.
shm=$(mktemp -d -p /dev/shm redt-attacks.XXXXXX)
trap '"$redt" cluster down --run-dir "$run/run" >/dev/null 2>&1 || true; rm -rf "$run" "$shm"' EXIT
"$redt" cluster up --config "$config" --run-dir "$run/run" --shm-dir "$shm" >"$run/up.log" 2>&1 || { cat "$run/up.log"; exit 1; }
"$redt" bench attack --run-dir "$run/run" "$@"
