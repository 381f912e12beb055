#!/usr/bin/env bash
# The one prepared check for a machine with one H200 (issue 9). Run from the
# repository root; logs and results go under $OUT (default ./gpu-check-out).
#
#   here, before the device call:  scripts/gpu-deps.sh    (our Debian dev packages -> .gpu-deps/, ~4 MB)
#   on the device machine:         scripts/gpu-check.sh   (run with carry [".gpu-deps"], timeout_s ~540)
#
# Every step is time-boxed with `timeout` and appends "step rc seconds" to
# $OUT/summary.txt; the script finishes well under 8 minutes and exits non-zero
# if any step failed. $OUT comes back as at most 8 files: keep the count low
# (today: summary.txt env.log build.log gpu-tests.log sanitizer.log goldens.log
# bench.log bench.json).
#
# Sections (add yours where marked; keep the time budget):
#   0. environment       nvidia-smi, nvcc, compilers, cmake, the carried dependencies
#   1. build             configure with CUDA (Release, sm_90), build the targets below
#   2. gpu tests         ctest -L gpu: kernels/cuda conformance against the CPU kernels, the cuda
#                        platform's parts against the CPU platform's (cuda_ops_test), the CUDA
#                        worker's stories260K goldens and logits (cuda_worker_test; SmolLM2's too
#                        when a SmolLM2 GGUF is at $SMOLLM2_GGUF or .gpu-deps/*.gguf), NCCL (>= 2 GPUs)
#   3. memory check      compute-sanitizer memcheck on part of the kernel tests
#   4. goldens           `troupe plugins` (cuda activated) and `troupe generate` on cuda vs cpu
#   5. benchmarks        troupe_bench_engine on cuda: decode at 1 and 32 streams, prefill of 512
#                        tokens, tok/s and the fraction of the 4.8 TB/s weight-streaming roofline,
#                        for SmolLM2-135M (its shape, q4_1, random weights unless the real file is
#                        there) and a Llama-3.2-1B shape in bf16 and q8_0 (--load-format dummy)
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
export BUILD=${GPU_CHECK_BUILD:-build-gpu}
JOBS=${GPU_CHECK_JOBS:-$(nproc)}
BUDGET_S=${GPU_CHECK_BUDGET_S:-450}  # optional steps are skipped past this many seconds
SCALE=${GPU_CHECK_TIME_SCALE:-1}     # multiplies every limit: for a dry run on a slow machine without a GPU
SUMMARY=$OUT/summary.txt
START=$(date +%s)
FAILED=0
: >"$SUMMARY"

# Targets the checks need. Sections 4 and 5 add theirs (the troupe CLI, the
# cuda plugin, bench tools) here.
TARGETS=(troupe_kernels_cuda test_cuda_elementwise test_cuda_matmul test_cuda_attention test_cuda_sampling
         test_cuda_launch_checks troupe troupe_platform_cpu troupe_platform_cuda cuda_ops_test cuda_worker_test
         cuda_platform_unit_test nccl_communicator_test nccl_rank_main troupe_bench_engine)
export BENCH_DEVICE=${GPU_CHECK_DEVICE:-cuda}  # cpu: a dry run of sections 4-5 on a machine without a GPU

# The real SmolLM2 (98 MB: too big to carry with the deps; scripts/gpu-deps.sh does not pack it).
SMOLLM2=${SMOLLM2_GGUF:-$(ls .gpu-deps/*.gguf 2>/dev/null | head -1)}
if [[ -n $SMOLLM2 && -f $SMOLLM2 ]]; then export TROUPE_TEST_MODEL=$SMOLLM2; fi

elapsed() { echo $(($(date +%s) - START)); }

# step NAME LOG SECONDS COMMAND...: runs COMMAND with a time limit, output appended to $OUT/LOG.
step() {
  local name=$1 log=$OUT/$2 limit=$(($3 * SCALE))
  shift 3
  local t0 rc
  t0=$(date +%s)
  echo "=== [$(elapsed)s] $name (limit ${limit}s)" | tee -a "$log"
  if declare -F "$1" >/dev/null; then  # a shell function: timeout needs a process
    timeout --kill-after=10 "$limit" bash -c "$(declare -f "$1"); $(printf '%q ' "$@")" >>"$log" 2>&1
  else
    timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
  fi
  rc=$?
  printf '%-28s rc=%-4s %4ss\n' "$name" "$rc" "$(($(date +%s) - t0))" | tee -a "$SUMMARY"
  ((rc == 0)) || FAILED=1
  return $rc
}

# ---- 0. environment -------------------------------------------------------------------------
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
env_report() {
  date -u
  nvidia-smi || true
  nvcc --version
  "${CXX:-g++}" --version | head -1
  cmake --version | head -1
  ninja --version || true
  command -v compute-sanitizer || true
}
step env env.log 30 env_report

PREFIX_ARGS=()
if [[ -f .gpu-deps/deps.tar.xz ]]; then
  DEPS=${TMPDIR:-/tmp}/troupe-gpu-deps
  rm -rf "$DEPS" && mkdir -p "$DEPS"
  step unpack-deps env.log 60 tar -C "$DEPS" -xJf .gpu-deps/deps.tar.xz
  PREFIX_ARGS=(-DCMAKE_PREFIX_PATH="$DEPS/usr")
  export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  echo "no .gpu-deps/deps.tar.xz: relying on system packages (scripts/gpu-deps.sh makes it)" | tee -a "$OUT/env.log"
fi

# ---- 1. build ---------------------------------------------------------------------------------
GEN_ARGS=()
command -v ninja >/dev/null && GEN_ARGS=(-G Ninja)
LAUNCHER_ARGS=()
command -v ccache >/dev/null && LAUNCHER_ARGS=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if ! step configure build.log 120 cmake -S . -B "$BUILD" "${GEN_ARGS[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DTROUPE_ENABLE_CUDA=ON "${PREFIX_ARGS[@]}" "${LAUNCHER_ARGS[@]}"; then
  echo "configure failed: see build.log" | tee -a "$SUMMARY"
  exit 1
fi
if ! grep -q "troupe: CUDA platform ON" "$OUT/build.log"; then
  echo "CUDA was not found by CMake (nvcc?): nothing to check" | tee -a "$SUMMARY"
  exit 1
fi
if ! step build build.log 300 cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"; then
  echo "build failed: see build.log" | tee -a "$SUMMARY"
  exit 1
fi

# ---- 2. gpu tests -----------------------------------------------------------------------------
# Not-yet-built test executables of other folders show up as *_NOT_BUILT without the gpu label: -L gpu skips them.
step gpu-tests gpu-tests.log 180 ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 120 -j 4
step launch-checks gpu-tests.log 30 "$BUILD/bin/test_cuda_launch_checks"

# ---- 3. memory check --------------------------------------------------------------------------
# compute-sanitizer works on Firecracker machines, not on gVisor ones ("Device not supported"):
# its failure here is reported, not fatal to the rest.
if command -v compute-sanitizer >/dev/null && (($(elapsed) < BUDGET_S * SCALE - 120)); then
  sanitize() {
    local rc=0
    compute-sanitizer --tool memcheck --error-exitcode 3 "$BUILD/bin/test_cuda_attention" || rc=$?
    compute-sanitizer --tool memcheck --error-exitcode 3 "$BUILD/bin/test_cuda_elementwise" || rc=$?
    compute-sanitizer --tool memcheck --error-exitcode 3 "$BUILD/bin/test_cuda_matmul" \
      --gtest_filter='*q4_k*:*q6_k*:*q4_0*:*CudaCublas*' || rc=$?
    compute-sanitizer --tool memcheck --error-exitcode 3 "$BUILD/bin/test_cuda_sampling" || rc=$?
    compute-sanitizer --tool memcheck --error-exitcode 3 "$BUILD/bin/cuda_ops_test" || rc=$?
    return $rc
  }
  step memcheck sanitizer.log 110 sanitize
else
  echo "memcheck skipped (no compute-sanitizer or no time left)" | tee -a "$SUMMARY"
fi

# ---- 4. goldens on the cuda platform -----------------------------------------------------------
# (the token-exact goldens themselves ran in section 2: cuda_worker_test)
export TROUPE=$BUILD/bin/troupe
goldens() {
  local prompt='Once upon a time, there was a little' rc=0
  "$TROUPE" plugins || rc=$?
  echo "--- stories260K, greedy, 48 tokens: $BENCH_DEVICE then cpu (the same text, or a divergence at a fragile step)"
  "$TROUPE" generate tests/data/stories260K.gguf -p "$prompt" -n 48 --json --device "$BENCH_DEVICE" || rc=$?
  "$TROUPE" generate tests/data/stories260K.gguf -p "$prompt" -n 48 --json --device cpu || rc=$?
  if [[ -n ${TROUPE_TEST_MODEL:-} ]]; then
    echo "--- SmolLM2 chat on $BENCH_DEVICE"
    "$TROUPE" generate "$TROUPE_TEST_MODEL" --chat -p 'What is the capital of France?' -n 32 --json \
      --device "$BENCH_DEVICE" || rc=$?
  else
    echo "--- SmolLM2: no GGUF here (SMOLLM2_GGUF or .gpu-deps/*.gguf): skipped"
  fi
  return $rc
}
step goldens goldens.log 60 goldens

# ---- 5. benchmarks ----------------------------------------------------------------------------
# One engine per model: decode at 1 and 32 concurrent streams (128-token prompts, 64 new tokens),
# then one 512-token prompt alone (prefill). Roofline: decode tok/s over C x 4.8 TB/s / weight
# bytes read per step (KV reads left out: the fraction is a lower bound). Results: bench.log and
# bench.json (one object per model).
BENCH=$BUILD/bin/troupe_bench_engine
BENCH_ARGS=(--device "$BENCH_DEVICE" --concurrency "${GPU_CHECK_LEVELS:-1,32}" --prompt-len 128
            --gen-len "${GPU_CHECK_GEN_LEN:-64}" --prefill-len 512 --hbm-gbps 4800)
BENCH_TMP=$(mktemp -d)
bench_model() {  # NAME ARGS...
  local name=$1
  shift
  if (($(elapsed) > BUDGET_S * SCALE - 60)); then
    echo "bench $name skipped: past the time budget" | tee -a "$SUMMARY"
    return 0
  fi
  echo "=== $name" >>"$OUT/bench.log"
  step "bench-$name" bench.log 100 "$BENCH" "$@" "${BENCH_ARGS[@]}" --json "$BENCH_TMP/$name.json"
}
if [[ -n ${TROUPE_TEST_MODEL:-} ]]; then
  bench_model smollm2-135m-q4_1 "$TROUPE_TEST_MODEL"
else
  bench_model smollm2-135m-q4_1-dummy --load-format dummy --model-shape smollm2-135m --weight-type q4_1
fi
bench_model llama-3.2-1b-bf16 --load-format dummy --model-shape llama-3.2-1b --weight-type bf16
bench_model llama-3.2-1b-q8_0 --load-format dummy --model-shape llama-3.2-1b --weight-type q8_0
# The same without CUDA graphs: what replaying decode graphs gains (or costs).
bench_model llama-3.2-1b-q8_0-eager --load-format dummy --model-shape llama-3.2-1b --weight-type q8_0 --enforce-eager
{
  echo "["
  first=1
  for f in "$BENCH_TMP"/*.json; do
    [[ -f $f ]] || continue
    ((first)) || echo ","
    first=0
    printf '{"name": "%s", "result": ' "$(basename "$f" .json)"
    cat "$f"
    echo "}"
  done
  echo "]"
} >"$OUT/bench.json"
rm -rf "$BENCH_TMP"
grep -E "^model|^1 |^32 |^prefill" "$OUT/bench.log" | tee -a "$SUMMARY"

echo "total $(elapsed)s, $( ((FAILED)) && echo FAILED || echo ok)" | tee -a "$SUMMARY"
exit $FAILED
