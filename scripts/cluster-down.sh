#!/usr/bin/env bash
# Stop the nodes started by scripts/cluster-up.sh (the latest cluster, or the dir given).
set -euo pipefail
dir="${1:-$(cat /tmp/hotrule-cluster.current 2>/dev/null || true)}"
[[ -n "$dir" && -d "$dir" ]] || { echo "no cluster dir (pass one, or run cluster-up.sh first)" >&2; exit 1; }
for pidfile in "$dir"/n*.pid; do
  [[ -e "$pidfile" ]] || continue
  pid="$(cat "$pidfile")"
  kill "$pid" 2>/dev/null || true
done
for pidfile in "$dir"/n*.pid; do
  [[ -e "$pidfile" ]] || continue
  pid="$(cat "$pidfile")"
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidfile"
done
echo "stopped; data and logs kept in $dir (rm -rf it when done)"
