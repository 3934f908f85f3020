#!/usr/bin/env bash
# Real network partitions for a local hotrule cluster: one network namespace per node, veths on a
# bridge in the root namespace, and iptables DROP rules inside the namespaces to cut links.
#
#   scripts/partition.sh up N BIN DIR   start N nodes (hr-n1..hr-nN, 10.213.0.11..) from BIN;
#                                       secret, token, data, logs and pids go in DIR
#   scripts/partition.sh cut A B        drop all traffic between nodes A and B, both directions
#   scripts/partition.sh heal A B       remove exactly the rules `cut A B` added
#   scripts/partition.sh isolate A      cut A from every other node
#   scripts/partition.sh heal-all       remove every cut
#   scripts/partition.sh status         namespaces, addresses, cuts and processes
#   scripts/partition.sh down [DIR]     stop the nodes, delete namespaces, veths and bridge
#                                       (idempotent)
#
# A cut is a DROP rule for the other node's address in the chain HR-PART (hooked in INPUT) of
# each of the two namespaces, so heal removes exactly it; the host (10.213.0.1) is never cut.
# Needs root, iproute2 and iptables. Traffic stays on 10.213.0.0/24: the bridge hrbr0 holds
# 10.213.0.1/24 in the root namespace (so the host reaches every admin port), each node holds
# 10.213.0.(10+i)/24; no other route, no forwarding, no NAT. Node i serves admin on
# 10.213.0.(10+i):17128 (bearer token in DIR/token), the bus on :17129 and gossip on :17130,
# seeded with node 1. Environment: HOTRULE_SCAN_INTERVAL (default 2), HOTRULE_SELF_HEAL_THRESHOLD
# (default 4), HOTRULE_RULES_DIR (default: none, no bundled rules), HOTRULE_LOG, HOTRULE_SERVE_ARGS
# (more `serve` arguments, split on spaces, e.g. "--set rolling.tick=500ms").
#
#   scripts/partition.sh up 3 target/release/hotrule /tmp/hr-part
#   curl -H "Authorization: Bearer $(cat /tmp/hr-part/token)" http://10.213.0.12:17128/cluster/status
#   scripts/partition.sh isolate 3; scripts/partition.sh heal-all; scripts/partition.sh down /tmp/hr-part
set -euo pipefail

BRIDGE=hrbr0
NET=10.213.0
CHAIN=HR-PART
MAX_NODES=20
UP_DIR=""

usage() {
  echo "usage:" >&2
  sed -n '5,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

die() { echo "partition.sh: $*" >&2; exit 1; }

need_tools() {
  (( EUID == 0 )) || die "must run as root (network namespaces, veths, iptables)"
  command -v ip >/dev/null || die "ip not found (apt-get install -y iproute2)"
  [[ "${1:-}" == no-iptables ]] || command -v iptables >/dev/null || die "iptables not found (apt-get install -y iptables)"
}

ns() { echo "hr-n$1"; }
ip_of() { echo "$NET.$((10 + $1))"; }

# Node numbers of the namespaces that exist now, ascending.
nodes() {
  ip netns list 2>/dev/null | awk '{print $1}' | sed -n 's/^hr-n\([0-9]\{1,2\}\)$/\1/p' | sort -n
}

check_node() {
  [[ "$1" =~ ^[0-9]+$ ]] || die "node must be a number, got '$1'"
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$(ns "$1")" || die "no namespace $(ns "$1") (is the cluster up?)"
}

ipt() { local n="$1"; shift; ip netns exec "$(ns "$n")" iptables -w 5 "$@"; }

# The chain that holds the cuts, hooked first in INPUT of node n's namespace. Cuts drop on
# receipt only: the sender's packets leave and vanish, as on a real broken network (an OUTPUT
# DROP would fail the sender's send() at once with EPERM, which no real partition does).
ensure_chain() {
  local n="$1"
  ipt "$n" -n -L "$CHAIN" >/dev/null 2>&1 || ipt "$n" -N "$CHAIN"
  ipt "$n" -C INPUT -j "$CHAIN" 2>/dev/null || ipt "$n" -I INPUT 1 -j "$CHAIN"
}

# Inside node a's namespace, drop everything that arrives from node b.
cut_one_side() {
  local a="$1" b="$2" peer
  peer="$(ip_of "$b")"
  ensure_chain "$a"
  ipt "$a" -C "$CHAIN" -s "$peer" -j DROP 2>/dev/null || ipt "$a" -A "$CHAIN" -s "$peer" -j DROP
}

heal_one_side() {
  local a="$1" b="$2" peer _
  peer="$(ip_of "$b")"
  ipt "$a" -n -L "$CHAIN" >/dev/null 2>&1 || return 0
  for _ in $(seq 1 10); do
    ipt "$a" -C "$CHAIN" -s "$peer" -j DROP 2>/dev/null || break
    ipt "$a" -D "$CHAIN" -s "$peer" -j DROP
  done
}

cmd_cut() {
  local a="$1" b="$2"
  check_node "$a"; check_node "$b"
  [[ "$a" != "$b" ]] || die "cannot cut node $a from itself"
  cut_one_side "$a" "$b"
  cut_one_side "$b" "$a"
  echo "cut $a <-> $b"
}

cmd_heal() {
  local a="$1" b="$2"
  check_node "$a"; check_node "$b"
  heal_one_side "$a" "$b"
  heal_one_side "$b" "$a"
  echo "healed $a <-> $b"
}

cmd_isolate() {
  local a="$1" b
  check_node "$a"
  for b in $(nodes); do
    [[ "$b" == "$a" ]] || { cut_one_side "$a" "$b"; cut_one_side "$b" "$a"; }
  done
  echo "isolated $a"
}

cmd_heal_all() {
  local n
  for n in $(nodes); do
    if ipt "$n" -n -L "$CHAIN" >/dev/null 2>&1; then ipt "$n" -F "$CHAIN"; fi
  done
  echo "healed all"
}

cmd_status() {
  echo "bridge:"
  ip -br -4 addr show dev "$BRIDGE" 2>/dev/null || echo "  (no $BRIDGE)"
  local n any=0
  for n in $(nodes); do
    any=1
    echo "$(ns "$n"):"
    ip -n "$(ns "$n")" -br -4 addr show | sed 's/^/  /'
    echo "  processes: $(ip netns pids "$(ns "$n")" 2>/dev/null | tr '\n' ' ')"
    if ipt "$n" -n -L "$CHAIN" >/dev/null 2>&1; then
      ipt "$n" -S "$CHAIN" | sed -n "s/^-A $CHAIN /  cut: /p"
    fi
  done
  (( any )) || echo "no hr-n* namespaces"
}

# Sends TERM to the given pids, waits up to 5 s, then KILLs the survivors.
stop_pids() {
  local pids=("$@") pid _ alive
  (( ${#pids[@]} )) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do
    alive=0
    for pid in "${pids[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then alive=1; fi
    done
    (( alive )) || return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

cmd_down() {
  local dir="${1:-}" n pids=() pid f bin
  # Processes running inside our namespaces.
  for n in $(nodes); do
    while read -r pid; do
      if [[ -n "$pid" ]]; then pids+=("$pid"); fi
    done < <(ip netns pids "$(ns "$n")" 2>/dev/null || true)
  done
  # Processes recorded in DIR that still run BIN (a namespace already deleted by hand, say).
  if [[ -n "$dir" && -f "$dir/bin" ]]; then
    bin="$(cat "$dir/bin")"
    for f in "$dir"/n*.pid; do
      [[ -f "$f" ]] || continue
      pid="$(cat "$f")"
      [[ "$pid" =~ ^[0-9]+$ ]] || continue
      if [[ "$(readlink -f "/proc/$pid/exe" 2>/dev/null || true)" == "$bin" ]]; then pids+=("$pid"); fi
    done
  fi
  stop_pids "${pids[@]}"
  for n in $(nodes); do ip netns del "$(ns "$n")" 2>/dev/null || true; done
  for n in $(seq 1 "$MAX_NODES"); do
    if ip link show "hr-v$n" >/dev/null 2>&1; then ip link del "hr-v$n" 2>/dev/null || true; fi
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE" 2>/dev/null || true; fi
  if [[ -n "$dir" ]]; then rm -f "$dir"/n*.pid; fi
  echo "down"
}

random_hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

cmd_up() {
  local n="$1" bin="$2" dir="$3" i
  [[ "$n" =~ ^[0-9]+$ ]] && (( n >= 1 && n <= MAX_NODES )) || die "N must be 1..$MAX_NODES, got '$n'"
  [[ -x "$bin" && -f "$bin" ]] || die "no executable hotrule binary at '$bin'"
  bin="$(readlink -f "$bin")"
  if ip link show "$BRIDGE" >/dev/null 2>&1 || [[ -n "$(nodes)" ]]; then
    die "a partition cluster is already up ($BRIDGE or hr-n* exists); run: $0 down [DIR]"
  fi
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  # From here on, any failure tears down what was built.
  UP_DIR="$dir"
  trap 'rc=$?; if (( rc != 0 )); then echo "partition.sh: up failed; tearing down" >&2; cmd_down "$UP_DIR" >/dev/null 2>&1 || true; fi' EXIT

  echo "$bin" > "$dir/bin"
  ( umask 077; random_hex 32 > "$dir/secret"; random_hex 24 > "$dir/token" )
  local token rules scan heal
  token="$(cat "$dir/token")"
  rules="${HOTRULE_RULES_DIR:-$dir/no-bundled-rules}"
  scan="${HOTRULE_SCAN_INTERVAL:-2}"
  heal="${HOTRULE_SELF_HEAL_THRESHOLD:-4}"

  ip link add "$BRIDGE" type bridge
  echo 1 > "/proc/sys/net/ipv6/conf/$BRIDGE/disable_ipv6" 2>/dev/null || true
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for i in $(seq 1 "$n"); do
    local name; name="$(ns "$i")"
    ip netns add "$name"
    ip link add "hr-v$i" type veth peer name "hr-p$i"
    ip link set "hr-p$i" netns "$name"
    echo 1 > "/proc/sys/net/ipv6/conf/hr-v$i/disable_ipv6" 2>/dev/null || true
    ip link set "hr-v$i" master "$BRIDGE"
    ip link set "hr-v$i" up
    ip -n "$name" link set lo up
    ip -n "$name" addr add "$(ip_of "$i")/24" dev "hr-p$i"
    ip -n "$name" link set "hr-p$i" up
    ensure_chain "$i"
  done

  for i in $(seq 1 "$n"); do
    local host; host="$(ip_of "$i")"
    mkdir -p "$dir/n$i"
    ip netns exec "$(ns "$i")" env -u HOTRULE_CLUSTER_SECRET HOTRULE_ADMIN_TOKEN="$token" \
      "$bin" serve \
      --data-dir "$dir/n$i" \
      --admin-listen "$host:17128" \
      --gossip-listen "$host:17130" \
      --bus-listen "$host:17129" \
      --grpc-listen "$host:11800" \
      --seed "$(ip_of 1):17130" \
      --cluster-secret-file "$dir/secret" \
      --rules-dir "$rules" \
      --scan-interval "$scan" \
      --self-heal-threshold "$heal" \
      ${HOTRULE_SERVE_ARGS:-} \
      < /dev/null > "$dir/n$i.log" 2>&1 &
    echo "$!" > "$dir/n$i.pid"
  done

  local ready _
  for i in $(seq 1 "$n"); do
    local host; host="$(ip_of "$i")"
    ready=0
    for _ in $(seq 1 150); do
      if curl -fsS --noproxy '*' -m 2 -H "Authorization: Bearer $token" "http://$host:17128/readyz" >/dev/null 2>&1; then
        ready=1; break
      fi
      kill -0 "$(cat "$dir/n$i.pid")" 2>/dev/null || die "node $i exited; see $dir/n$i.log"
      sleep 0.2
    done
    (( ready )) || die "node $i not ready after 30 s; see $dir/n$i.log"
    echo "node n$i: http://$host:17128  ns $(ns "$i")  pid $(cat "$dir/n$i.pid")  log $dir/n$i.log"
  done
  echo "cluster dir: $dir (admin token in $dir/token)"
}

main() {
  (( $# >= 1 )) || usage
  local cmd="$1"; shift
  case "$cmd" in
    up)       (( $# == 3 )) || usage; need_tools; command -v curl >/dev/null || die "curl not found"; cmd_up "$@" ;;
    cut)      (( $# == 2 )) || usage; need_tools; cmd_cut "$@" ;;
    heal)     (( $# == 2 )) || usage; need_tools; cmd_heal "$@" ;;
    isolate)  (( $# == 1 )) || usage; need_tools; cmd_isolate "$@" ;;
    heal-all) (( $# == 0 )) || usage; need_tools; cmd_heal_all ;;
    status)   (( $# == 0 )) || usage; need_tools; cmd_status ;;
    down)     (( $# <= 1 )) || usage; need_tools no-iptables; cmd_down "$@" ;;
    -h|--help|help) usage ;;
    *) usage ;;
  esac
}

main "$@"
