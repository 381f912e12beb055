// The 32-element block, K-quant and IQ4_XS matmul kernels built with AVX-VNNI (this file
// alone gets -mavx2 -mfma -mf16c -mavxvnni): vpdpwssd fuses each 16-bit multiply-add
// with its accumulation. The integer sums are the same, so the results are
// bit-identical to the AVX2 kernels (matmul_impl.hpp).
#include "kernels/cpu/matmul_kquant_avx2.hpp"
#include "kernels/cpu/matmul_kx_avx2.hpp"
#include "kernels/cpu/matmul_q4q5_avx2.hpp"
#include "kernels/cpu/matmul_q8_avx2.hpp"

namespace troupe::kernels::cpu {

MatmulRangeFn matmul_kernel_avx2_vnni(DType type) {
  if (MatmulRangeFn kernel = b8_kernel(type)) return kernel;
  if (MatmulRangeFn kernel = q8_kernel(type)) return kernel;
  if (MatmulRangeFn kernel = kquant_kernel(type)) return kernel;
  if (MatmulRangeFn kernel = kx_kernel(type)) return kernel;
  return matmul_kernel_avx2(type);  // the other types gain nothing from VNNI
}

}  // namespace troupe::kernels::cpu
