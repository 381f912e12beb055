// matmul front end: checks shapes, quantizes the activations once, then splits
// the output rows over the pool and runs the ISA's range kernel.
#include "kernels/cpu/matmul.hpp"

#include <algorithm>
#include <vector>

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
      uint32_t pair = static_cast<uint16_t>(row[b].qs[2 * i]) | static_cast<uint32_t>(static_cast<uint16_t>(row[b].qs[2 * i + 1])) << 16;
      group[b].q[i][lane] = static_cast<int32_t>(pair);
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

// Scratch for quantized activations, reused across calls by each calling thread.
std::vector<uint64_t>& scratch(size_t bytes) {
  thread_local std::vector<uint64_t> buf;
  if (buf.size() * 8 < bytes) buf.resize((bytes + 7) / 8);
  return buf;
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
  switch (type) {
    case DType::q4_0: case DType::q4_1: case DType::q5_0: case DType::q5_1: case DType::q8_0:
      return ActFormat::q8;
    case DType::q4_k: case DType::q6_k:
      return ActFormat::q8k;
    default:
      return ActFormat::f32;
  }
}

void matmul_with_isa(Isa isa, DType type, const void* w, int64_t in, int64_t out, const float* x,
                     int64_t n_tokens, float* y, ThreadPool* pool, int64_t w_row_stride) {
  TROUPE_CHECK(supports_type(type), "matmul: unsupported weight type");
  TROUPE_CHECK(isa_available(isa), "matmul: ISA not available on this CPU/build");
  TROUPE_CHECK(in > 0 && out > 0 && n_tokens >= 1, "matmul: empty shape");
  const int64_t w_row_bytes = row_bytes(type, in);
  TROUPE_CHECK(w_row_bytes > 0, "matmul: `in` is not a whole number of blocks of the weight type");
  MatmulRangeFn kernel = kernel_for(isa, type);
  TROUPE_CHECK(kernel != nullptr, "matmul: no kernel for this type");

  if (w_row_stride == 0) w_row_stride = w_row_bytes;
  TROUPE_CHECK(w_row_stride >= w_row_bytes, "matmul: the row stride is shorter than a row");
  MatmulArgs args{type, static_cast<const uint8_t*>(w), w_row_bytes, w_row_stride, in, out, n_tokens,
                  x, nullptr, 0, nullptr, 0, y};
  switch (act_format(type)) {
    case ActFormat::f32:
      break;
    case ActFormat::q8: {
      const int64_t nb = in / kQK;
      const int64_t row = nb * static_cast<int64_t>(sizeof(ActQ16));
      const int64_t groups = n_tokens > 1 ? act_groups(n_tokens) : 0;
      const size_t row_part = static_cast<size_t>(row * n_tokens + 63) & ~size_t{63};
      const size_t bytes = row_part + static_cast<size_t>(groups * nb) * sizeof(ActQ16x8);
      auto& buf = scratch(bytes + 64);
      auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
      auto* xg = reinterpret_cast<ActQ16x8*>(base + row_part);
      for_tokens(pool, n_tokens, in, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          auto* blocks = reinterpret_cast<ActQ16*>(base + t * row);
          if (is_avx2(isa)) {
            quantize_act_q16_avx2(x + t * in, in, blocks);
          } else {
            quantize_act_q16(x + t * in, in, blocks);
          }
          if (t / 8 < groups) scatter_act_group(blocks, nb, xg + (t / 8) * nb, static_cast<int>(t % 8));
        }
      });
      // Lanes of the last group past the last token stay zero.
      for (int64_t t = n_tokens; t < groups * 8; ++t) clear_act_group_lane(xg + (t / 8) * nb, nb, static_cast<int>(t % 8));
      args.xq = base;
      args.xq_row_bytes = row;
      args.xg = xg;
      args.n_groups = groups;
      break;
    }
    case ActFormat::q8k: {
      const int64_t row = (in / kQKK) * static_cast<int64_t>(sizeof(ActQ8K));
      auto& buf = scratch(static_cast<size_t>(row * n_tokens));
      auto* base = reinterpret_cast<uint8_t*>(buf.data());
      for_tokens(pool, n_tokens, in, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          quantize_act_q8k(x + t * in, in, reinterpret_cast<ActQ8K*>(base + t * row));
      });
      args.xq = base;
      args.xq_row_bytes = row;
      break;
    }
  }

  const int64_t units = (out + kRowUnit - 1) / kRowUnit;
  auto run = [&](int64_t u0, int64_t u1) { kernel(args, u0 * kRowUnit, std::min(out, u1 * kRowUnit)); };
  const int64_t work = w_row_bytes * out * n_tokens;
  if (pool != nullptr && pool->size() > 1 && units > 1 && work >= kMinParallelWork) {
    pool->parallel_for(units, run);
  } else {
    run(0, units);
  }
}

void matmul(DType type, const void* w, int64_t in, int64_t out, const float* x, int64_t n_tokens, float* y,
            ThreadPool* pool, int64_t w_row_stride) {
  matmul_with_isa(active_isa(), type, w, in, out, x, n_tokens, y, pool, w_row_stride);
}

}  // namespace troupe::kernels::cpu
