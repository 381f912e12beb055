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
# (today: summary.txt env.log build.log gpu-tests.log sanitizer.log).
#
# Sections (add yours where marked; keep the time budget):
#   0. environment       nvidia-smi, nvcc, compilers, cmake, the carried dependencies
#   1. build             configure with CUDA (Release, sm_90), build the targets below
#   2. gpu tests         ctest -L gpu (kernels/cuda conformance against the CPU kernels)
#   3. memory check      compute-sanitizer memcheck on part of the kernel tests
#   4. goldens           [later: the CUDA worker's stories260K / SmolLM2 goldens]
#   5. benchmarks        [later: decode 1 and 32 streams, prefill 512, HBM roofline fraction]
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
         test_cuda_launch_checks)

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
    return $rc
  }
  step memcheck sanitizer.log 110 sanitize
else
  echo "memcheck skipped (no compute-sanitizer or no time left)" | tee -a "$SUMMARY"
fi

# ---- 4. goldens on the cuda platform [later] --------------------------------------------------

# ---- 5. benchmarks [later] --------------------------------------------------------------------

echo "total $(elapsed)s, $( ((FAILED)) && echo FAILED || echo ok)" | tee -a "$SUMMARY"
exit $FAILED
