#!/usr/bin/env bash
# Start N local hotrule nodes on 127.0.0.2 .. 127.0.0.(N+1), one cluster, with logs and data in a
# temp dir. Prints each node's admin URL. Stop them with scripts/cluster-down.sh.
#
#   scripts/cluster-up.sh 3                # uses ./target/release/hotrule (or $HOTRULE_BIN)
#   HOTRULE_SCAN_INTERVAL=5 scripts/cluster-up.sh 5
set -euo pipefail
n="${1:-3}"
[[ "$n" =~ ^[0-9]+$ ]] && (( n >= 1 && n <= 50 )) || { echo "usage: $0 N   (1..50 nodes)" >&2; exit 2; }
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${HOTRULE_BIN:-${CARGO_TARGET_DIR:-$here/target}/release/hotrule}"
[[ -x "$bin" ]] || { echo "no hotrule binary at $bin (cargo build --release, or set HOTRULE_BIN)" >&2; exit 1; }
dir="$(mktemp -d /tmp/hotrule-cluster.XXXXXX)"
echo "$dir" > /tmp/hotrule-cluster.current
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret"
chmod 600 "$dir/secret"
rules="${HOTRULE_RULES_DIR:-$here/config/rules}"
for i in $(seq 1 "$n"); do
  host="127.0.0.$((i + 1))"
  mkdir -p "$dir/n$i"
  "$bin" serve \
    --data-dir "$dir/n$i" \
    --admin-listen "$host:17128" \
    --gossip-listen "$host:17130" \
    --bus-listen "$host:17129" \
    --grpc-listen "$host:11800" \
    --seed "127.0.0.2:17130" \
    --cluster-secret-file "$dir/secret" \
    --rules-dir "$rules" \
    --scan-interval "${HOTRULE_SCAN_INTERVAL:-30}" \
    > "$dir/n$i.log" 2>&1 &
  echo "$!" > "$dir/n$i.pid"
done
for i in $(seq 1 "$n"); do
  host="127.0.0.$((i + 1))"
  for _ in $(seq 1 150); do
    if curl -fsS "http://$host:17128/readyz" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$(cat "$dir/n$i.pid")" 2>/dev/null; then echo "node $i exited; see $dir/n$i.log" >&2; exit 1; fi
    sleep 0.2
  done
  echo "node n$i: http://$host:17128   (log $dir/n$i.log)"
done
echo "cluster dir: $dir"
