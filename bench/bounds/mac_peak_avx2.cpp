// Compiled with -mavx2 alone; called only after the CPU reported AVX2.
#include "bench/bounds/mac_peak.hpp"

#include <immintrin.h>

#include "bench/bounds/mac_loop.hpp"

namespace troupe::bench {
namespace {

constexpr int kAcc = 8;  // independent accumulators: hides the multiply latency

}  // namespace

// Every loop does kAcc vectors of 32 MACs per iteration: maddubs does 32 byte
// products per instruction, maddwd 16 word products, so it runs twice.
int64_t mac_peak_macs(int64_t iterations) { return iterations * kAcc * 32; }

int64_t mac_peak_maddubs(int64_t iterations) {
  __m256i b[] = {_mm256_set1_epi8(3)};
  const __m256i ones = _mm256_set1_epi16(1);
  return mac_loop<kAcc>(
      iterations, [](int i) { return _mm256_set1_epi8(static_cast<char>(1 + i)); }, b,
      [&](__m256i acc, __m256i a, const __m256i* v) {
        return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, v[0]), ones));
      });
}

int64_t mac_peak_maddubs_i16(int64_t iterations) {
  __m256i b[] = {_mm256_set1_epi8(3)};
  return mac_loop<kAcc>(
      iterations, [](int i) { return _mm256_set1_epi8(static_cast<char>(1 + i)); }, b,
      [](__m256i acc, __m256i a, const __m256i* v) { return _mm256_add_epi16(acc, _mm256_maddubs_epi16(a, v[0])); });
}

int64_t mac_peak_maddwd(int64_t iterations) {
  __m256i b[] = {_mm256_set1_epi16(3), _mm256_set1_epi16(5)};
  return mac_loop<kAcc>(
      iterations, [](int i) { return _mm256_set1_epi16(static_cast<short>(1 + i)); }, b,
      [](__m256i acc, __m256i a, const __m256i* v) {
        return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(a, v[0]), _mm256_madd_epi16(a, v[1])));
      });
}

}  // namespace troupe::bench
