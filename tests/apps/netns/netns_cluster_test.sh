#!/usr/bin/env bash
# Worker nodes across "hosts": network namespaces joined by veth pairs through
# a bridge that lives in a namespace of its own, so no test traffic touches the
# machine's own network stack. Needs root and iproute2; without them it skips
# (exit 77, ctest's SKIP_RETURN_CODE) and says why.
#
#   tests/apps/netns/netns_cluster_test.sh TROUPE_BIN MODEL.gguf [CASE...]
#
# Cases (all by default):
#   split      TP=2, PP=2 and TP=2 x PP=2 across hosts give the greedy output of one process
#   moe        a mixture-of-experts model (make-gguf's tiny-qwen3moe) with its experts split
#              whole over two hosts (--enable-expert-parallel, attention TP=2), and over four
#              with TP=2 x PP=2, gives the greedy output of one process
#   linkdown   a node's link is down for 4 s during a stream: the stream ends with an error
#              naming the node within 10 s, the head stays up and /health names the node,
#              and service comes back by itself once the link is up
#   kill       kill -9 of a node: the same, and a node restarted at that address serves again
#   stop       SIGSTOP of a node: noticed through heartbeats; SIGCONT: serves again
#   slow       the head reaches a node through a relay (delay_relay.py, in a namespace of its
#              own) that delays every byte 150 ms each way: completions still give the output
#              of one process; then the relay stalls (connections open, nothing forwarded)
#              for 6 s during a stream: the same as linkdown, naming the node as the head
#              knows it (the relay's address), and service returns by itself on resume.
#              The collective between the nodes does not pass the relay: rank 0 listens on its
#              node's own address, so only the head's link to the node is slow or stalled.
# In every fault case /health must name the node actually lost, not the surviving rank
# whose step failed when its collective peer went away.
# Every namespace (and with it every veth and the bridge) is removed on exit,
# whatever happens.
set -uo pipefail
troupe=${1:?usage: netns_cluster_test.sh TROUPE_BIN MODEL.gguf [CASE...]}
model=${2:?usage: netns_cluster_test.sh TROUPE_BIN MODEL.gguf [CASE...]}
shift 2
cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=(split moe linkdown kill stop slow)

declare -A pids=()
starts=0  # node starts so far: each has its own log and pid file
# shellcheck source=netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
relay_py=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/delay_relay.py
netns_hosts tn 10.231.0 5   # namespaces tn<pid>sw, tn<pid>h0..h4 at 10.231.0.1..5

secret=$work/secret
echo "netns-cluster-$$-$RANDOM" > "$secret"
chmod 600 "$secret"
prompts=$work/prompts
printf 'Once upon a time\nThe little dog\nLily and Tom went to\n' > "$prompts"

# start_node N: `troupe node` in host N on port 7100 (TCP collectives between hosts).
start_node() {
  local n=$1
  # `ip netns exec` may stay the parent of what it runs: the node writes its own pid.
  starts=$((starts + 1))
  local log=$work/node$n.$starts.log pidf=$work/node$n.$starts.pid
  unset "pids[node$n]"
  in_host "$n" bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidf" \
    env -u TROUPE_CPU_COMM "$troupe" node --host "$(addr "$n")" --port 7100 --secret-file "$secret" >"$log" 2>&1 &
  for _ in $(seq 1 300); do
    [[ -s $pidf ]] && pids[node$n]=$(<"$pidf")
    [[ -n ${pids[node$n]:-} ]] && grep -q "listening" "$log" && return 0
    [[ -n ${pids[node$n]:-} ]] && ! kill -0 "${pids[node$n]}" 2>/dev/null && break
    sleep 0.1
  done
  echo "node $n did not start:"; cat "$log"; return 1
}
stop_node() {  # kill -9, and wait (bounded) until the process is gone
  local p=${pids[node$1]:-}
  [[ -n $p ]] || return 0
  kill -9 "$p" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
}

gen() {  # gen HOST ARGS...: troupe generate in host HOST
  local n=$1; shift
  in_host "$n" env -u TROUPE_CPU_COMM "$troupe" generate "$model" --prompts-file "$prompts" -n 24 --threads 1 \
    --secret-file "$secret" "$@"
}

case_split() {
  for n in 1 2 3 4; do start_node "$n" || { fail "split: nodes start"; return; }; done
  local one
  one=$(gen 0 2>"$work/gen_one.err") || { fail "split: one process"; cat "$work/gen_one.err"; return; }
  [[ -n $one ]] || { fail "split: one process printed nothing"; return; }
  local two="--nodes $(addr 1):7100,$(addr 2):7100"
  local four="--nodes $(addr 1):7100,$(addr 2):7100,$(addr 3):7100,$(addr 4):7100"
  local -a runs=("--tensor-parallel-size 2 $two" "--pipeline-parallel-size 2 $two"
                 "--tensor-parallel-size 2 --pipeline-parallel-size 2 $four")
  for r in "${runs[@]}"; do
    local out
    # shellcheck disable=SC2086
    out=$(gen 0 $r 2>"$work/gen.err")
    local rc=$?
    check "split: $r exits 0" test "$rc" = 0 || cat "$work/gen.err"
    check "split: $r gives the output of one process" test "$out" = "$one"
    check "split: $r meets over TCP between hosts" grep -q "communicator cpu-tcp:10.231.0." "$work/gen.err"
  done
  stop_all
}

case_moe() {
  local moe=$work/tiny-qwen3moe.gguf
  "$troupe" make-gguf --model-shape tiny-qwen3moe --weight-type f32 --seed 7 -o "$moe" >/dev/null 2>&1 ||
    { fail "moe: make-gguf"; return; }
  for n in 1 2 3 4; do start_node "$n" || { fail "moe: nodes start"; return; }; done
  local one
  one=$(model=$moe gen 0 2>"$work/gen_one.err") || { fail "moe: one process"; cat "$work/gen_one.err"; return; }
  [[ -n $one ]] || { fail "moe: one process printed nothing"; return; }
  local two="--nodes $(addr 1):7100,$(addr 2):7100"
  local four="--nodes $(addr 1):7100,$(addr 2):7100,$(addr 3):7100,$(addr 4):7100"
  local -a runs=("--tensor-parallel-size 2 --enable-expert-parallel $two"
                 "--tensor-parallel-size 2 --pipeline-parallel-size 2 --enable-expert-parallel $four")
  for r in "${runs[@]}"; do
    local out
    # shellcheck disable=SC2086
    out=$(model=$moe gen 0 $r 2>"$work/gen.err")
    local rc=$?
    check "moe: $r exits 0" test "$rc" = 0 || cat "$work/gen.err"
    check "moe: $r gives the output of one process" test "$out" = "$one"
    check "moe: $r meets over TCP between hosts" grep -q "communicator cpu-tcp:10.231.0." "$work/gen.err"
  done
  check "moe: the nodes split the experts whole" grep -q "experts of tensor rank 1/2: expert parallel" "$work"/node*.log
  stop_all
}

serve_port=8000
start_serve() {  # start_serve HOST:PORT...: troupe serve in host 0, one rank per node (TP); none: one process
  serve_port=$((serve_port + 1))  # a fresh port per case: the last one's sockets may linger
  local -a split=()
  if (($# > 0)); then
    local nodes
    nodes=$(printf '%s,' "$@"); nodes=${nodes%,}
    split=(--tensor-parallel-size $# --nodes "$nodes")
  fi
  rm -f "$work/serve.pid"
  in_host 0 bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$work/serve.pid" \
    env -u TROUPE_CPU_COMM "$troupe" serve "$model" --host "$(addr 0)" --port $serve_port --threads 1 \
    "${split[@]}" --secret-file "$secret" --disable-log-stats \
    >"$work/serve.$serve_port.log" 2>&1 &
  for _ in $(seq 1 100); do [[ -s $work/serve.pid ]] && break; sleep 0.05; done
  pids[serve]=$(<"$work/serve.pid")
  local deadline=$((SECONDS + 120))
  until [[ $(health) == 200 ]]; do
    if ((SECONDS >= deadline)) || ! kill -0 "${pids[serve]}" 2>/dev/null; then
      echo "serve did not become healthy:"; tail -30 "$work/serve.$serve_port.log"; return 1
    fi
    sleep 0.2
  done
}
health() { in_host 0 curl -s -o "$work/health.body" -w '%{http_code}' --max-time 5 "http://$(addr 0):$serve_port/health"; }
wait_health() {  # wait_health CODE SECONDS
  local deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    [[ $(health) == "$1" ]] && return 0
    sleep 0.2
  done
  return 1
}
complete() {
  in_host 0 curl -s --max-time 60 "http://$(addr 0):$serve_port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"Once upon a time","max_tokens":16,"temperature":0}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])' 2>/dev/null
}
# stream_with ACTION: a long stream; ACTION runs once the first event arrived; prints the
# seconds from ACTION to the stream's end, and leaves the stream in $work/stream.
stream_with() {
  local action=$1
  : >"$work/stream"
  in_host 0 curl -sN --max-time 120 "http://$(addr 0):$serve_port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"Once upon a time","max_tokens":1800,"ignore_eos":true,"temperature":0,"stream":true}' \
    >"$work/stream" 2>/dev/null &
  local curl_pid=$!
  for _ in $(seq 1 600); do grep -q '^data: {' "$work/stream" && break; sleep 0.05; done
  local t0=$SECONDS
  $action
  wait "$curl_pid"
  echo $((SECONDS - t0))
}

stop_all() {
  local p=${pids[serve]:-}
  [[ -n $p ]] && kill -9 "$p" 2>/dev/null
  for n in 1 2 3 4; do stop_node "$n"; done
  stop_relay
  for _ in $(seq 1 100); do [[ -n $p ]] && kill -0 "$p" 2>/dev/null && sleep 0.05; done
  unset "pids[serve]"
}

# health_names LOST SURVIVOR: /health answers 503 naming the lost node (HOST:PORT as the
# head knows it) and not the survivor. The scheduler hears of the loss a moment after the
# surviving rank's failed step may have set a first reason: up to 5 s for it to win.
health_names() {
  local lost=$1 survivor=$2 deadline=$((SECONDS + 5))
  while :; do
    if [[ $(health) == 503 ]] && grep -qF "(node $lost)" "$work/health.body" &&
      ! grep -qF "(node $survivor)" "$work/health.body"; then
      return 0
    fi
    ((SECONDS < deadline)) || { cat "$work/health.body"; echo; return 1; }
    sleep 0.2
  done
}
expect_failure_then_recovery() {  # NAME LOST_HOST:PORT SURVIVOR_HOST:PORT SECONDS_TAKEN RECOVER_ACTION
  local name=$1 lost=$2 survivor=$3 took=$4 recover=$5
  check "$name: the stream ends with an error" grep -q '"error"' "$work/stream"
  grep -q '"error"' "$work/stream" || tail -c 400 "$work/stream"
  # The lost node itself, or (the surviving rank failed first) its rank's collective endpoint
  # on that host.
  check "$name: the error names the lost node's host" grep -qF "${lost%:*}" "$work/stream"
  check "$name: within 10 s (took $took s)" test "$took" -lt 10
  local code; code=$(health)
  check "$name: the head is up and /health says 503 (got $code)" test "$code" = 503
  check "$name: /health names the lost node ($lost), not the survivor" health_names "$lost" "$survivor"
  $recover
  check "$name: service comes back by itself" wait_health 200 60
  check "$name: the same greedy output afterwards" test "$(complete)" = "$greedy"
}

link_down_4s() { ip -n "$sw" link set v2 down; sleep 4; }
link_up() { ip -n "$sw" link set v2 up; }
case_linkdown() {
  start_node 1 && start_node 2 && start_serve "$(addr 1):7100" "$(addr 2):7100" || { fail "linkdown: start"; return; }
  greedy=$(complete)
  [[ -n $greedy ]] || { fail "linkdown: a first completion"; return; }
  local took
  took=$(stream_with link_down_4s)
  took=$((took + 4))  # the action's own 4 s are part of the time to the stream's end
  expect_failure_then_recovery linkdown "$(addr 2):7100" "$(addr 1):7100" "$took" link_up
  stop_all
}

kill_node2() { stop_node 2; }
restart_node2() { start_node 2; }
case_kill() {
  start_node 1 && start_node 2 && start_serve "$(addr 1):7100" "$(addr 2):7100" || { fail "kill: start"; return; }
  greedy=$(complete)
  local took
  took=$(stream_with kill_node2)
  expect_failure_then_recovery kill "$(addr 2):7100" "$(addr 1):7100" "$took" restart_node2
  stop_all
}

stop_node2() { kill -STOP "${pids[node2]}"; }
cont_node2() { kill -CONT "${pids[node2]}"; }
case_stop() {
  start_node 1 && start_node 2 && start_serve "$(addr 1):7100" "$(addr 2):7100" || { fail "stop: start"; return; }
  greedy=$(complete)
  local took
  took=$(stream_with stop_node2)
  expect_failure_then_recovery stop "$(addr 2):7100" "$(addr 1):7100" "$took" cont_node2
  stop_all
}

# start_relay HOST PORT TARGET_HOST:TARGET_PORT DELAY_MS: delay_relay.py in host HOST.
start_relay() {
  local n=$1 port=$2 target=$3 delay=$4
  local log=$work/relay.log pidf=$work/relay.pid
  rm -f "$pidf"
  in_host "$n" bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidf" \
    python3 "$relay_py" "$(addr "$n")" "$port" "${target%:*}" "${target##*:}" --delay-ms "$delay" >"$log" 2>&1 &
  for _ in $(seq 1 100); do
    [[ -s $pidf ]] && pids[relay]=$(<"$pidf")
    [[ -n ${pids[relay]:-} ]] && grep -q "relay listening" "$log" && return 0
    sleep 0.05
  done
  echo "the relay did not start:"; cat "$log"; return 1
}
stop_relay() {
  local p=${pids[relay]:-}
  [[ -n $p ]] && kill -9 "$p" 2>/dev/null
  unset "pids[relay]"
}

# The greedy completion of one process (no nodes), once.
one_process=""
one_process_completion() {
  [[ -n $one_process ]] && return 0
  start_serve || return 1
  one_process=$(complete)
  stop_all
  [[ -n $one_process ]]
}

stall_relay() { kill -USR1 "${pids[relay]}"; }
resume_relay() {  # after the link was stalled for 6 s in all
  ((stall_left > 0)) && sleep "$stall_left"
  kill -USR2 "${pids[relay]}"
}
case_slow() {
  one_process_completion || { fail "slow: one process"; return; }
  # The head reaches node 2 only through the relay in host 3; node 1 directly.
  local relayed
  relayed="$(addr 3):7300"
  start_node 1 && start_node 2 && start_relay 3 7300 "$(addr 2):7100" 150 &&
    start_serve "$(addr 1):7100" "$relayed" || { fail "slow: start"; return; }
  greedy=$(complete)
  check "slow: a completion over a link 150 ms each way gives the output of one process" \
    test "$greedy" = "$one_process"
  [[ -n $greedy ]] || { fail "slow: a first completion"; return; }
  local took
  took=$(stream_with stall_relay)
  stall_left=$((6 - took))
  expect_failure_then_recovery stall "$relayed" "$(addr 1):7100" "$took" resume_relay
  grep -q "relay stalled" "$work/relay.log" && grep -q "relay resumed" "$work/relay.log" ||
    fail "stall: the relay stalled and resumed (its log: $(tr '\n' ' ' <"$work/relay.log"))"
  stop_all
}

for c in "${cases[@]}"; do
  echo "== $c"
  case "$c" in
    split | moe | linkdown | kill | stop | slow) "case_$c" ;;
    *) fail "unknown case '$c'" ;;
  esac
done
if ((failures > 0)); then
  echo "$failures check(s) failed; logs:"
  for f in "$work"/*.log; do echo "--- $f"; tail -40 "$f"; done
  exit 1
fi
echo "all checks passed"
