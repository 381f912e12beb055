#!/usr/bin/env bash
# The one prepared check for a machine with one GPU (an H100 or an H200). Run from
# the repository root; logs and results go under $OUT (default ./gpu-check-out).
#
#   here, before the device call:  scripts/gpu-deps.sh    (our Debian dev packages -> .gpu-deps/, ~7 MB)
#   on the device machine:         scripts/gpu-check.sh   (run with carry [".gpu-deps"], timeout_s 450)
#   dry run without a GPU:         GPU_CHECK_DEVICE=cpu GPU_CHECK_BUILD=build scripts/gpu-check.sh
#
# The whole run ends within GPU_CHECK_DEADLINE_S (420 s: 7 minutes on 16 cores, the
# build included), so a 15-minute device budget leaves room to run it again. Every step
# is time-boxed with `timeout`, never past the deadline, and appends "step rc seconds"
# to $OUT/summary.txt; the optional steps (memcheck, benchmarks) run only while enough
# time is left and say so when skipped. The last line is the verdict: "ok" only when
# every step passed and CUDA ran a kernel; "NOT A GPU RUN" when CUDA never initialised
# (every gpu test then skips: that is not a pass). Exit status: 0 ok, 1 a step failed,
# 2 no step failed but CUDA never initialised. Memcheck is reported on its own line and
# does not decide the verdict. $OUT comes back as at most 8 files: keep the count low
# (today: summary.txt env.log build.log gpu-tests.log sanitizer.log goldens.log
# bench.log bench.json).
#
# Sections, in the order that loses least when something breaks (add yours where
# marked; keep the time budget):
#   0. environment       nvidia-smi, nvcc, compilers, cmake, the carried dependencies; the GPU's
#                        memory bandwidth for the roofline from its name (H100 3.35 TB/s, H200 4.8)
#   1. CUDA alone        with nvcc and nothing else: the probe (kernels/cuda/cuda_probe_main.cu: devices,
#                        a kernel run and checked; its verdict says whether this is a GPU run)
#   2. configure         against the carried dependencies (.gpu-deps, Debian 12 packages) or the
#                        system's; when it fails, every kernels/cuda .cu is compiled with nvcc alone
#   3. kernel tests      kernels/cuda and its conformance tests against the CPU kernels, built and run first;
#                        a test that skips for want of a device (tagged, scripts/lib/gpu-check-lib.sh)
#                        fails a run whose probe found one; deliberate skips do not
#   4. build             the cuda platform, its worker, graph and NCCL tests (NCCL targets only when CMake
#                        found libnccl), the troupe CLI, the cpu and cuda plugins, the engine benchmark
#   5. platform tests    ctest -L gpu: cuda_ops_test, cuda_worker_test (stories260K goldens and logits;
#                        SmolLM2's too when its GGUF is at $SMOLLM2_GGUF or .gpu-deps/*.gguf),
#                        cuda_graph_test, NCCL (>= 2 GPUs); the CUDA platform's unit tests; and
#                        `troupe platform-check --platform cuda` (every op, weight type, attention
#                        with windows and soft-capping, gelu_tanh, softcap, scale, against the CPU)
#   6. memory check      compute-sanitizer memcheck on the kernel tests and cuda_ops_test (optional;
#                        reported separately: not fatal; the deliberate 1 PiB allocation left out)
#   7. goldens           `troupe plugins` (cuda activated) and `troupe generate` on cuda vs cpu, the KV
#                        cache capped (GPU_CHECK_KV_SHARE of the device, default 0.05)
#   8. benchmarks        (optional) troupe_bench_engine on cuda: decode at 1 and 32 streams, prefill of
#                        512 tokens, tok/s and the fraction of the device's weight-streaming roofline,
#                        for SmolLM2-135M (q4_1, random weights unless the real file is there) and a
#                        Llama-3.2-1B shape in q8_0 (--load-format dummy), then bf16 and q8_0 eager
#                        while time remains
#
# GPU_CHECK_DEVICE=cpu is the dry run: the same steps on a machine without a GPU,
# generate and the benchmarks on cpu (the benchmarks cut to SmolLM2's shape and a
# few tokens: the 1B shapes take minutes on a few cores). It must end "NOT A GPU
# RUN" with the probe's reason.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/gpu-check-lib.sh

OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
export BUILD=${GPU_CHECK_BUILD:-build-gpu}
JOBS=${GPU_CHECK_JOBS:-$(nproc)}
SCALE=${GPU_CHECK_TIME_SCALE:-1}     # multiplies every limit and the deadline: for a dry run on a slow machine
DEADLINE_S=$((${GPU_CHECK_DEADLINE_S:-420} * SCALE))  # the whole run ends by then (finish() needs ~5 s)
KV_SHARE=${GPU_CHECK_KV_SHARE:-0.05} # --gpu-memory-utilization of `troupe generate` on cuda (7 GB of an H200)
SUMMARY=$OUT/summary.txt
START=$(date +%s)
FAILED=0
CUDA_OK=0
CUDA_WHY="the probe did not run"
MEMCHECK="not run"
: >"$SUMMARY"

export BENCH_DEVICE=${GPU_CHECK_DEVICE:-cuda}  # cpu: the dry run
DRY_RUN=0
[[ $BENCH_DEVICE == cuda ]] || DRY_RUN=1
CUDA_ONLY=$BUILD-cuda-only  # section 1's outputs (nvcc alone)
mkdir -p "$CUDA_ONLY"

# The real SmolLM2 (98 MB: too big to carry with the deps; scripts/gpu-deps.sh does not pack it).
SMOLLM2=${SMOLLM2_GGUF:-$(ls .gpu-deps/*.gguf 2>/dev/null | head -1)}
if [[ -n $SMOLLM2 && -f $SMOLLM2 ]]; then export TROUPE_TEST_MODEL=$SMOLLM2; fi

elapsed() { echo $(($(date +%s) - START)); }
left() { echo $((DEADLINE_S - $(elapsed) - 5)); }  # seconds before the deadline, finish() aside
note() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME LOG SECONDS COMMAND...: runs COMMAND with a time limit (never past the deadline),
# output appended to $OUT/LOG. A failure fails the run unless STEP_FATAL=0 (then the caller
# reports it); a step with no time left fails without running.
step() {
  local name=$1 log=$OUT/$2 limit=$(($3 * SCALE)) fatal=${STEP_FATAL:-1}
  shift 3
  local t0 rc
  ((limit > $(left))) && limit=$(left)
  if ((limit <= 0)); then
    printf '%-28s rc=%-4s %4ss (no time left before the %ss deadline)\n' "$name" - 0 "$DEADLINE_S" | tee -a "$SUMMARY"
    ((fatal)) && FAILED=1
    return 124
  fi
  t0=$(date +%s)
  echo "=== [$(elapsed)s] $name (limit ${limit}s)" | tee -a "$log"
  if declare -F "$1" >/dev/null; then  # a shell function: timeout needs a process
    timeout --kill-after=10 "$limit" bash -c "$(declare -f "$1"); $(printf '%q ' "$@")" >>"$log" 2>&1
  else
    timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
  fi
  rc=$?
  local how=""
  ((rc == 124 || rc == 137)) && how=" (timed out)"
  ((fatal)) || how="$how (not fatal)"
  printf '%-28s rc=%-4s %4ss%s\n' "$name" "$rc" "$(($(date +%s) - t0))" "$how" | tee -a "$SUMMARY"
  ((rc == 0 || !fatal)) || FAILED=1
  return $rc
}

# The verdict line and exit status (see the header).
finish() {
  local verdict
  if ((FAILED)); then
    verdict="FAILED"
  elif ((!CUDA_OK)); then
    verdict="no step failed"
  else
    verdict="ok"
  fi
  note "memcheck: $MEMCHECK"
  if ((!CUDA_OK)); then
    note "NOT A GPU RUN: CUDA never initialised ($CUDA_WHY); every gpu test skipped"
    ((DRY_RUN)) && note "(dry run: GPU_CHECK_DEVICE=$BENCH_DEVICE)"
  fi
  note "total $(elapsed)s, $verdict$( ((CUDA_OK)) || echo ', not a GPU run')"
  ((FAILED)) && exit 1
  ((CUDA_OK)) || exit 2
  exit 0
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
step env env.log 20 env_report
# The roofline's bandwidth: the device's own (its name), else GPU_CHECK_HBM_GBPS, else none.
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
HBM_GBPS=${GPU_CHECK_HBM_GBPS:-$(hbm_gbps_of "$GPU_NAME")}
note "device: ${GPU_NAME:-none found by nvidia-smi}; roofline bandwidth: ${HBM_GBPS:-unknown} GB/s"

# ---- 1. CUDA alone ------------------------------------------------------------------------------
# Nothing but nvcc: whatever the carried dependencies do on this image, this much is known.
NVCC=(nvcc)
command -v ccache >/dev/null && NVCC=(ccache nvcc)
NVCC_FLAGS=(-O2 -std=c++17 -arch=sm_90 -I. -Iinclude -Xcompiler=-Wall,-Wextra)
if step probe-build env.log 60 "${NVCC[@]}" "${NVCC_FLAGS[@]}" kernels/cuda/cuda_probe_main.cu \
    -o "$CUDA_ONLY/troupe_cuda_probe"; then
  echo "=== [$(elapsed)s] cuda-probe" >>"$OUT/env.log"
  PROBE_OUT=$(timeout 60 "$CUDA_ONLY/troupe_cuda_probe" 2>&1)
  PROBE_RC=$?
  echo "$PROBE_OUT" >>"$OUT/env.log"
  if ((PROBE_RC == 0)); then
    CUDA_OK=1
    CUDA_WHY=""
    note "cuda-probe: $(echo "$PROBE_OUT" | grep -E '^device 0|^CUDA works' | tr '\n' ' ')"
  else
    CUDA_WHY=$(echo "$PROBE_OUT" | grep -E '^CUDA (unavailable|check failed)' | head -1)
    [[ -n $CUDA_WHY ]] || CUDA_WHY="the probe exited $PROBE_RC: $(echo "$PROBE_OUT" | tail -1)"
    note "cuda-probe: rc=$PROBE_RC $CUDA_WHY"
    # A device that is there but fails the check is a failure of the run, not an absence.
    ((PROBE_RC == 2)) || FAILED=1
  fi
else
  CUDA_WHY="the probe did not build (see env.log)"
fi
# ---- 2. configure ------------------------------------------------------------------------------
compile_kernels() {  # OUT_DIR NVCC_COMMAND... (a function run by `timeout`: it sees no arrays of ours)
  local out=$1 rc=0 f
  shift
  for f in kernels/cuda/*.cu; do
    [[ $f == */cuda_probe_main.cu ]] && continue
    echo "--- $f"
    "$@" -c "$f" -o "$out/$(basename "$f" .cu).o" || rc=1
  done
  return $rc
}

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
GEN_ARGS=()
command -v ninja >/dev/null && GEN_ARGS=(-G Ninja)
LAUNCHER_ARGS=()
command -v ccache >/dev/null && LAUNCHER_ARGS=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if ! step configure build.log 90 cmake -S . -B "$BUILD" "${GEN_ARGS[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DTROUPE_ENABLE_CUDA=ON "${PREFIX_ARGS[@]}" "${LAUNCHER_ARGS[@]}"; then
  note "configure failed (the carried dependencies on this image?): see build.log"
  # What is known without them: every kernel compiles with nvcc alone.
  step kernels-nvcc-only build.log 180 compile_kernels "$CUDA_ONLY" "${NVCC[@]}" "${NVCC_FLAGS[@]}"
  finish
fi
if ! grep -q "troupe: CUDA platform ON" "$OUT/build.log"; then
  note "CUDA was not found by CMake (nvcc?): nothing to check"
  FAILED=1
  finish
fi
# Targets that exist only with NCCL (CMake found libnccl.so): named only when this build has them.
HAVE_TARGETS=$(cmake --build "$BUILD" --target help 2>/dev/null)
has_target() { grep -qE "(^|[ /])$1([: ]|$)" <<<"$HAVE_TARGETS"; }

# ---- 3. kernels and their tests ----------------------------------------------------------------
KERNEL_TESTS=(test_cuda_elementwise test_cuda_matmul test_cuda_attention test_cuda_sampling test_cuda_launch_checks
              test_cuda_dequant_host)
if step build-kernels build.log 150 cmake --build "$BUILD" -j "$JOBS" --target troupe_kernels_cuda "${KERNEL_TESTS[@]}"; then
  run_kernel_tests() {
    local rc=0 t
    for t in "$@"; do
      echo "--- $t"
      "$BUILD/bin/$t" || rc=1
    done
    return $rc
  }
  step kernel-tests gpu-tests.log 90 run_kernel_tests "${KERNEL_TESTS[@]}"
fi

# ---- 4. build the rest --------------------------------------------------------------------------
# Sections 7 and 8 add theirs (the troupe CLI, the plugins, bench tools) here.
TARGETS=(troupe troupe_platform_cpu troupe_platform_cuda cuda_ops_test cuda_worker_test cuda_graph_test
         cuda_batches_test cuda_platform_unit_test troupe_bench_engine)
for t in nccl_communicator_test nccl_rank_main; do
  if has_target "$t"; then TARGETS+=("$t"); else note "no NCCL in this build: $t not built (one rank only)"; fi
done
if ! step build build.log 180 cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"; then
  note "build failed: see build.log"
  finish
fi

# ---- 5. platform tests --------------------------------------------------------------------------
# Not-yet-built test executables of other folders show up as *_NOT_BUILT without the gpu label: -L gpu skips them.
step gpu-tests gpu-tests.log 120 ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 90 -j 4
# gtest's own tallies (kernel tests) and ctest's (platform tests): how much really ran.
gtest_sum() { grep -oE "\[  $1 *\] [0-9]+ tests?" "$OUT/gpu-tests.log" | grep -oE '[0-9]+ tests?' | awk '{s += $1} END {print s + 0}'; }
note "kernel tests: $(gtest_sum PASSED) passed, $(gtest_sum SKIPPED) skipped; platform tests (ctest -L gpu):" \
  "$(grep -E 'tests passed' "$OUT/gpu-tests.log" | tail -1), $(grep -c '(Skipped)' "$OUT/gpu-tests.log") skipped" \
  "$( ((CUDA_OK)) || echo '(CUDA unavailable: skipped, not passed)')"
NO_DEVICE_SKIPS=$(device_absent_skips "$OUT/gpu-tests.log")
if ((CUDA_OK && NO_DEVICE_SKIPS > 0)); then
  # The probe ran a kernel, yet troupe's own tests found no device (another libcudart?).
  # (Deliberate skips, such as the launch checks' case that needs no device, do not count.)
  note "CUDA works for the probe, but $NO_DEVICE_SKIPS kernel tests found no device: troupe's build did not initialise CUDA"
  FAILED=1
fi
run_unit() { "$BUILD/bin/cuda_batches_test" && "$BUILD/bin/cuda_platform_unit_test"; }
step cuda-unit-tests gpu-tests.log 60 run_unit
# The conformance kit on the device: every op and weight type, attention with windows and
# soft-capping, the named ops, against the cpu platform (seconds). Not on the dry run's cpu.
if ((CUDA_OK)); then
  step platform-check gpu-tests.log 90 "$BUILD/bin/troupe" platform-check --platform cuda
else
  note "platform-check --platform cuda: not run ($CUDA_WHY)"
fi

# ---- 6. memory check (reported on its own) --------------------------------------------------------
# compute-sanitizer works on Firecracker machines, not on gVisor ones ("Device not supported"):
# it never decides the verdict; its own line says what it found or why it could not run.
if ((!CUDA_OK)); then
  MEMCHECK="not run: $CUDA_WHY"
elif ! command -v compute-sanitizer >/dev/null; then
  MEMCHECK="not run: no compute-sanitizer on PATH"
elif (($(left) < 150)); then
  MEMCHECK="not run: under 150 s left before the deadline (the goldens come first)"
else
  sanitize() {
    local rc=0
    local mc=(compute-sanitizer --tool memcheck --error-exitcode 3)
    "${mc[@]}" "$BUILD/bin/test_cuda_attention" || rc=$?
    "${mc[@]}" "$BUILD/bin/test_cuda_elementwise" || rc=$?
    "${mc[@]}" "$BUILD/bin/test_cuda_matmul" --gtest_filter='*q4_k*:*q6_k*:*q4_0*:*CudaCublas*' || rc=$?
    "${mc[@]}" "$BUILD/bin/test_cuda_sampling" || rc=$?
    # Not the case that asks for 1 PiB on purpose: the refused cudaMalloc is a memcheck error.
    "${mc[@]}" "$BUILD/bin/cuda_ops_test" --gtest_filter='-*AllocatorCopiesFillsAndRefusesTooMuch*' || rc=$?
    return $rc
  }
  STEP_FATAL=0 step memcheck sanitizer.log 90 sanitize
  MC_RC=$?
  if grep -qiE "device not supported|unable to (initialize|attach)|not supported on this" "$OUT/sanitizer.log"; then
    MEMCHECK="could not run: $(grep -iE 'device not supported|unable to (initialize|attach)|not supported on this' \
      "$OUT/sanitizer.log" | head -1) (the container runtime?)"
  elif ((MC_RC == 0)); then
    MEMCHECK="clean ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") runs with 0 errors)"
  elif ((MC_RC == 124 || MC_RC == 137)); then
    MEMCHECK="timed out (see sanitizer.log)"
  else
    MEMCHECK="FINDINGS (rc $MC_RC): $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | grep -v ' 0 errors' | head -3 |
      tr '\n' ';') see sanitizer.log"
  fi
fi

# ---- 7. goldens on the cuda platform -----------------------------------------------------------
# (the token-exact goldens themselves ran in section 5: cuda_worker_test)
export TROUPE=$BUILD/bin/troupe KV_SHARE
goldens() {
  local prompt='Once upon a time, there was a little' rc=0
  # A 260K-parameter model needs no 127 GB of KV cache: cap it (its cudaMalloc costs seconds).
  local cap=(--gpu-memory-utilization "$KV_SHARE")
  "$TROUPE" plugins || rc=$?
  echo "--- stories260K, greedy, 48 tokens: $BENCH_DEVICE then cpu (the same text, or a divergence at a fragile step)"
  "$TROUPE" generate tests/data/stories260K.gguf -p "$prompt" -n 48 --json --device "$BENCH_DEVICE" "${cap[@]}" || rc=$?
  "$TROUPE" generate tests/data/stories260K.gguf -p "$prompt" -n 48 --json --device cpu || rc=$?
  if [[ -n ${TROUPE_TEST_MODEL:-} ]]; then
    echo "--- SmolLM2 chat on $BENCH_DEVICE"
    "$TROUPE" generate "$TROUPE_TEST_MODEL" --chat -p 'What is the capital of France?' -n 32 --json \
      --device "$BENCH_DEVICE" "${cap[@]}" || rc=$?
  else
    echo "--- SmolLM2: no GGUF here (SMOLLM2_GGUF or .gpu-deps/*.gguf): skipped"
  fi
  return $rc
}
step goldens goldens.log 45 goldens

# ---- 8. benchmarks ----------------------------------------------------------------------------
# One engine per model: decode at 1 and 32 concurrent streams (128-token prompts, 64 new tokens),
# then one 512-token prompt alone (prefill). Roofline: decode tok/s over C x the device's bandwidth
# (HBM_GBPS: 3.35 TB/s on an H100, 4.8 on an H200) / weight bytes read per step (KV reads left
# out: the fraction is a lower bound). Results: bench.log and bench.json (one object per model).
# The KV cache gets 30% of the device (plenty for 32 streams). Each model runs only while 60 s
# are left; the most informative first.
BENCH=$BUILD/bin/troupe_bench_engine
if ((DRY_RUN)); then
  BENCH_ARGS=(--device "$BENCH_DEVICE" --concurrency "${GPU_CHECK_LEVELS:-1,2}" --prompt-len 16
              --gen-len "${GPU_CHECK_GEN_LEN:-4}" --prefill-len 32)
else
  BENCH_ARGS=(--device "$BENCH_DEVICE" --concurrency "${GPU_CHECK_LEVELS:-1,32}" --prompt-len 128
              --gen-len "${GPU_CHECK_GEN_LEN:-64}" --prefill-len 512 --gpu-memory-utilization 0.3)
fi
[[ -n $HBM_GBPS ]] && BENCH_ARGS+=(--hbm-gbps "$HBM_GBPS")
BENCH_TMP=$(mktemp -d)
bench_model() {  # NAME ARGS...
  local name=$1
  shift
  if (($(left) < 60)); then
    note "bench $name skipped: under 60 s left before the deadline"
    return 0
  fi
  echo "=== $name" >>"$OUT/bench.log"
  STEP_FATAL=0 step "bench-$name" bench.log 90 "$BENCH" "$@" "${BENCH_ARGS[@]}" --json "$BENCH_TMP/$name.json"
}
if [[ -n ${TROUPE_TEST_MODEL:-} ]]; then
  bench_model smollm2-135m-q4_1 "$TROUPE_TEST_MODEL"
else
  bench_model smollm2-135m-q4_1-dummy --load-format dummy --model-shape smollm2-135m --weight-type q4_1
fi
if ((DRY_RUN)); then
  note "bench llama-3.2-1b (bf16, q8_0, q8_0 eager) skipped: dry run on $BENCH_DEVICE (minutes per shape)"
else
  bench_model llama-3.2-1b-q8_0 --load-format dummy --model-shape llama-3.2-1b --weight-type q8_0
  bench_model llama-3.2-1b-bf16 --load-format dummy --model-shape llama-3.2-1b --weight-type bf16
  # The same without CUDA graphs: what replaying decode graphs gains (or costs).
  bench_model llama-3.2-1b-q8_0-eager --load-format dummy --model-shape llama-3.2-1b --weight-type q8_0 --enforce-eager
fi
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

finish
