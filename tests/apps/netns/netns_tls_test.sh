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

pids=()
# shellcheck source=netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"
netns_hosts tt 10.232.0 4   # namespaces tt<pid>sw, tt<pid>h0..h3 at 10.232.0.1..4

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
