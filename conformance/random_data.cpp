#include "conformance/random_data.hpp"

#include <cstring>
#include <string>

namespace troupe::conformance {

namespace {

// Values k/1024 with k < 2048 are exact in f16; that is all the scales need.
uint16_t half_of_k(int k) {
  // k/1024 = 1.m * 2^e: the f16 bits by hand (k in [1, 2047]).
  int e = 0;
  while ((k >> (e + 1)) > 0) ++e;  // highest set bit of k
  const int mant = (k << (10 - e)) & 0x3ff;
  const int exp = e - 10 + 15;
  return static_cast<uint16_t>((exp << 10) | mant);
}

uint16_t bf16_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>(b >> 16);  // truncation: the weight is whatever these bits say
}

uint16_t half_of(float f) {  // only for |f| in [2^-14, 2): rounds the 10-bit mantissa down
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const int exp = static_cast<int>((b >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | ((b >> 13) & 0x3ffu));
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

struct Layout {
  int64_t elems, bytes;
  std::vector<int> half_offsets;  // f16 scale fields inside a block
  std::vector<int> e8m0_offsets = {};  // E8M0 scale bytes inside a block (MXFP4)
};

constexpr DType kMxfp4 = static_cast<DType>(39);  // GGUF's MXFP4: no DType enumerator

bool layout_of(DType t, Layout* l) {
  if (t == kMxfp4) {  // {u8 e, u8 qs[16]}
    *l = {32, 17, {}, {0}};
    return true;
  }
  switch (t) {
    case DType::q4_0: *l = {32, 18, {0}}; return true;
    case DType::q4_1: *l = {32, 20, {0, 2}}; return true;
    case DType::q5_0: *l = {32, 22, {0}}; return true;
    case DType::q5_1: *l = {32, 24, {0, 2}}; return true;
    case DType::q8_0: *l = {32, 34, {0}}; return true;
    case DType::q4_k: *l = {256, 144, {0, 2}}; return true;
    case DType::q6_k: *l = {256, 210, {208}}; return true;
    case DType::q2_k: *l = {256, 84, {80, 82}}; return true;
    case DType::q3_k: *l = {256, 110, {108}}; return true;
    case DType::q5_k: *l = {256, 176, {0, 2}}; return true;
    case DType::iq4_nl: *l = {32, 18, {0}}; return true;
    case DType::iq4_xs: *l = {256, 136, {0}}; return true;
    default: return false;
  }
}

}  // namespace

std::vector<float> random_floats(Rng& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

int64_t block_elems(DType type) {
  Layout l;
  return layout_of(type, &l) ? l.elems : 1;
}

Result<std::vector<uint8_t>> random_weight(Rng& rng, DType type, int64_t rows, int64_t cols, int64_t row_stride) {
  const int64_t packed = row_bytes(type, cols);
  if (packed <= 0) return invalid_argument("a row of " + std::to_string(cols) + " elements of " +
                                           std::string(to_string(type)) + " is not a whole number of blocks");
  const int64_t stride = row_stride > 0 ? row_stride : packed;
  std::vector<uint8_t> bytes(static_cast<size_t>(stride * rows));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::uniform_int_distribution<int> scale(4, 40);  // scales 4/1024 .. 40/1024
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = bytes.data() + r * stride;
    switch (type) {
      case DType::f32:
        for (int64_t i = 0; i < cols; ++i) {
          const float f = value(rng);
          std::memcpy(row + 4 * i, &f, 4);
        }
        break;
      case DType::f16:
        for (int64_t i = 0; i < cols; ++i) {
          float f = value(rng);
          if (f > -1.0f / 1024 && f < 1.0f / 1024) f = 1.0f / 1024;
          put16(row + 2 * i, half_of(f));
        }
        break;
      case DType::bf16:
        for (int64_t i = 0; i < cols; ++i) put16(row + 2 * i, bf16_of(value(rng)));
        break;
      default: {
        Layout l;
        if (!layout_of(type, &l))
          return not_supported("the conformance check cannot make weights of type " + std::string(to_string(type)));
        for (int64_t b = 0; b < cols / l.elems; ++b) {
          for (int off : l.half_offsets) put16(row + b * l.bytes + off, half_of_k(scale(rng)));
          // 2^(e - 128) with e in 117..125: scales 1/2048 .. 1/8, like the f16 ones.
          for (int off : l.e8m0_offsets) row[b * l.bytes + off] = static_cast<uint8_t>(117 + scale(rng) % 9);
        }
      }
    }
  }
  return bytes;
}

}  // namespace troupe::conformance
