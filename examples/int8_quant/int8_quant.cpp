// Example quantization plugin: the weight format "int8_channel" and its load-time method,
// as vLLM's `--quantization fp8` quantizes an unquantized checkpoint while loading it.
// Each row of a matrix (one output channel) becomes a symmetric int8 row with its own f32
// scale: scale = max|w| / 127, q = round(w / scale) in [-127, 127], w ~= q * scale.
// A row is stored as its scale (4 bytes, the row header) then its n int8 values.
//
// The plugin offers the format's matmul to the CPU platform by name
// ("matmul.int8_channel.v1"); other platforms have no kernel for it and refuse a model
// quantized this way at load, naming the format. Registration is idempotent: the
// registry returns the same id for the same format.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "troupe/named_ops/named_ops.hpp"
#include "troupe/plugin.hpp"
#include "troupe/quantization.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

constexpr const char* kFormat = "int8_channel";
constexpr int64_t kHeader = 4;  // the row's f32 scale

float row_scale(const void* row) {
  float s;
  std::memcpy(&s, row, sizeof s);
  return s;
}
const int8_t* row_values(const void* row) { return static_cast<const int8_t*>(row) + kHeader; }

void quantize_row(const float* x, int64_t n, void* row) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / 127.0f;
  std::memcpy(row, &scale, sizeof scale);
  auto* q = static_cast<int8_t*>(row) + kHeader;
  for (int64_t i = 0; i < n; ++i) {
    const float v = scale > 0 ? std::round(x[i] / scale) : 0.0f;  // half away from zero
    q[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
  }
}

void dequantize_row(const void* row, int64_t n, float* out) {
  const float scale = row_scale(row);
  const int8_t* q = row_values(row);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
}

// sum_i q[i] * x[i] in 32 lanes: lane k takes i = k mod 32 over whole 32-blocks, then lanes
// 0-7 take the remaining whole 8-blocks; the lanes are added in order, then the tail. The
// scalar and the AVX2 forms follow the same order without FMA: the same bits by
// construction (no test compares them). Four AVX2 accumulators keep the adds independent.
float dot_scalar(const int8_t* q, const float* x, int64_t n) {
  float lane[32] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 32; ++k) lane[k] += static_cast<float>(q[i + k]) * x[i + k];
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lane[k] += static_cast<float>(q[i + k]) * x[i + k];
  float sum = 0;
  for (float l : lane) sum += l;
  for (; i < n; ++i) sum += static_cast<float>(q[i]) * x[i];
  return sum;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) inline __m256 widen8(const int8_t* q) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
}

__attribute__((target("avx2"))) float dot_avx2(const int8_t* q, const float* x, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int a = 0; a < 4; ++a)
      acc[a] = _mm256_add_ps(acc[a], _mm256_mul_ps(widen8(q + i + 8 * a), _mm256_loadu_ps(x + i + 8 * a)));
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_add_ps(acc[0], _mm256_mul_ps(widen8(q + i), _mm256_loadu_ps(x + i)));
  alignas(32) float lane[32];
  for (int a = 0; a < 4; ++a) _mm256_store_ps(lane + 8 * a, acc[a]);
  float sum = 0;
  for (float l : lane) sum += l;
  for (; i < n; ++i) sum += static_cast<float>(q[i]) * x[i];
  return sum;
}
bool have_avx2() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return have;
}
#endif

float dot(const int8_t* q, const float* x, int64_t n) {
#if defined(__x86_64__)
  if (have_avx2()) return dot_avx2(q, x, n);
#endif
  return dot_scalar(q, x, n);
}

struct MatmulJob {
  const troupe::WeightTensor* w;
  const float* x;
  int64_t n_tokens;
  float* y;
};

// Rows [begin, end) of the output, every token.
void matmul_rows(void* ctx, int64_t begin, int64_t end) {
  const auto& job = *static_cast<const MatmulJob*>(ctx);
  const troupe::WeightTensor& w = *job.w;
  const int64_t in = w.ne[0], out = w.rows();
  const int64_t stride = w.row_stride > 0 ? w.row_stride : troupe::row_bytes(w.type, in);
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t o = begin; o < end; ++o) {
    const uint8_t* row = base + o * stride;
    const float scale = row_scale(row);
    const int8_t* q = row_values(row);
    for (int64_t t = 0; t < job.n_tokens; ++t) job.y[t * out + o] = scale * dot(q, job.x + t * in, in);
  }
}

// The CPU platform's kernel (troupe::WeightMatmulFn): rows split over the platform's
// threads through its parallel_for.v1 op when it offers one.
void matmul_cpu(troupe::Ops& ops, const troupe::WeightTensor& w, const float* x, int64_t n_tokens, float* y) {
  MatmulJob job{&w, x, n_tokens, y};
  if (auto parallel = troupe::named_ops::find<troupe::named_ops::ParallelFor>(ops))
    return parallel(ops, w.rows(), &matmul_rows, &job);
  matmul_rows(&job, 0, w.rows());
}

troupe::Status register_int8_quant() {
  troupe::WeightFormat f;
  f.name = kFormat;
  f.description = "per-output-channel symmetric int8, an f32 scale per row, quantized at load from f16/bf16/f32";
  f.block_elems = 1;
  f.block_bytes = 1;
  f.row_header_bytes = kHeader;
  f.quantized = true;
  f.dequantize_row = &dequantize_row;
  f.quantize_row = &quantize_row;
  auto id = troupe::weight_formats::register_format(f);
  if (!id.ok()) return id.status();
  return troupe::weight_formats::register_kernel("cpu", troupe::weight_formats::matmul_op_name(kFormat),
                                                 reinterpret_cast<troupe::OpFn>(&matmul_cpu));
}

}  // namespace

TROUPE_PLUGIN(troupe::general_plugin("int8_quant", &register_int8_quant))
