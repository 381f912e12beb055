#!/usr/bin/env bash
# Data parallel replicas on `troupe node`s in network namespaces, through one head:
# `troupe serve --data-parallel-size 2 --nodes H1,H2` in host 0, each replica's rank on
# a node of its own (hosts 1 and 2, reached with the cluster secret). Needs root and
# iproute2; without them it skips (exit 77) and says why.
#
#   tests/apps/netns/netns_dp_test.sh TROUPE_BIN MODEL.gguf
#
# Checks: greedy completions pinned to either replica (X-data-parallel-rank) and routed give
# the output of one process; kill -9 of host 2's node during two streams ends only the
# stream on replica 1, with an error naming replica 1 and its node, within 10 s, while the
# stream on replica 0 completes; /health stays 200 and names replica 1; unpinned requests
# all succeed meanwhile, a pin to replica 1 is a 503 naming it; the node restarted at its
# address brings replica 1 back by itself, with the same greedy output; /metrics labels
# both replicas (engine="0", engine="1").
set -uo pipefail
troupe=${1:?usage: netns_dp_test.sh TROUPE_BIN MODEL.gguf}
model=${2:?usage: netns_dp_test.sh TROUPE_BIN MODEL.gguf}

declare -A pids=()
starts=0
# shellcheck source=netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
netns_hosts td 10.232.0 3   # namespaces td<pid>sw, td<pid>h0..h2 at 10.232.0.1..3

secret=$work/secret
echo "netns-dp-$$-$RANDOM" >"$secret"
chmod 600 "$secret"
port=8100

start_node() {  # start_node N: `troupe node` in host N on port 7100
  local n=$1
  starts=$((starts + 1))
  local log=$work/node$n.$starts.log pidf=$work/node$n.$starts.pid
  unset "pids[node$n]"
  in_host "$n" bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidf" \
    "$troupe" node --host "$(addr "$n")" --port 7100 --secret-file "$secret" >"$log" 2>&1 &
  for _ in $(seq 1 300); do
    [[ -s $pidf ]] && pids[node$n]=$(<"$pidf")
    [[ -n ${pids[node$n]:-} ]] && grep -q "listening" "$log" && return 0
    sleep 0.1
  done
  echo "node $n did not start:"; cat "$log"; return 1
}
stop_node() {
  local p=${pids[node$1]:-}
  [[ -n $p ]] || return 0
  kill -9 "$p" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
}
start_serve() {  # start_serve ARGS...: troupe serve in host 0
  rm -f "$work/serve.pid"
  in_host 0 bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$work/serve.pid" \
    "$troupe" serve "$model" --host "$(addr 0)" --port "$port" --threads 1 --secret-file "$secret" \
    --disable-log-stats "$@" >"$work/serve.$port.log" 2>&1 &
  for _ in $(seq 1 100); do [[ -s $work/serve.pid ]] && break; sleep 0.05; done
  pids[serve]=$(<"$work/serve.pid")
  local deadline=$((SECONDS + 180))
  until [[ $(health) == 200 ]]; do
    if ((SECONDS >= deadline)) || ! kill -0 "${pids[serve]}" 2>/dev/null; then
      echo "serve did not become healthy:"; tail -30 "$work/serve.$port.log"; return 1
    fi
    sleep 0.2
  done
}
stop_serve() {
  local p=${pids[serve]:-}
  [[ -n $p ]] && kill -9 "$p" 2>/dev/null
  for _ in $(seq 1 100); do [[ -n $p ]] && kill -0 "$p" 2>/dev/null && sleep 0.05; done
  unset "pids[serve]"
}
health() { in_host 0 curl -s -o "$work/health.body" -w '%{http_code}' --max-time 5 "http://$(addr 0):$port/health"; }
complete() {  # complete [REPLICA]: greedy text, pinned to REPLICA when given ("" on failure)
  local -a pin=()
  [[ -n ${1:-} ]] && pin=(-H "X-data-parallel-rank: $1")
  in_host 0 curl -s --max-time 60 "http://$(addr 0):$port/v1/completions" -H 'Content-Type: application/json' \
    "${pin[@]}" -d '{"prompt":"Once upon a time","max_tokens":16,"temperature":0}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])' 2>/dev/null
}
status_of() {  # status_of REPLICA: the HTTP status of a pinned completion (its body in $work/pinned)
  in_host 0 curl -s -o "$work/pinned" -w '%{http_code}' --max-time 60 "http://$(addr 0):$port/v1/completions" \
    -H 'Content-Type: application/json' -H "X-data-parallel-rank: $1" \
    -d '{"prompt":"Once upon a time","max_tokens":4,"temperature":0}'
}
stream_to() {  # stream_to REPLICA FILE: a long stream pinned to REPLICA, in the background
  in_host 0 curl -sN --max-time 120 "http://$(addr 0):$port/v1/completions" -H 'Content-Type: application/json' \
    -H "X-data-parallel-rank: $1" \
    -d '{"prompt":"Once upon a time","max_tokens":1500,"ignore_eos":true,"temperature":0,"stream":true}' \
    >"$2" 2>/dev/null &
}

# One process: the reference output.
start_serve || { fail "one process serves"; exit 1; }
one=$(complete)
[[ -n $one ]] || fail "one process completes"
stop_serve

start_node 1 && start_node 2 || { fail "nodes start"; exit 1; }
start_serve --data-parallel-size 2 --nodes "$(addr 1):7100,$(addr 2):7100" || { fail "two replicas serve"; exit 1; }
check "replica 0 gives the output of one process" test "$(complete 0)" = "$one"
check "replica 1 gives the output of one process" test "$(complete 1)" = "$one"
check "a routed request gives the output of one process" test "$(complete)" = "$one"
metrics=$(in_host 0 curl -s --max-time 5 "http://$(addr 0):$port/metrics")
check "/metrics labels replica 0" grep -q 'vllm:num_requests_running{engine="0"' <<<"$metrics"
check "/metrics labels replica 1" grep -q 'vllm:num_requests_running{engine="1"' <<<"$metrics"
check "replica 1's rank runs on host 2" grep -q "connected to node $(addr 2):7100" "$work/serve.$port.log"

# Kill host 2's node while a stream runs on each replica.
stream_to 0 "$work/stream0"
s0=$!
stream_to 1 "$work/stream1"
s1=$!
for _ in $(seq 1 600); do grep -q '^data: {' "$work/stream1" && break; sleep 0.05; done
t0=$SECONDS
stop_node 2
wait "$s1"
took=$((SECONDS - t0))
check "replica 1's stream ends with an error" grep -q '"error"' "$work/stream1"
check "the error names replica 1" grep -q 'replica 1' "$work/stream1"
check "the error names its node" grep -qF "$(addr 2)" "$work/stream1"
check "within 10 s (took $took s)" test "$took" -lt 10
grep -q '"error"' "$work/stream1" || tail -c 400 "$work/stream1"
wait "$s0"
check "replica 0's stream completes" grep -q '\[DONE\]' "$work/stream0"
check "replica 0's stream has no error" bash -c "! grep -q '\"error\"' '$work/stream0'"
code=$(health)
check "/health stays 200 (got $code)" test "$code" = 200
check "/health names replica 1" grep -q '"replica":1' "$work/health.body"
ok=0
for _ in 1 2 3 4 5 6; do [[ $(complete) == "$one" ]] && ok=$((ok + 1)); done
check "unpinned requests are routed to replica 0 ($ok of 6)" test "$ok" = 6
code=$(status_of 1)
check "a pin to replica 1 is a 503 (got $code)" test "$code" = 503
check "... naming replica 1" grep -q 'replica 1' "$work/pinned"

# The node comes back at its address: replica 1 rejoins by itself.
start_node 2 || fail "node 2 restarts"
back=0
for _ in $(seq 1 300); do
  [[ $(status_of 1) == 200 ]] && { back=1; break; }
  sleep 0.2
done
check "replica 1 serves again after its node returned" test "$back" = 1
check "replica 1 gives the output of one process again" test "$(complete 1)" = "$one"
health >/dev/null
check "/health names no replica once both serve" bash -c "! grep -q unhealthy_replicas '$work/health.body'"

if ((failures > 0)); then
  echo "$failures check(s) failed; logs:"
  for f in "$work"/*.log; do echo "--- $f"; tail -40 "$f"; done
  exit 1
fi
echo "all checks passed"
