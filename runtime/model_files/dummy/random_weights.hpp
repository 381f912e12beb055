// Random weights written straight into a GGUF storage type, row by row, from a
// seed: row r of a tensor depends only on (tensor seed, r), so rows can be made
// in any order on any number of threads and always give the same bytes.
//
// Every type holds values spread uniformly over about [-1/32, 1/32] (standard
// deviation ~0.018, like the usual N(0, 0.02) initialisation): f32 takes
// 24-bit uniform values, f16 and bf16 round them; a quantized block gets fixed
// scales chosen so that its uniformly random codes span that range (Q8_0:
// d = 1/32/128 with random int8 codes; Q4_1: d = 1/240, m = -1/32; Q4_K: all
// sub-block scales and mins 63; Q6_K: scales 8; IQ4_NL: d = 1/32/127, ...). Nothing is quantized
// from floats, so no quantizer is needed and generation is fast.
#pragma once

#include <cstdint>
#include <string_view>

#include "troupe/dtype.hpp"

namespace troupe::dummy {

/// The seed of one tensor: the model seed mixed with a hash of the tensor's name.
uint64_t tensor_seed(uint64_t model_seed, std::string_view tensor_name);

/// Writes rows [begin, end) of a tensor of `type` with `ne0` elements per row to `dst`
/// (row_bytes(type, ne0) bytes per row). `type` is one of dummy_weight_types().
void fill_random_rows(DType type, uint64_t seed, int64_t ne0, int64_t begin, int64_t end, uint8_t* dst);

/// Writes `n` f32 copies of `value` (norm weights: 1).
void fill_constant_f32(float value, int64_t n, uint8_t* dst);

}  // namespace troupe::dummy
