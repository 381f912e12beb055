#!/usr/bin/env bash
# A TLS-only cluster across "hosts": network namespaces joined by veth pairs
# through a bridge in a namespace of its own (no test traffic touches the
# machine's own stack). Certificates come from `troupe certs`; no process has a
# secret. Needs root and iproute2; without them it skips (exit 77, ctest's
# SKIP_RETURN_CODE) and says why.
#
#   tests/apps/netns/netns_tls_test.sh TROUPE_BIN MODEL.gguf
#
# Checks:
#   - TP=2 over two TLS nodes in two namespaces (collectives over TLS between them, with
#     the world secret the head sends over the node links inside) gives the greedy output
#     of one process;
#   - a node whose certificate is of another CA is refused by the head before anything
#     is spawned on it, and a head whose certificate is of another CA by a node, each
#     with a log line on both sides.
# Every namespace (and with it every veth and the bridge) is removed on exit.
set -uo pipefail
troupe=${1:?usage: netns_tls_test.sh TROUPE_BIN MODEL.gguf}
model=${2:?usage: netns_tls_test.sh TROUPE_BIN MODEL.gguf}

skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "network namespaces need root"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"

tag=tt$$                      # namespace names: tt<pid>sw, tt<pid>h0 ...
sw=${tag}sw
work=$(mktemp -d)
hosts=()
failures=0
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for f in "$work"/*.pid; do [[ -s $f ]] && kill -9 "$(<"$f")" 2>/dev/null; done
  wait 2>/dev/null
  for h in "${hosts[@]}"; do ip netns del "$h" 2>/dev/null; done
  ip netns del "$sw" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else fail "$what"; fi
}

ip netns add "$sw" || skip "cannot create a network namespace (ip netns add failed)"
ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || skip "cannot create a bridge"
add_host() {  # add_host N: namespace tt<pid>hN, address 10.232.0.(N+1), its link vN on the bridge
  local n=$1 h=${tag}h$1
  ip netns add "$h" || return 1
  hosts+=("$h")
  ip link add "v$n" netns "$sw" type veth peer name eth0 netns "$h" || return 1
  ip -n "$sw" link set "v$n" master br0 && ip -n "$sw" link set "v$n" up || return 1
  ip -n "$h" addr add "10.232.0.$((n + 1))/24" dev eth0 && ip -n "$h" link set eth0 up && ip -n "$h" link set lo up
}
for n in 0 1 2 3; do add_host "$n" || skip "cannot create veth pairs between namespaces"; done
addr() { echo "10.232.0.$(($1 + 1))"; }
in_host() { local n=$1; shift; ip netns exec "${tag}h$n" "$@"; }

# Cluster A: the head (host 0) and nodes 1, 2, 3. Cluster B: another CA, same host names.
"$troupe" certs --out "$work/a" --hosts "$(addr 0),$(addr 1),$(addr 2),$(addr 3)" >/dev/null || {
  echo "troupe certs failed"; exit 1; }
"$troupe" certs --out "$work/b" --hosts "$(addr 3)" >/dev/null || { echo "troupe certs failed"; exit 1; }
tls() {  # tls CLUSTER N: the TLS flags of host N in CLUSTER
  local d=$work/$1 a; a=$(addr "$2")
  echo "--tls-cert $d/$a.pem --tls-key $d/$a-key.pem --tls-ca $d/ca.pem"
}
prompts=$work/prompts
printf 'Once upon a time\nThe little dog\nLily and Tom went to\n' > "$prompts"

start_node() {  # start_node N FLAGS...: `troupe node` in host N on port 7200
  local n=$1; shift
  local log=$work/node$n.log pidf=$work/node$n.pid
  # shellcheck disable=SC2068
  in_host "$n" bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidf" \
    env -u TROUPE_CPU_COMM -u TROUPE_CLUSTER_SECRET_FILE TROUPE_LINK_HANDSHAKE_TIMEOUT_S=3 \
    "$troupe" node --host "$(addr "$n")" --port 7200 $@ >"$log" 2>&1 &
  for _ in $(seq 1 300); do
    if [[ -s $pidf ]] && grep -q "listening" "$log"; then pids+=("$(<"$pidf")"); return 0; fi
    [[ -s $pidf ]] && ! kill -0 "$(<"$pidf")" 2>/dev/null && break
    sleep 0.1
  done
  echo "node $n did not start:"; cat "$log"; return 1
}
gen() {  # gen ARGS...: troupe generate in host 0
  # shellcheck disable=SC2068
  in_host 0 env -u TROUPE_CPU_COMM -u TROUPE_CLUSTER_SECRET_FILE "$troupe" generate "$model" \
    --prompts-file "$prompts" -n 24 --threads 1 $@
}

# shellcheck disable=SC2046
start_node 1 $(tls a 1) && start_node 2 $(tls a 2) || { echo "nodes did not start"; exit 1; }

echo "== TLS-only TP=2 across namespaces"
one=$(gen 2>"$work/one.err") || { cat "$work/one.err"; fail "one process"; }
# shellcheck disable=SC2046
two=$(gen --tensor-parallel-size 2 --nodes "$(addr 1):7200,$(addr 2):7200" $(tls a 0) 2>"$work/two.err")
rc=$?
check "TP=2 over TLS exits 0" test "$rc" = 0 || cat "$work/two.err"
check "TP=2 over TLS gives the output of one process" test -n "$one" -a "$two" = "$one"
check "the ranks meet over TCP between the namespaces" grep -q "ranks meet through communicator cpu-tcp:$(addr 1):" \
  "$work/two.err"
check "the collectives prove a fresh world secret" grep -q "fresh world secret" "$work/two.err"
check "node 1 accepted the head" grep -q "node accepted a peer" "$work/node1.log"
check "the collectives between the namespaces run over TLS" grep -q "connected to 1 rank(s) over TLS" "$work/node1.log"

echo "== a node with a certificate of another CA"
# Its certificate is of CA B (it trusts CA A, whose certificate is no secret).
start_node 3 --tls-cert "$work/b/$(addr 3).pem" --tls-key "$work/b/$(addr 3)-key.pem" --tls-ca "$work/a/ca.pem" ||
  fail "node 3 starts"
# shellcheck disable=SC2046
gen --nodes "$(addr 3):7200" $(tls a 0) >/dev/null 2>"$work/other_ca.err"
rc=$?
check "the head refuses it (exit 1)" test "$rc" = 1
check "the head says why" grep -q "certificate verify failed" "$work/other_ca.err"
check "the node logs the refusal" grep -q "TLS handshake failed" "$work/node3.log"
check "nothing was spawned on it" bash -c "! grep -q 'CPU worker\|llama model' '$work/node3.log'"
# A head with a certificate of CA B is refused by a node of cluster A.
# shellcheck disable=SC2046
gen --nodes "$(addr 1):7200" --tls-cert "$work/b/$(addr 3).pem" --tls-key "$work/b/$(addr 3)-key.pem" \
  --tls-ca "$work/a/ca.pem" >/dev/null 2>"$work/intruder.err"
rc=$?
check "a head of another CA is refused (exit 1)" test "$rc" = 1
check "it hears the node's refusal" grep -q "refused the TLS connection" "$work/intruder.err"
check "node 1 logs the refusal" grep -q "refused a peer" "$work/node1.log"

if ((failures > 0)); then
  echo "$failures check(s) failed; logs:"
  for f in "$work"/*.log "$work"/*.err; do echo "--- $f"; tail -30 "$f"; done
  exit 1
fi
echo "all checks passed"
