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
constexpr int64_t kRowUnit = 4;
// Below this many weight bytes x tokens a call stays on one thread: waking
// workers would cost more than it saves.
constexpr int64_t kMinParallelWork = 48 * 1024;

MatmulRangeFn kernel_for(Isa isa, DType type) {
#if defined(TROUPE_KERNELS_HAVE_AVX2)
  if (isa == Isa::avx2) return matmul_kernel_avx2(type);
#endif
  (void)isa;
  return matmul_kernel_scalar(type);
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
                  x, nullptr, 0, nullptr, y};
  switch (act_format(type)) {
    case ActFormat::f32:
      break;
    case ActFormat::q8: {
      const int64_t nb = in / kQK;
      const int64_t row = nb * static_cast<int64_t>(sizeof(ActQ16));
      const size_t bytes = static_cast<size_t>(row * n_tokens) + static_cast<size_t>(nb * n_tokens) * sizeof(float);
      auto& buf = scratch(bytes);
      auto* base = reinterpret_cast<uint8_t*>(buf.data());
      auto* sums = reinterpret_cast<float*>(base + row * n_tokens);
      for_tokens(pool, n_tokens, in, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          auto* blocks = reinterpret_cast<ActQ16*>(base + t * row);
          if (isa == Isa::avx2) {
            quantize_act_q16_avx2(x + t * in, in, blocks);
          } else {
            quantize_act_q16(x + t * in, in, blocks);
          }
          for (int64_t b = 0; b < nb; ++b) sums[b * n_tokens + t] = blocks[b].s;
        }
      });
      args.xq = base;
      args.xq_row_bytes = row;
      args.xs_t = sums;
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
