// Compiled with -mavx512f -mavx512vl -mavx512vnni -mamx-tile -mamx-int8; the loops run
// only after have_avx512_vnni() / have_amx_int8() said yes.
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "bench/bounds/mac_loop.hpp"
#include "bench/bounds/mac_peak.hpp"

namespace troupe::bench {
namespace {

constexpr int kAcc = 12;  // vpdpbusd: latency 5, up to 2 per cycle

// Linux: ask for the AMX tile data state (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

struct TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

}  // namespace

bool have_avx512_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512vnni");
}

bool have_amx_int8() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = (d >> 24) & 1, int8 = (d >> 25) & 1;
    if (!tile || !int8) return false;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
}

int64_t mac_peak_vnni256_macs(int64_t iterations) { return iterations * kAcc * 32; }

int64_t mac_peak_vnni256(int64_t iterations) {
  __m256i b[] = {_mm256_set1_epi8(3)};
  return mac_loop<kAcc>(
      iterations, [](int i) { return _mm256_set1_epi8(static_cast<char>(1 + i)); }, b,
      [](__m256i acc, __m256i a, const __m256i* v) { return _mm256_dpbusd_epi32(acc, a, v[0]); });
}

int64_t mac_peak_vnni512_macs(int64_t iterations) { return iterations * kAcc * 64; }

int64_t mac_peak_vnni512(int64_t iterations) {
  __m512i b[] = {_mm512_set1_epi8(3)};
  return mac_loop<kAcc>(
      iterations, [](int i) { return _mm512_set1_epi8(static_cast<char>(1 + i)); }, b,
      [](__m512i acc, __m512i a, const __m512i* v) { return _mm512_dpbusd_epi32(acc, a, v[0]); });
}

int64_t mac_peak_wssd512_macs(int64_t iterations) { return iterations * kAcc * 32; }

int64_t mac_peak_wssd512(int64_t iterations) {
  __m512i b[] = {_mm512_set1_epi16(3)};
  return mac_loop<kAcc>(
      iterations, [](int i) { return _mm512_set1_epi16(static_cast<int16_t>(1 + i)); }, b,
      [](__m512i acc, __m512i a, const __m512i* v) { return _mm512_dpwssd_epi32(acc, a, v[0]); });
}

// Four accumulator tiles (0-3) fed by two A tiles (4, 6) and two B tiles (5, 7):
// each tdpbusd does 16 rows x 16 int32 columns x 64 bytes.
int64_t mac_peak_amx_macs(int64_t iterations) { return iterations * 4 * 16 * 16 * 64; }

int64_t mac_peak_amx(int64_t iterations) {
  TileConfig cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
  alignas(64) int8_t ab[16 * 64];
  for (int i = 0; i < 16 * 64; ++i) ab[i] = static_cast<int8_t>(i % 7 + 1);
  alignas(64) int32_t c[16 * 16];
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbusd(0, 4, 5);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 6, 5);
    _tile_dpbusd(3, 6, 7);
  }
  // Tile numbers are immediates: store each tile by name.
  int64_t sum = 0;
  auto add = [&] {
    for (int32_t v : c) sum += v;
  };
  _tile_stored(0, c, 64);
  add();
  _tile_stored(1, c, 64);
  add();
  _tile_stored(2, c, 64);
  add();
  _tile_stored(3, c, 64);
  add();
  _tile_release();
  return sum;
}

}  // namespace troupe::bench
