# Sourced by the netns tests (netns_cluster_test.sh, netns_tls_test.sh): "hosts" as
# network namespaces joined by veth pairs through a bridge in a namespace of its own,
# so no test traffic touches the machine's own stack, and the helpers every case uses.
# Needs root and iproute2; without them the caller skips (exit 77, ctest's
# SKIP_RETURN_CODE) saying why. Everything made here is removed on exit.
#
# The caller declares `pids` (indexed or associative: processes to kill on exit) and
# then calls `netns_hosts PREFIX SUBNET N`, which sets tag, sw, work (a temporary
# folder), hosts and failures.

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else fail "$what"; fi
}

[[ $(id -u) == 0 ]] || skip "network namespaces need root"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"

netns_cleanup() {
  local p f h
  for p in ${pids[@]+"${pids[@]}"}; do kill -9 "$p" 2>/dev/null; done
  for f in "$work"/*.pid; do [[ -s $f ]] && kill -9 "$(<"$f")" 2>/dev/null; done
  wait 2>/dev/null
  for h in "${hosts[@]}"; do ip netns del "$h" 2>/dev/null; done
  ip netns del "$sw" 2>/dev/null
  rm -rf "$work"
}

# Namespaces PREFIX<pid>... left by an earlier run of PREFIX whose process is gone (killed
# by SIGKILL, which no trap sees): removed before this run makes its own.
netns_sweep_stale() {
  local prefix=$1 ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns =~ ^${prefix}([0-9]+)(sw|h[0-9]+)$ ]] || continue
    pid=${BASH_REMATCH[1]}
    [[ $pid != "$$" ]] && ! kill -0 "$pid" 2>/dev/null && ip netns del "$ns" 2>/dev/null
  done
  return 0
}

# netns_hosts PREFIX SUBNET N: namespaces PREFIX<pid>h0..h(N-1), host n at SUBNET.(n+1)/24
# on eth0, its link vn on the bridge br0 in namespace PREFIX<pid>sw.
netns_hosts() {
  tag=$1$$
  subnet=$2
  sw=${tag}sw
  work=$(mktemp -d)
  hosts=()
  failures=0
  # bash runs the EXIT trap on exit, not when a signal kills it (ctest's timeout, a
  # SIGTERM): those exit through it too.
  trap netns_cleanup EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  netns_sweep_stale "$1"
  ip netns add "$sw" || skip "cannot create a network namespace (ip netns add failed)"
  ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || skip "cannot create a bridge"
  local n h
  for ((n = 0; n < $3; n++)); do
    h=${tag}h$n
    ip netns add "$h" || skip "cannot create veth pairs between namespaces"
    hosts+=("$h")
    { ip link add "v$n" netns "$sw" type veth peer name eth0 netns "$h" &&
      ip -n "$sw" link set "v$n" master br0 && ip -n "$sw" link set "v$n" up &&
      ip -n "$h" addr add "$subnet.$((n + 1))/24" dev eth0 && ip -n "$h" link set eth0 up &&
      ip -n "$h" link set lo up; } || skip "cannot create veth pairs between namespaces"
  done
}

addr() { echo "$subnet.$(($1 + 1))"; }
in_host() { local n=$1; shift; ip netns exec "${tag}h$n" "$@"; }
