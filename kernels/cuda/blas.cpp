// CublasGemm: row-major y = x W^T in cuBLAS's column-major terms. W, row-major
// [out][in], is the column-major in x out matrix A (lda = row stride in
// elements); x, row-major [n][in], is the column-major in x n matrix B
// (ldb = in); y, row-major [n][out], is the column-major out x n matrix C
// (ldc = out). So C = A^T B: transa = T, transb = N, m = out, n = n, k = in.
#include "kernels/cuda/blas.hpp"

#include <cublas_v2.h>

#include <climits>
#include <string>

namespace troupe::kernels::cuda {
namespace {

Status blas_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  return internal_error(std::string(what) + ": " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
}

cublasHandle_t as_handle(void* h) { return static_cast<cublasHandle_t>(h); }

}  // namespace

Result<std::unique_ptr<CublasGemm>> CublasGemm::create() {
  cublasHandle_t h = nullptr;
  const cublasStatus_t s = cublasCreate(&h);
  if (s != CUBLAS_STATUS_SUCCESS) return blas_status(s, "cublasCreate");
  std::unique_ptr<CublasGemm> g(new CublasGemm(h));
  // A workspace of our own (NVIDIA's advice for Hopper: 32 MiB), so a call captured into a
  // CUDA graph never needs cuBLAS to allocate one.
  const cudaError_t err = cudaMalloc(&g->workspace_, kWorkspaceBytes);
  if (err != cudaSuccess) {
    g->workspace_ = nullptr;
    (void)cudaGetLastError();
    return resource_exhausted(std::string("cudaMalloc of the cuBLAS workspace: ") + cudaGetErrorString(err));
  }
  return g;
}

CublasGemm::~CublasGemm() {
  (void)cublasDestroy(as_handle(handle_));
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
}

Status CublasGemm::gemm(DType type, const void* w, int64_t w_row_stride, int64_t in, int64_t out, const void* x,
                        int64_t n_tokens, float* y, cudaStream_t stream) {
  if (type != DType::f16 && type != DType::bf16)
    return not_supported("cuBLAS gemm: type " + std::string(to_string(type)) + " (only f16 and bf16)");
  if (in <= 0 || out <= 0 || n_tokens < 0) return invalid_argument("cuBLAS gemm: empty or negative shape");
  if (w_row_stride == 0) w_row_stride = in * 2;
  if (w_row_stride < in * 2 || w_row_stride % 2 != 0)
    return invalid_argument("cuBLAS gemm: row stride shorter than a row or not a whole number of elements");
  const int64_t lda = w_row_stride / 2;
  if (in > INT_MAX || out > INT_MAX || n_tokens > INT_MAX || lda > INT_MAX)
    return invalid_argument("cuBLAS gemm: a dimension exceeds INT_MAX");
  if (!is_aligned(w, 2) || !is_aligned(x, 2) || !is_aligned(y, 4))
    return invalid_argument("cuBLAS gemm: operands not aligned to their types");
  if (n_tokens == 0) return {};
  if (w == nullptr || x == nullptr || y == nullptr) return invalid_argument("cuBLAS gemm: null pointer");
  if (!stream_set_ || stream != stream_) {
    // Setting the stream puts cuBLAS back on its default workspace: ours again after it.
    TROUPE_RETURN_IF_ERROR(blas_status(cublasSetStream(as_handle(handle_), stream), "cublasSetStream"));
    TROUPE_RETURN_IF_ERROR(
        blas_status(cublasSetWorkspace(as_handle(handle_), workspace_, kWorkspaceBytes), "cublasSetWorkspace"));
    stream_ = stream;
    stream_set_ = true;
  }
  const cudaDataType_t t = type == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = 1.0f, beta = 0.0f;
  return blas_status(cublasGemmEx(as_handle(handle_), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out),
                                  static_cast<int>(n_tokens), static_cast<int>(in), &alpha, w, t,
                                  static_cast<int>(lda), x, t, static_cast<int>(in), &beta, y, CUDA_R_32F,
                                  static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
}

}  // namespace troupe::kernels::cuda
