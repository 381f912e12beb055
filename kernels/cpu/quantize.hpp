// Conversions between float rows and the GGUF storage types.
#pragma once

#include <cstdint>

#include "troupe/dtype.hpp"

namespace troupe::kernels::cpu {

/// True when dequantize_row / matmul / quantize_row_reference handle `type`:
/// F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS.
bool supports_type(DType type);

/// dst[0..n) = the values of n elements of `type` at src. n must be a whole
/// number of blocks (TROUPE_CHECK).
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

/// Straightforward (not size-optimal) quantizer into `type`'s GGUF layout, for
/// tests, benchmarks and building test models. dst holds row_bytes(type, n).
void quantize_row_reference(DType type, const float* src, void* dst, int64_t n);

}  // namespace troupe::kernels::cpu
