#include "runtime/model_files/dummy/random_weights.hpp"

#include <cmath>
#include <cstring>

#include "runtime/model_files/dummy/model_shapes.hpp"
#include "troupe/check.hpp"

namespace troupe::dummy {
namespace {

constexpr float kRange = 1.0f / 32.0f;  // values lie in about [-kRange, kRange]

uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// splitmix64: a fast generator with a 64-bit state, seeded per row.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix(state_ += 0x9e3779b97f4a7c15ull); }
  /// Uniform in [-kRange, kRange) with 24 bits of resolution.
  float uniform() {
    const auto u = static_cast<int32_t>(next() >> 40) - (1 << 23);
    return static_cast<float>(u) * (kRange / static_cast<float>(1 << 23));
  }
  void bytes(uint8_t* dst, size_t n) {
    while (n >= 8) {
      const uint64_t r = next();
      std::memcpy(dst, &r, 8);
      dst += 8;
      n -= 8;
    }
    if (n > 0) {
      const uint64_t r = next();
      std::memcpy(dst, &r, n);
    }
  }

 private:
  uint64_t state_;
};

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// IEEE half from float, rounding to nearest even (subnormals included).
uint16_t to_f16(float f) {
  const uint32_t u = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const float a = std::fabs(f);
  if (!(a < 65520.0f)) return static_cast<uint16_t>(sign | 0x7c00);  // overflow: inf (NaN never occurs here)
  if (a < 6.103515625e-05f) {                                        // subnormal or zero: units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f)));
  }
  const uint32_t au = bits_of(a);
  uint32_t h = ((au >> 13) - ((127 - 15) << 10));  // rebias exponent, keep 10 mantissa bits
  const uint32_t rest = au & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // may carry into the exponent: still correct
  return static_cast<uint16_t>(sign | h);
}

uint16_t to_bf16(float f) {
  const uint32_t u = bits_of(f);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// One block of a quantized type: fixed scale fields (up to two runs of bytes,
// `head[i]` at offset `at[i]`), random code bytes everywhere else.
struct BlockRecipe {
  int64_t block_bytes = 0;
  int parts = 0;
  int at[2] = {};
  int len[2] = {};
  uint8_t head[2][32] = {};
};

BlockRecipe recipe(DType type) {
  BlockRecipe r;
  r.block_bytes = traits(type).block_bytes;
  auto start = [&](int offset) { r.at[r.parts++] = offset; };
  auto half = [&](float v) {
    put16(r.head[r.parts - 1] + r.len[r.parts - 1], to_f16(v));
    r.len[r.parts - 1] += 2;
  };
  auto bytes = [&](uint8_t v, int n) {
    std::memset(r.head[r.parts - 1] + r.len[r.parts - 1], v, static_cast<size_t>(n));
    r.len[r.parts - 1] += n;
  };
  start(0);
  if (type == kMxfp4) {  // {e, qs[16]}: x = 2^(e - 128) * grid[q], grid in -12..12: e 119 gives |x| <= 12/512
    bytes(119, 1);
    return r;
  }
  switch (type) {
    case DType::q8_0: half(kRange / 128); break;                   // x = d * int8
    case DType::q4_0: half(kRange / 8); break;                     // x = d * (q - 8), q in 0..15
    case DType::q5_0: half(kRange / 16); break;                    // x = d * (q - 16), q in 0..31
    case DType::q4_1: half(2 * kRange / 15), half(-kRange); break; // x = d * q + m, q in 0..15
    case DType::q5_1: half(2 * kRange / 31), half(-kRange); break; // x = d * q + m, q in 0..31
    case DType::iq4_nl: half(kRange / 127); break;                 // x = d * grid[q], grid in -127..113
    case DType::q4_k:  // {d, dmin, scales[12], qs[128]}: x = d*63*q - dmin*63, every 6-bit scale and min 63
      half(2 * kRange / (15 * 63)), half(kRange / 63), bytes(0xff, 12);
      break;
    case DType::q5_k:  // {d, dmin, scales[12], qh[32], qs[128]}: x = d*63*q - dmin*63, q in 0..31
      half(2 * kRange / (31 * 63)), half(kRange / 63), bytes(0xff, 12);
      break;
    case DType::q6_k:  // {ql[128], qh[64], scales[16], d}: x = d * 8 * (q - 32), q in 0..63
      r.at[0] = 192;
      bytes(8, 16), half(kRange / (32 * 8));
      break;
    case DType::q2_k:  // {scales[16], qs[64], d, dmin}: x = d*15*q - dmin*15, every scale and min 15
      bytes(0xff, 16);
      start(80);
      half(2 * kRange / (3 * 15)), half(kRange / 15);
      break;
    case DType::q3_k:  // {hmask[32], qs[64], scales[12], d}: x = d * (0 - 32) * q, q in -4..3
      r.at[0] = 96;
      bytes(0, 12), half(kRange / 128);
      break;
    case DType::iq4_xs:  // {d, scales_h, scales_l[4], qs[128]}: x = d * (63 - 32) * grid[q]
      half(kRange / (31 * 127)), bytes(0xff, 6);
      break;
    default: TROUPE_CHECK(false, "no random block recipe for this type");
  }
  return r;
}

}  // namespace

uint64_t tensor_seed(uint64_t model_seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return mix(model_seed ^ mix(h));
}

void fill_random_rows(DType type, uint64_t seed, int64_t ne0, int64_t begin, int64_t end, uint8_t* dst) {
  const int64_t rb = row_bytes(type, ne0);
  TROUPE_CHECK(rb > 0, "fill_random_rows: a row is not a whole number of blocks");
  const BlockRecipe rec = traits(type).quantized ? recipe(type) : BlockRecipe{};
  for (int64_t r = begin; r < end; ++r, dst += rb) {
    Rng rng(mix(seed + static_cast<uint64_t>(r) * 0xd1342543de82ef95ull));
    switch (type) {
      case DType::f32:
        for (int64_t i = 0; i < ne0; ++i) {
          const float v = rng.uniform();
          std::memcpy(dst + 4 * i, &v, 4);
        }
        continue;
      case DType::f16:
        for (int64_t i = 0; i < ne0; ++i) put16(dst + 2 * i, to_f16(rng.uniform()));
        continue;
      case DType::bf16:
        for (int64_t i = 0; i < ne0; ++i) put16(dst + 2 * i, to_bf16(rng.uniform()));
        continue;
      default: break;
    }
    rng.bytes(dst, static_cast<size_t>(rb));
    for (uint8_t* b = dst; b < dst + rb; b += rec.block_bytes)
      for (int p = 0; p < rec.parts; ++p) std::memcpy(b + rec.at[p], rec.head[p], static_cast<size_t>(rec.len[p]));
  }
}

void fill_constant_f32(float value, int64_t n, uint8_t* dst) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + 4 * i, &value, 4);
}

}  // namespace troupe::dummy
