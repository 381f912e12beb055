// matmul front end: checks shapes, quantizes the activations once, then splits
// the output rows over the pool and runs the ISA's range kernel.
#include "kernels/cpu/matmul.hpp"

#include <algorithm>
#include <bit>
#include <vector>

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/matmul_impl.hpp"
#include "kernels/cpu/quantize.hpp"
#include "troupe/check.hpp"

namespace troupe::kernels::cpu {
namespace {

// Rows per work unit: keeps every thread's range a multiple of the kernels' row tiles.
constexpr int64_t kRowUnit = 8;
// Below this many weight bytes x tokens a call stays on one thread: waking
// workers would cost more than it saves.
constexpr int64_t kMinParallelWork = 48 * 1024;

MatmulRangeFn kernel_for(Isa isa, DType type) {
#if defined(TROUPE_KERNELS_HAVE_AVX512_VNNI)
  if (isa == Isa::avx512_vnni) return matmul_kernel_avx512_vnni(type);
#endif
#if defined(TROUPE_KERNELS_HAVE_AVX2_VNNI)
  if (isa == Isa::avx2_vnni) return matmul_kernel_avx2_vnni(type);
#endif
#if defined(TROUPE_KERNELS_HAVE_AVX2)
  if (is_avx2(isa)) return matmul_kernel_avx2(type);
#endif
  (void)isa;
  return matmul_kernel_scalar(type);
}

// Token t's blocks into lane `lane` of its group's ActQ16x8 blocks.
void scatter_act_group(const ActQ16* row, int64_t nb, ActQ16x8* group, int lane) {
  for (int64_t b = 0; b < nb; ++b) {
    group[b].d[lane] = row[b].d;
    group[b].s[lane] = row[b].s;
    for (int i = 0; i < kQK / 2; ++i) {
      const uint32_t lo = static_cast<uint16_t>(row[b].qs[2 * i]);
      const uint32_t hi = static_cast<uint16_t>(row[b].qs[2 * i + 1]);
      group[b].q[i][lane] = static_cast<int32_t>(lo | hi << 16);
    }
  }
}

void clear_act_group_lane(ActQ16x8* group, int64_t nb, int lane) {
  for (int64_t b = 0; b < nb; ++b) {
    group[b].d[lane] = 0.0f;
    group[b].s[lane] = 0.0f;
    for (int i = 0; i < kQK / 2; ++i) group[b].q[i][lane] = 0;
  }
}

// Scratch for quantized activations (one per format: a pass may need several; 0-2)
// and staged results (3), reused across calls by each thread; 64-byte aligned.
uint8_t* scratch(int which, size_t bytes) {
  thread_local std::vector<uint64_t> bufs[4];
  std::vector<uint64_t>& buf = bufs[which];
  if (buf.size() * 8 < bytes + 64) buf.resize((bytes + 64 + 7) / 8);
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
}

void for_tokens(ThreadPool* pool, int64_t n_tokens, int64_t in, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool != nullptr && pool->size() > 1 && n_tokens * in >= 16 * 1024) {
    pool->parallel_for(n_tokens, fn);
  } else {
    fn(0, n_tokens);
  }
}

}  // namespace

ActFormat act_format(DType type) {
  if (type == kMxfp4) return ActFormat::q8_32;  // MXFP4's levels are IQ4_NL-like (no enumerator to switch on)
  switch (type) {
    // 8-bit activations where the weights have at most 5 bits or 16 levels (llama.cpp's
    // q8_0 blocks do the same); Q4_1/Q5_1 (whose min term meets the activations' float
    // sum) and Q8_0 keep 16 bits: with 8, Q8_0 files drift from an fp64 reference by up
    // to 0.02 logprob (the arch goldens allow 2e-3) and SmolLM2-135M's Q8_0 output
    // matrix no longer answers "Paris" (docs/kernels.md, bench/HISTORY.md).
    case DType::q4_0: case DType::q5_0: case DType::iq4_nl:
      return ActFormat::q8_32;
    case DType::q4_1: case DType::q5_1: case DType::q8_0:
      return ActFormat::q8;
    case DType::q2_k: case DType::q3_k: case DType::q4_k: case DType::q5_k: case DType::q6_k: case DType::iq4_xs:
      return ActFormat::q8k;
    default:
      return ActFormat::f32;
  }
}

namespace {

// Bytes of the activations prepare_activations lays out for `fmt` (rows, then groups).
size_t act_bytes(Isa isa, ActFormat fmt, int64_t in, int64_t n_tokens) {
  auto rows = [&](size_t row) { return (row * static_cast<size_t>(n_tokens) + 63) & ~size_t{63}; };
  switch (fmt) {
    case ActFormat::f32:
      return 0;
    case ActFormat::q8: {
      const int64_t nb = in / kQK;
      const bool wide = group_tokens(isa) == 16;
      const int64_t groups = n_tokens <= 1 ? 0 : wide ? act_groups16(n_tokens) : act_groups(isa, n_tokens);
      return rows(nb * sizeof(ActQ16)) +
             static_cast<size_t>(groups * nb) * (wide ? sizeof(ActQ16x16) : sizeof(ActQ16x8));
    }
    case ActFormat::q8_32: {
      const int64_t nb = in / kQK;
      return rows(nb * sizeof(ActQ8)) + static_cast<size_t>(act_groups16_q8(isa, n_tokens) * nb) * sizeof(ActQ8x16);
    }
    case ActFormat::q8k: {
      const int64_t nb = in / kQKK;
      return rows(nb * sizeof(ActQ8K)) + static_cast<size_t>(act_groups16_q8k(isa, n_tokens) * nb) * sizeof(ActQ8Kx16);
    }
  }
  return 0;
}

// Quantizes x once into the format `fmt` wants and points args at it: into `buffer` (64-byte
// aligned, act_bytes of it) when given, else into this thread's scratch.
void prepare_activations(Isa isa, ActFormat fmt, int64_t in, const float* x, int64_t n_tokens, ThreadPool* pool,
                         MatmulArgs* args, uint8_t* buffer = nullptr) {
  switch (fmt) {
    case ActFormat::f32:
      return;
    case ActFormat::q8: {
      const int64_t nb = in / kQK;
      const int64_t row = nb * static_cast<int64_t>(sizeof(ActQ16));
      const bool wide = group_tokens(isa) == 16;
      const int64_t groups = n_tokens <= 1 ? 0 : wide ? act_groups16(n_tokens) : act_groups(isa, n_tokens);
      const size_t group_bytes = wide ? sizeof(ActQ16x16) : sizeof(ActQ16x8);
      const size_t row_part = static_cast<size_t>(row * n_tokens + 63) & ~size_t{63};
      const size_t bytes = row_part + static_cast<size_t>(groups * nb) * group_bytes;
      auto* base = buffer != nullptr ? buffer : scratch(0, bytes);
      auto quantize = [&](int64_t t) {
        auto* blocks = reinterpret_cast<ActQ16*>(base + t * row);
        if (is_avx2(isa)) {
          quantize_act_q16_avx2(x + t * in, in, blocks);
        } else {
          quantize_act_q16(x + t * in, in, blocks);
        }
        return blocks;
      };
      args->xq = base;
      args->xq_row_bytes = row;
      args->xg = nullptr;
      args->xg16 = nullptr;
      args->n_groups = groups;
      if (wide) {
#if defined(TROUPE_KERNELS_HAVE_AVX512_VNNI)
        // Work units: a group (its tokens quantized, then transposed into lanes), then
        // the tokens after the groups one by one.
        auto* xg = reinterpret_cast<ActQ16x16*>(base + row_part);
        const int64_t grouped = std::min(n_tokens, groups * 16);
        const int64_t units = groups + (n_tokens - grouped);
        auto fn = [&](int64_t u0, int64_t u1) {
          for (int64_t u = u0; u < u1; ++u) {
            if (u >= groups) {
              quantize(grouped + (u - groups));
              continue;
            }
            const int64_t t0 = u * 16, t1 = std::min(n_tokens, t0 + 16);
            const ActQ16* first = quantize(t0);
            for (int64_t t = t0 + 1; t < t1; ++t) quantize(t);
            act_group16_avx512(first, nb, static_cast<int>(t1 - t0), xg + u * nb);
          }
        };
        if (pool != nullptr && pool->size() > 1 && n_tokens * in >= 16 * 1024) {
          pool->parallel_for(units, fn);
        } else {
          fn(0, units);
        }
        args->xg16 = xg;
        return;
#else
        TROUPE_CHECK(false, "matmul: avx512_vnni groups in a build without AVX-512 VNNI kernels");
#endif
      }
      auto* xg = reinterpret_cast<ActQ16x8*>(base + row_part);
      for_tokens(pool, n_tokens, in, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const ActQ16* blocks = quantize(t);
          if (t / 8 < groups) scatter_act_group(blocks, nb, xg + (t / 8) * nb, static_cast<int>(t % 8));
        }
      });
      // Lanes of the last group past the last token stay zero.
      for (int64_t t = n_tokens; t < groups * 8; ++t)
        clear_act_group_lane(xg + (t / 8) * nb, nb, static_cast<int>(t % 8));
      args->xg = xg;
      return;
    }
    case ActFormat::q8_32: {
      const int64_t nb = in / kQK;
      const int64_t row = nb * static_cast<int64_t>(sizeof(ActQ8));
      const int64_t groups = act_groups16_q8(isa, n_tokens);
      const size_t row_part = static_cast<size_t>(row * n_tokens + 63) & ~size_t{63};
      auto* base = buffer != nullptr ? buffer : scratch(2, row_part + static_cast<size_t>(groups * nb) * sizeof(ActQ8x16));
      auto* xg = reinterpret_cast<ActQ8x16*>(base + row_part);
      const auto* rows = reinterpret_cast<const ActQ8*>(base);
      // Work units: a group (its tokens quantized, then put in lanes), then the tokens
      // after the groups one by one.
      const int64_t grouped = std::min(n_tokens, groups * 16);
      const int64_t units = groups + (n_tokens - grouped);
      auto quantize = [&](int64_t t) {
        auto* blocks = reinterpret_cast<ActQ8*>(base + t * row);
#if defined(TROUPE_KERNELS_HAVE_AVX2)
        if (is_avx2(isa)) return quantize_act_q8_avx2(x + t * in, in, blocks);
#endif
        quantize_act_q8(x + t * in, in, blocks);
      };
      auto fn = [&](int64_t u0, int64_t u1) {
        for (int64_t u = u0; u < u1; ++u) {
          if (u >= groups) {
            quantize(grouped + (u - groups));
            continue;
          }
          const int64_t t0 = u * 16, t1 = std::min(n_tokens, t0 + 16);
          for (int64_t t = t0; t < t1; ++t) quantize(t);
          act_group16_q8(rows + t0 * nb, nb, static_cast<int>(t1 - t0), xg + u * nb);
        }
      };
      if (pool != nullptr && pool->size() > 1 && n_tokens * in >= 16 * 1024) {
        pool->parallel_for(units, fn);
      } else {
        fn(0, units);
      }
      args->xq = base;
      args->xq_row_bytes = row;
      args->xg8 = groups > 0 ? xg : nullptr;
      args->n_groups8 = groups;
      return;
    }
    case ActFormat::q8k: {
      const int64_t nb = in / kQKK;
      const int64_t row = nb * static_cast<int64_t>(sizeof(ActQ8K));
      const int64_t groups = act_groups16_q8k(isa, n_tokens);
      const size_t row_part = static_cast<size_t>(row * n_tokens + 63) & ~size_t{63};
      auto* base = buffer != nullptr ? buffer : scratch(1, row_part + static_cast<size_t>(groups * nb) * sizeof(ActQ8Kx16));
      for_tokens(pool, n_tokens, in, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          auto* blocks = reinterpret_cast<ActQ8K*>(base + t * row);
#if defined(TROUPE_KERNELS_HAVE_AVX2)
          if (is_avx2(isa)) {
            quantize_act_q8k_avx2(x + t * in, in, blocks);
            continue;
          }
#endif
          quantize_act_q8k(x + t * in, in, blocks);
        }
      });
      args->xq = base;
      args->xq_row_bytes = row;
      args->xk16 = nullptr;
      args->n_groups_k = groups;
      if (groups > 0) {
        // The groups of 16 tokens again with the tokens in lanes (a last partial one's
        // lanes past the last token zero).
        auto* xk = reinterpret_cast<ActQ8Kx16*>(base + row_part);
        const auto* rows = reinterpret_cast<const ActQ8K*>(base);
        auto fn = [&](int64_t g0, int64_t g1) {
          for (int64_t g = g0; g < g1; ++g) {
            const int n = static_cast<int>(std::min<int64_t>(16, n_tokens - g * 16));
#if defined(TROUPE_KERNELS_HAVE_AVX512_VNNI)
            if (isa == Isa::avx512_vnni) {
              act_group16_q8k_avx512(rows + g * 16 * nb, nb, n, xk + g * nb);
              continue;
            }
#endif
            act_group16_q8k(rows + g * 16 * nb, nb, n, xk + g * nb);
          }
        };
        if (pool != nullptr && pool->size() > 1 && groups > 1) {
          pool->parallel_for(groups, fn);
        } else {
          fn(0, groups);
        }
        args->xk16 = xk;
      }
      return;
    }
  }
}

// y is [token][out], and the batched tiles hold 8 or 16 tokens in lanes: each row's
// results go out one token at a time, out floats apart. With out a multiple of 1024,
// every token's row starts in the same L1 set, so the 16-32 lines a tile stores into
// evict each other (8 ways) and every store misses. Plain AVX2, one thread, Q5_K
// 2048x2048 x 64 tokens: 83 GMAC/s, 94 with out = 2064. Those ISAs' batches run
// kStageRows rows at a time into a buffer whose token stride is 5 lines (consecutive
// tokens in distinct sets), copied out whole lines at a time after each block. The
// AVX-512 tiles stage their own results (group_out_avx512.hpp).
constexpr int64_t kStageRows = 64;
constexpr int64_t kStageStride = kStageRows + 16;
constexpr int64_t kStageMinTokens = 8;

// How many of the L1's 64 sets the rows of 32 consecutive tokens start in.
int token_row_sets(int64_t out) {
  uint64_t sets = 0;
  for (int64_t t = 0; t < 32; ++t) sets |= uint64_t{1} << ((t * out * 4 / 64) % 64);
  return std::popcount(sets);
}

// Staged where the rows crowd into a few sets (out = 1536, 2048, 8192, a vocabulary of
// 49152, ...); elsewhere (576: 16 sets) the extra pass measured 1-2% slower.
bool stages_output(Isa isa, int64_t n_tokens, int64_t out) {
  return isa != Isa::avx512_vnni && n_tokens >= kStageMinTokens && token_row_sets(out) < 16;
}

// Rows [o0, o1) of a's matrix; with `stage`, in blocks through this thread's staging buffer
// (each block is a matrix of its own: its first row at w, its results at the buffer).
void run_rows(MatmulRangeFn kernel, const MatmulArgs& a, int64_t o0, int64_t o1, bool stage) {
  if (!stage) {
    kernel(a, o0, o1);
    return;
  }
  auto* buf = reinterpret_cast<float*>(scratch(3, static_cast<size_t>(a.n_tokens * kStageStride) * sizeof(float)));
  MatmulArgs block = a;
  block.out = kStageStride;
  block.y = buf;
  for (int64_t c0 = o0; c0 < o1; c0 += kStageRows) {
    const int64_t rows = std::min(o1 - c0, kStageRows);
    block.w = a.w + c0 * a.w_row_stride;
    kernel(block, 0, rows);
    for (int64_t t = 0; t < a.n_tokens; ++t)
      std::copy_n(buf + t * kStageStride, rows, a.y + t * a.out + c0);
  }
}

constexpr int kMaxJobs = 4;

struct Prepared {
  MatmulArgs args[kMaxJobs];
  MatmulRangeFn kernel[kMaxJobs];
  bool stage[kMaxJobs] = {};    // run_rows through the staging buffer
  int64_t units_end[kMaxJobs];  // prefix sums of each job's row units
  int64_t work = 0;             // weight bytes x tokens, to decide whether to wake the pool
};

// Checks every job, quantizes x once per activation format the jobs need.
void prepare(Isa isa, const MatmulJob* jobs, int n_jobs, int64_t in, const float* x, int64_t n_tokens,
             ThreadPool* pool, Prepared* p) {
  TROUPE_CHECK(n_jobs >= 1 && n_jobs <= kMaxJobs, "matmul: 1 to 4 matrices per pass");
  TROUPE_CHECK(isa_available(isa), "matmul: ISA not available on this CPU/build");
  TROUPE_CHECK(in > 0 && n_tokens >= 1, "matmul: empty shape");
  bool prepared[4] = {false, false, false, false};
  MatmulArgs acts[4] = {};
  int64_t units = 0;
  for (int j = 0; j < n_jobs; ++j) {
    const MatmulJob& job = jobs[j];
    TROUPE_CHECK(supports_type(job.type), "matmul: unsupported weight type");
    TROUPE_CHECK(job.out > 0, "matmul: empty shape");
    const int64_t w_row_bytes = row_bytes(job.type, in);
    TROUPE_CHECK(w_row_bytes > 0, "matmul: `in` is not a whole number of blocks of the weight type");
    const int64_t stride = job.w_row_stride == 0 ? w_row_bytes : job.w_row_stride;
    TROUPE_CHECK(stride >= w_row_bytes, "matmul: the row stride is shorter than a row");
    p->kernel[j] = kernel_for(isa, job.type);
    TROUPE_CHECK(p->kernel[j] != nullptr, "matmul: no kernel for this type");
    const ActFormat fmt = act_format(job.type);
    const int f = static_cast<int>(fmt);
    if (!prepared[f]) {
      prepare_activations(isa, fmt, in, x, n_tokens, pool, &acts[f]);
      prepared[f] = true;
    }
    MatmulArgs& a = p->args[j];
    a = acts[f];
    a.type = job.type;
    a.w = static_cast<const uint8_t*>(job.w);
    a.w_row_bytes = w_row_bytes;
    a.w_row_stride = stride;
    a.in = in;
    a.out = job.out;
    a.n_tokens = n_tokens;
    a.xf = x;
    a.y = job.y;
    p->stage[j] = stages_output(isa, n_tokens, job.out);
    units += (job.out + kRowUnit - 1) / kRowUnit;
    p->units_end[j] = units;
    p->work += w_row_bytes * job.out * n_tokens;
  }
}

bool worth_splitting(const ThreadPool* pool, int64_t units, int64_t work) {
  return pool != nullptr && pool->size() > 1 && units > 1 && work >= kMinParallelWork;
}

}  // namespace

size_t prepared_activation_bytes(Isa isa, DType type, int64_t in, int64_t n_tokens) {
  return act_bytes(isa, act_format(type), in, n_tokens);
}

void prepare_matrix(Isa isa, const MatmulJob& job, int64_t in, const float* x, int64_t n_tokens, uint8_t* act,
                    PreparedMatrix* p) {
  TROUPE_CHECK(supports_type(job.type) && job.out > 0 && in > 0 && n_tokens >= 1, "prepare_matrix: bad matmul");
  MatmulArgs& a = p->args;
  a = MatmulArgs{};
  prepare_activations(isa, act_format(job.type), in, x, n_tokens, nullptr, &a, act);
  prepare_matrix_like(isa, *p, job, in, x, n_tokens, p);
}

void prepare_matrix_like(Isa isa, const PreparedMatrix& like, const MatmulJob& job, int64_t in, const float* x,
                         int64_t n_tokens, PreparedMatrix* p) {
  const int64_t w_row_bytes = row_bytes(job.type, in);
  TROUPE_CHECK(w_row_bytes > 0, "prepare_matrix: `in` is not a whole number of blocks of the weight type");
  MatmulArgs a = like.args;  // the same quantized activations (the caller keeps the formats equal)
  a.type = job.type;
  a.w = static_cast<const uint8_t*>(job.w);
  a.w_row_bytes = w_row_bytes;
  a.w_row_stride = job.w_row_stride == 0 ? w_row_bytes : job.w_row_stride;
  a.in = in;
  a.out = job.out;
  a.n_tokens = n_tokens;
  a.xf = x;
  a.y = job.y;
  p->args = a;
  p->kernel = kernel_for(isa, job.type);
  TROUPE_CHECK(p->kernel != nullptr, "prepare_matrix: no kernel for this type");
  p->stage = stages_output(isa, n_tokens, job.out);
}

void run_prepared(const PreparedMatrix& p, int64_t o0, int64_t o1) { run_rows(p.kernel, p.args, o0, o1, p.stage); }

void matmul_multi_with_isa(Isa isa, const MatmulJob* jobs, int n_jobs, int64_t in, const float* x,
                           int64_t n_tokens, ThreadPool* pool) {
  Prepared p;
  prepare(isa, jobs, n_jobs, in, x, n_tokens, pool, &p);
  // Row units of all jobs, numbered one after the other.
  auto run = [&](int64_t u0, int64_t u1) {
    int64_t first = 0;
    for (int j = 0; j < n_jobs && u0 < u1; first = p.units_end[j], ++j) {
      if (u0 >= p.units_end[j]) continue;
      const int64_t e = std::min(u1, p.units_end[j]);
      const int64_t out = p.args[j].out;
      run_rows(p.kernel[j], p.args[j], (u0 - first) * kRowUnit, std::min(out, (e - first) * kRowUnit), p.stage[j]);
      u0 = e;
    }
  };
  const int64_t units = p.units_end[n_jobs - 1];
  if (worth_splitting(pool, units, p.work)) {
    pool->parallel_for(units, run);
  } else {
    run(0, units);
  }
}

void matmul_multi(const MatmulJob* jobs, int n_jobs, int64_t in, const float* x, int64_t n_tokens,
                  ThreadPool* pool) {
  matmul_multi_with_isa(active_isa(), jobs, n_jobs, in, x, n_tokens, pool);
}

void matmul_silu_mul_with_isa(Isa isa, const MatmulJob& gate, const MatmulJob& up, int64_t in, const float* x,
                              int64_t n_tokens, ThreadPool* pool) {
  TROUPE_CHECK(gate.out == up.out, "matmul_silu_mul: gate and up need the same number of rows");
  const MatmulJob jobs[2] = {gate, up};
  Prepared p;
  prepare(isa, jobs, 2, in, x, n_tokens, pool, &p);
  const int64_t out = gate.out;
  // A unit is the same rows of both matrices, then silu(gate) * up on those columns.
  auto run = [&](int64_t u0, int64_t u1) {
    const int64_t o0 = u0 * kRowUnit, o1 = std::min(out, u1 * kRowUnit);
    run_rows(p.kernel[0], p.args[0], o0, o1, p.stage[0]);
    run_rows(p.kernel[1], p.args[1], o0, o1, p.stage[1]);
    for (int64_t t = 0; t < n_tokens; ++t)
      silu_mul(gate.y + t * out + o0, up.y + t * out + o0, o1 - o0, gate.y + t * out + o0);
  };
  const int64_t units = (out + kRowUnit - 1) / kRowUnit;
  if (worth_splitting(pool, units, p.work)) {
    pool->parallel_for(units, run);
  } else {
    run(0, units);
  }
}

void matmul_silu_mul(const MatmulJob& gate, const MatmulJob& up, int64_t in, const float* x, int64_t n_tokens,
                     ThreadPool* pool) {
  matmul_silu_mul_with_isa(active_isa(), gate, up, in, x, n_tokens, pool);
}

void matmul_with_isa(Isa isa, DType type, const void* w, int64_t in, int64_t out, const float* x,
                     int64_t n_tokens, float* y, ThreadPool* pool, int64_t w_row_stride) {
  const MatmulJob job{type, w, out, y, w_row_stride};
  matmul_multi_with_isa(isa, &job, 1, in, x, n_tokens, pool);
}

void matmul(DType type, const void* w, int64_t in, int64_t out, const float* x, int64_t n_tokens, float* y,
            ThreadPool* pool, int64_t w_row_stride) {
  matmul_with_isa(active_isa(), type, w, in, out, x, n_tokens, y, pool, w_row_stride);
}

}  // namespace troupe::kernels::cpu
