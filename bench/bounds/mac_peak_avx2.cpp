// Compiled with -mavx2 alone; called only after the CPU reported AVX2.
#include "bench/bounds/mac_peak.hpp"

#include <immintrin.h>

namespace troupe::bench {
namespace {

constexpr int kAcc = 8;  // independent accumulators: hides the multiply latency

// Keeps the compiler from treating `v` as loop-invariant (no instruction emitted).
inline void opaque(__m256i& v) { asm volatile("" : "+x"(v)); }

int64_t fold(const __m256i* acc) {
  __m256i s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm256_add_epi32(s, acc[i]);
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  int64_t t = 0;
  for (int32_t l : lanes) t += l;
  return t;
}

}  // namespace

// Both loops do kAcc vectors of 32 MACs per iteration: maddubs does 32 byte
// products per instruction, maddwd 16 word products, so it runs twice.
int64_t mac_peak_macs(int64_t iterations) { return iterations * kAcc * 32; }

int64_t mac_peak_maddubs(int64_t iterations) {
  __m256i acc[kAcc], a[kAcc];
  for (int i = 0; i < kAcc; ++i) {
    acc[i] = _mm256_setzero_si256();
    a[i] = _mm256_set1_epi8(static_cast<char>(1 + i));
  }
  __m256i b = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t it = 0; it < iterations; ++it) {
    opaque(b);
    for (int i = 0; i < kAcc; ++i)
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a[i], b), ones));
  }
  return fold(acc);
}

int64_t mac_peak_maddwd(int64_t iterations) {
  __m256i acc[kAcc], a[kAcc];
  for (int i = 0; i < kAcc; ++i) {
    acc[i] = _mm256_setzero_si256();
    a[i] = _mm256_set1_epi16(static_cast<short>(1 + i));
  }
  __m256i b0 = _mm256_set1_epi16(3), b1 = _mm256_set1_epi16(5);
  for (int64_t it = 0; it < iterations; ++it) {
    opaque(b0);
    opaque(b1);
    for (int i = 0; i < kAcc; ++i)
      acc[i] = _mm256_add_epi32(acc[i], _mm256_add_epi32(_mm256_madd_epi16(a[i], b0), _mm256_madd_epi16(a[i], b1)));
  }
  return fold(acc);
}

}  // namespace troupe::bench
