#!/usr/bin/env bash
# scripts/gpu-check.sh's verdict pieces on logs shaped as gtest writes them
# (ctest gpu_check_lib): on a machine with a device, a deliberate skip (the launch
# checks' case that needs no device) must not fail the run; a test that found no
# device must; and the roofline bandwidth follows the device's name.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-check-lib.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
expect() {  # WHAT GOT WANT
  if [[ $2 != "$3" ]]; then
    echo "FAIL: $1: got '$2', want '$3'"
    fail=1
  fi
}

# A GPU run: every kernel test passed, the launch checks skipped the case that needs no device.
cat >"$work/gpu.log" <<'LOG'
[ RUN      ] CudaLaunchChecks.RefusesWithoutADevice
tests/kernels/cuda/test_cuda_launch_checks.cpp:23: Skipped
a CUDA device is present
[  SKIPPED ] CudaLaunchChecks.RefusesWithoutADevice (1 ms)
[ RUN      ] CudaMatmul.Q4K
[       OK ] CudaMatmul.Q4K (12 ms)
[  PASSED  ] 41 tests.
[  SKIPPED ] 1 test, listed below:
LOG
expect "deliberate skip on a GPU run" "$(device_absent_skips "$work/gpu.log")" 0

# troupe's build found no device although the probe did.
cat >"$work/nodevice.log" <<'LOG'
[ RUN      ] CudaMatmul.Q4K
tests/kernels/cuda/cuda_test_util.hpp:31: Skipped
no usable CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected (100)
[  SKIPPED ] CudaMatmul.Q4K (0 ms)
[ RUN      ] CudaMatmul.Q6K
tests/kernels/cuda/cuda_test_util.hpp:31: Skipped
no usable CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected (100)
[  SKIPPED ] CudaMatmul.Q6K (0 ms)
LOG
expect "device-absent skips" "$(device_absent_skips "$work/nodevice.log")" 2
expect "no log" "$(device_absent_skips "$work/missing.log")" 0

# The fixture and the script agree on the tag.
grep -q "GTEST_SKIP() << \"${GPU_CHECK_NO_DEVICE_TAG}\"" tests/kernels/cuda/cuda_test_util.hpp ||
  { echo "FAIL: tests/kernels/cuda/cuda_test_util.hpp does not skip with '$GPU_CHECK_NO_DEVICE_TAG'"; fail=1; }

expect "H100 SXM" "$(hbm_gbps_of 'NVIDIA H100 80GB HBM3')" 3350
expect "H200" "$(hbm_gbps_of 'NVIDIA H200')" 4800
expect "unknown" "$(hbm_gbps_of 'NVIDIA GeForce GTX 1080')" ""

((fail)) && exit 1
echo "gpu-check lib: ok"
