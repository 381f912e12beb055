# Functions of scripts/gpu-check.sh that a test runs on their own
# (tests/scripts/gpu_check_lib_test.sh): sourced, not run.

# The tag every kernels/cuda test prints when it skips for want of a usable device
# (tests/kernels/cuda/cuda_test_util.hpp). Other skips are deliberate (the launch
# checks skip one case *because* a device is present) and never count.
GPU_CHECK_NO_DEVICE_TAG="no usable CUDA device: "

# device_absent_skips LOG: how many tests in LOG skipped because they found no device.
device_absent_skips() {
  [[ -f $1 ]] || { echo 0; return; }
  grep -c -- "$GPU_CHECK_NO_DEVICE_TAG" "$1" || true
}

# hbm_gbps_of "GPU NAME": the device's memory bandwidth in GB/s (the roofline's
# denominator), from its name as nvidia-smi prints it; empty when unknown.
hbm_gbps_of() {
  case "$1" in
    *H200*) echo 4800 ;;
    *H100*NVL*) echo 3900 ;;
    *H100*PCIe*) echo 2000 ;;
    *H100*) echo 3350 ;;   # H100 SXM (80 GB HBM3)
    *GH200*) echo 4000 ;;
    *A100*80GB*) echo 2039 ;;
    *A100*) echo 1555 ;;
    *L40S*) echo 864 ;;
    *) echo "" ;;
  esac
}
