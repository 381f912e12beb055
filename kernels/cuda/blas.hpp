// F16 / BF16 GEMM through cuBLAS (cublasGemmEx): the path for unquantized
// half-precision weights once activations are converted to the same type
// (convert_from_f32 in elementwise.hpp).
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/cuda/common.hpp"

namespace troupe::kernels::cuda {

/// One cuBLAS handle, bound to the device current when it was created. Not
/// thread-safe: one per worker thread / stream owner.
class CublasGemm {
 public:
  /// A handle on the current device, or the cuBLAS status as an error.
  static Result<std::unique_ptr<CublasGemm>> create();
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  /// y[t][o] = sum_i x[t][i] * W[o][i] with f32 accumulation and f32 output.
  /// type is f16 or bf16 for both W ([out] rows of [in] elements, row o at
  /// byte o * w_row_stride; 0: contiguous) and x ([n_tokens][in], contiguous).
  /// y is [n_tokens][out]. All dimensions must fit cuBLAS's int.
  Status gemm(DType type, const void* w, int64_t w_row_stride, int64_t in, int64_t out, const void* x,
              int64_t n_tokens, float* y, cudaStream_t stream);

 private:
  explicit CublasGemm(void* handle) : handle_(handle) {}
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  void* handle_;  // cublasHandle_t
  void* workspace_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool stream_set_ = false;
};

}  // namespace troupe::kernels::cuda
