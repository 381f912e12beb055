// troupe_bench_issue_mix: what the inner loops of the plain AVX2 batched tiles can
// reach on this core, apart from everything else a matmul does. Each loop below is
// the instruction mix of one tile's inner step, in registers or from L1, repeated;
// the result is in core cycles, from a chain of dependent scalar adds timed the same
// way (one add per cycle), so it holds whatever the clock does. Used to tell a tile
// that waits on memory or overhead from one at its instruction mix's bound
// (bench/HISTORY.md, "Where the AVX2 batched tiles stand on Zen 3").
//
// One step is one quad (4 levels, Q4_K/Q5_K/Q6_K) or one pair (2 levels, Q8_0's
// 16-bit tile) for R rows x T tokens: T/8 activation vectors, R broadcast levels,
// R x T/8 multiplies, each added into its own accumulator.
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Core cycles per second: 4 dependent adds per iteration, one per cycle.
double cycles_per_second() {
  constexpr long kIters = 200'000'000;
  uint64_t x = 1;
  const double t0 = seconds_now();
  for (long i = 0; i < kIters; ++i)
    asm volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0" : "+r"(x) : "r"(i));
  return 4.0 * kIters / (seconds_now() - t0);
}

alignas(64) char buffer[8192];
constexpr long kLoops = 20'000'000;

#define TROUPE_CLOBBERS                                                                                          \
  "rcx", "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9", "ymm10", "ymm11", "ymm12", \
      "ymm13", "ymm14", "ymm15", "memory"
// Runs `body` (8 steps) kLoops times; returns the seconds taken.
#define TROUPE_TIME(body)                                                                                   \
  [] {                                                                                                      \
    const double t0 = seconds_now();                                                                        \
    asm volatile("mov %0, %%rcx\n1:\n" body "dec %%rcx\n jnz 1b\n" ::"r"(kLoops), "r"(buffer) : TROUPE_CLOBBERS); \
    return seconds_now() - t0;                                                                              \
  }()
#define TROUPE_X8(step) step(0) step(1) step(2) step(3) step(4) step(5) step(6) step(7)

// 2 rows x 16 tokens, the multiplies and adds alone: the broadcast levels of the 2 rows
// (ymm10, ymm11) times 2 activation vectors (ymm8, ymm9), each product added into its
// own accumulator (ymm0..3) with `add`.
#define STEP_R2T16(mul, add)                                                                          \
  #mul " %%ymm8, %%ymm10, %%ymm12\n " #add " %%ymm12, %%ymm0, %%ymm0\n"                                \
  #mul " %%ymm9, %%ymm10, %%ymm13\n " #add " %%ymm13, %%ymm1, %%ymm1\n"                                \
  #mul " %%ymm8, %%ymm11, %%ymm14\n " #add " %%ymm14, %%ymm2, %%ymm2\n"                                \
  #mul " %%ymm9, %%ymm11, %%ymm15\n " #add " %%ymm15, %%ymm3, %%ymm3\n"
// 8-bit quads, 2 rows x 16 tokens (the Q5_K/Q6_K tile): x0 x1, w0 w1, 4 vpmaddubsw + 4 vpaddw.
#define QUAD_R2T16(k)                                                                                  \
  "vmovdqa (" #k ")*64(%1), %%ymm8\n vmovdqa (" #k ")*64+32(%1), %%ymm9\n"                             \
  "vpbroadcastd (" #k ")*4+4096(%1), %%ymm10\n vpbroadcastd (" #k ")*4+4160(%1), %%ymm11\n"            \
  STEP_R2T16(vpmaddubsw, vpaddw)
// The same multiplies and adds with no loads: the vector pipes alone.
#define QUAD_R2T16_NOLOAD(k) STEP_R2T16(vpmaddubsw, vpaddw)
// 2 rows x 32 tokens: 4 activation vectors (ymm8..11) loaded for the 2 rows' broadcast
// levels (ymm12, ymm13, by `bcast`), 8 multiplies `mul`, each added by `add` into its own
// accumulator (ymm0..7).
#define STEP_R2T32(k, bcast, mul, add)                                                                \
  "vmovdqa (" #k ")*128(%1), %%ymm8\n vmovdqa (" #k ")*128+32(%1), %%ymm9\n"                          \
  "vmovdqa (" #k ")*128+64(%1), %%ymm10\n vmovdqa (" #k ")*128+96(%1), %%ymm11\n"                     \
  #bcast " (" #k ")*4+4096(%1), %%ymm12\n " #bcast " (" #k ")*4+4160(%1), %%ymm13\n"                  \
  #mul " %%ymm8, %%ymm12, %%ymm14\n " #add " %%ymm14, %%ymm0, %%ymm0\n"                                \
  #mul " %%ymm9, %%ymm12, %%ymm15\n " #add " %%ymm15, %%ymm1, %%ymm1\n"                                \
  #mul " %%ymm10, %%ymm12, %%ymm14\n " #add " %%ymm14, %%ymm2, %%ymm2\n"                               \
  #mul " %%ymm11, %%ymm12, %%ymm15\n " #add " %%ymm15, %%ymm3, %%ymm3\n"                               \
  #mul " %%ymm8, %%ymm13, %%ymm14\n " #add " %%ymm14, %%ymm4, %%ymm4\n"                                \
  #mul " %%ymm9, %%ymm13, %%ymm15\n " #add " %%ymm15, %%ymm5, %%ymm5\n"                                \
  #mul " %%ymm10, %%ymm13, %%ymm14\n " #add " %%ymm14, %%ymm6, %%ymm6\n"                               \
  #mul " %%ymm11, %%ymm13, %%ymm15\n " #add " %%ymm15, %%ymm7, %%ymm7\n"
// 8-bit quads, 2 rows x 32 tokens.
#define QUAD_R2T32(k) STEP_R2T32(k, vpbroadcastd, vpmaddubsw, vpaddw)
// 16-bit pairs, 2 rows x 32 tokens (the Q8_0/Q4_1/Q5_1 tile): 8 vpmaddwd + 8 vpaddd.
#define PAIR_R2T32(k) STEP_R2T32(k, vbroadcastss, vpmaddwd, vpaddd)
// Independent multiplies alone, register to register: the multiply rate.
#define MUL_ONLY(k) "vpmaddubsw %%ymm14, %%ymm15, %%ymm" #k "\n"

struct Mix {
  const char* name;
  double seconds;
  int multiplies_per_step;
  int macs_per_step;
};

}  // namespace

int main() {
  if (!__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr, "troupe_bench_issue_mix: this CPU has no AVX2\n");
    return 1;
  }
  const double hz = cycles_per_second();
  const Mix mixes[] = {
      {"vpmaddubsw alone (8 independent)", TROUPE_TIME(TROUPE_X8(MUL_ONLY)), 1, 32},
      {"8-bit quads, 2 rows x 16 tokens (Q5_K/Q6_K tile)", TROUPE_TIME(TROUPE_X8(QUAD_R2T16)), 4, 128},
      {"  the same, no loads", TROUPE_TIME(TROUPE_X8(QUAD_R2T16_NOLOAD)), 4, 128},
      {"8-bit quads, 2 rows x 32 tokens", TROUPE_TIME(TROUPE_X8(QUAD_R2T32)), 8, 256},
      {"16-bit pairs, 2 rows x 32 tokens (Q8_0 tile)", TROUPE_TIME(TROUPE_X8(PAIR_R2T32)), 8, 128},
  };
  std::printf("core clock while timed: %.2f GHz (dependent scalar adds)\n", hz / 1e9);
  std::printf("%-52s %14s %18s %12s\n", "inner step", "cycles/step", "multiplies/cycle", "MACs/cycle");
  for (const Mix& m : mixes) {
    const double cycles = m.seconds * hz / (8.0 * kLoops);
    std::printf("%-52s %14.2f %18.2f %12.1f\n", m.name, cycles, m.multiplies_per_step / cycles,
                m.macs_per_step / cycles);
  }
  return 0;
}
