// kernels/cuda sampling against the CPU sampler (runtime/rank/sampling): argmax
// with ties, and temperature / min_p / top_k / top_p sampling. Each row is
// checked against a host model of sample_rows' documented semantics, and that
// model against the real CPU sampler wherever their orders agree (greedy, and
// top_p < 1: both walk tokens by probability, then index). Logits are
// multiples of 1/64 so ties are exact; a row whose draw lands within 1e-6 of a
// cumulative boundary is ambiguous (float exp on two devices) and not compared.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/sampling.hpp"
#include "runtime/rank/sampling/sampler.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace troupe::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::DeviceBuffer;

// The CPU sampler's draw for a step seed (runtime/rank/sampling/sampler.cpp: splitmix64, top 53 bits).
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double u_from_seed(uint64_t seed) { return static_cast<double>(splitmix64(seed) >> 11) * 0x1.0p-53; }

int32_t host_argmax(const float* l, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (l[i] > l[best]) best = i;
  return static_cast<int32_t>(best);
}

/// rows x vocab logits drawn from N(0, stddev) with `seed`.
std::vector<float> normal_logits(int64_t rows, int64_t vocab, unsigned seed, float stddev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (auto& v : logits) v = d(rng);
  return logits;
}

struct Expected {
  int32_t token = -1;
  bool ambiguous = false;
};

// sample_rows' semantics (sampling.hpp), on the host.
Expected model(const float* l, int64_t vocab, const SamplingRow& prm) {
  Expected e;
  if (!(prm.temperature > 0.0f)) {
    e.token = host_argmax(l, vocab);
    return e;
  }
  const float mx = *std::max_element(l, l + vocab);
  const float inv_t = 1.0f / prm.temperature;
  std::vector<float> p(static_cast<size_t>(vocab));
  std::vector<int32_t> idx;
  for (int64_t i = 0; i < vocab; ++i) {
    p[i] = std::exp((l[i] - mx) * inv_t);
    if (!(p[i] >= prm.min_p)) p[i] = 0.0f;
    if (p[i] > 0.0f) idx.push_back(static_cast<int32_t>(i));
  }
  std::sort(idx.begin(), idx.end(), [&p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  size_t n = idx.size();
  if (prm.top_k > 0 && static_cast<size_t>(prm.top_k) < n) n = static_cast<size_t>(prm.top_k);
  auto near = [](double a, double b, double total) { return std::fabs(a - b) < 1e-6 * total; };
  if (prm.top_p < 1.0f) {
    double total = 0.0;
    for (size_t j = 0; j < n; ++j) total += p[idx[j]];
    const double target = static_cast<double>(prm.top_p) * total;
    double cum = 0.0;
    for (size_t j = 0; j < n; ++j) {
      cum += p[idx[j]];
      if (near(cum, target, total)) e.ambiguous = true;
      if (cum >= target) {
        n = j + 1;
        break;
      }
    }
  }
  double total = 0.0;
  for (size_t j = 0; j < n; ++j) total += p[idx[j]];
  const double target = prm.u * total;
  double cum = 0.0;
  e.token = idx[n - 1];
  for (size_t j = 0; j < n; ++j) {
    cum += p[idx[j]];
    if (near(cum, target, total)) e.ambiguous = true;
    if (cum > target) {
      e.token = idx[j];
      break;
    }
  }
  return e;
}

class CudaSampling : public CudaTest {
 protected:
  std::vector<int32_t> run_sample(const std::vector<float>& logits, int64_t rows, int64_t vocab,
                                  const std::vector<SamplingRow>& params) {
    auto bytes = sampling_workspace_bytes(rows, vocab);
    EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
    if (!bytes.ok()) return {};
    DeviceBuffer<float> d_logits(logits);
    DeviceBuffer<SamplingRow> d_params(params);
    DeviceBuffer<int32_t> d_out(static_cast<size_t>(rows));
    DeviceBuffer<uint8_t> d_ws(static_cast<size_t>(*bytes));  // cudaMalloc: 256-byte aligned
    EXPECT_TRUE(d_logits.ok() && d_params.ok() && d_out.ok() && d_ws.ok());
    const Status st = sample_rows(d_logits.get(), rows, vocab, d_params.get(), d_out.get(), d_ws.get(), *bytes, stream_);
    EXPECT_TRUE(st.ok()) << st.to_string();
    const cudaError_t err = cudaStreamSynchronize(stream_);
    EXPECT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
    return d_out.to_host();
  }
};

TEST_F(CudaSampling, ArgmaxTakesTheFirstOfTiesLikeTheCpuSampler) {
  const int64_t rows = 6, vocab = 50000;
  std::vector<float> logits = normal_logits(rows, vocab, 1, 3.0f);
  logits[0 * vocab + 123] = logits[0 * vocab + 40000] = 100.0f;  // tie: 123 wins
  logits[1 * vocab + 49999] = 100.0f;                               // the last index
  logits[2 * vocab + 0] = 100.0f;                                   // the first index
  std::fill(logits.begin() + 3 * vocab, logits.begin() + 4 * vocab, -1.5f);  // all equal: 0
  DeviceBuffer<float> d_logits(logits);
  DeviceBuffer<int32_t> d_out(static_cast<size_t>(rows));
  ASSERT_TRUE(d_logits.ok() && d_out.ok());
  ASSERT_OK(argmax_rows(d_logits.get(), rows, vocab, d_out.get(), stream_));
  sync();
  const auto out = d_out.to_host();
  ASSERT_EQ(out.size(), static_cast<size_t>(rows));
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t cpu = sampling::sample(logits.data() + r * vocab, vocab, greedy, {}, {}, 0).token;
    EXPECT_EQ(out[r], cpu) << "row " << r;
  }
  EXPECT_EQ(out[0], 123);
  EXPECT_EQ(out[1], 49999);
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[3], 0);
}

// 1/T overflows below ~2.9e-39: the maximum's exp((l - max) / T) would be 0 x inf = NaN and
// the row came out as token 0. Such a row is greedy, whatever u and the filters say.
TEST_F(CudaSampling, ATemperatureWhoseInverseOverflowsIsGreedy) {
  const int64_t rows = 4, vocab = 1000;
  std::vector<float> logits = normal_logits(rows, vocab, 3, 2.0f);
  const int32_t best[rows] = {777, 1, 999, 500};
  for (int64_t r = 0; r < rows; ++r) logits[static_cast<size_t>(r * vocab + best[r])] = 50.0f;
  std::vector<SamplingRow> params(static_cast<size_t>(rows));
  const float tiny[rows] = {1e-39f, 2e-39f, 1.4e-45f, 1e-39f};
  for (int64_t r = 0; r < rows; ++r) {
    params[static_cast<size_t>(r)].temperature = tiny[r];
    params[static_cast<size_t>(r)].u = 0.99;
    params[static_cast<size_t>(r)].top_p = r == 3 ? 0.5f : 1.0f;
    params[static_cast<size_t>(r)].top_k = r == 3 ? 3 : 0;
  }
  const auto out = run_sample(logits, rows, vocab, params);
  ASSERT_EQ(out.size(), static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(out[static_cast<size_t>(r)], best[r]) << "row " << r;
}

struct RowSetup {
  float temperature, top_p, min_p;
  int32_t top_k;
};

// got[r] against the model for every row; the model against the real CPU
// sampler for rows whose u is the CPU's draw for seeds[r] (seeds[r] != 0) and
// whose order the CPU shares (greedy, or top_p < 1).
void check_rows(const std::vector<float>& logits, int64_t vocab, const std::vector<SamplingRow>& params,
                const std::vector<uint64_t>& seeds, const std::vector<int32_t>& got) {
  const int64_t rows = static_cast<int64_t>(params.size());
  ASSERT_EQ(got.size(), params.size());
  int ambiguous = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits.data() + r * vocab;
    const SamplingRow& prm = params[r];
    ASSERT_GE(got[r], 0);
    ASSERT_LT(got[r], vocab);
    const Expected e = model(l, vocab, prm);
    if (e.ambiguous) {
      ++ambiguous;
      continue;
    }
    EXPECT_EQ(got[r], e.token) << "row " << r << " t " << prm.temperature << " top_k " << prm.top_k << " top_p "
                               << prm.top_p << " min_p " << prm.min_p << " u " << prm.u;
    if (seeds[r] != 0 && (!(prm.temperature > 0.0f) || prm.top_p < 1.0f)) {
      sampling::SamplingParams sp;
      sp.temperature = prm.temperature > 0.0f ? prm.temperature : 0.0f;
      sp.top_p = prm.top_p;
      sp.top_k = prm.top_k;
      sp.min_p = prm.min_p;
      EXPECT_EQ(sampling::sample(l, vocab, sp, {}, {}, seeds[r]).token, e.token) << "model vs CPU sampler, row " << r;
    }
  }
  EXPECT_LE(ambiguous, rows / 4) << "too many rows too close to a boundary to compare";
}

std::vector<SamplingRow> make_rows(const std::vector<RowSetup>& setups, int reps, std::vector<uint64_t>* seeds) {
  std::vector<SamplingRow> params;
  for (int rep = 0; rep < reps; ++rep)
    for (const RowSetup& s : setups) {
      SamplingRow row;
      row.temperature = s.temperature;
      row.top_p = s.top_p;
      row.min_p = s.min_p;
      row.top_k = s.top_k;
      const uint64_t seed = rep == 0 ? 0 : 1000u + params.size();
      row.u = rep == 0 ? 0.0 : u_from_seed(seed);  // rep 0: u = 0 picks the most probable candidate
      params.push_back(row);
      seeds->push_back(seed);
    }
  return params;
}

TEST_F(CudaSampling, TopKTopPMinPMatchTheCpuSemantics) {
  const int64_t vocab = 5000;
  const std::vector<RowSetup> setups = {
      {0.0f, 1.0f, 0.0f, 0},  {1.0f, 1.0f, 0.0f, 0},   {1.0f, 1.0f, 0.0f, 1},    {0.8f, 1.0f, 0.0f, 50},
      {1.0f, 0.9f, 0.0f, 0},  {0.7f, 0.5f, 0.0f, 100}, {1.0f, 1.0f, 0.1f, 0},    {0.5f, 0.95f, 0.0f, 0},
      {1.5f, 1.0f, 0.0f, 0},  {1.2f, 0.8f, 0.05f, 20}, {1.0f, 0.2f, 0.0f, 4000}, {2.0f, 0.99f, 0.0f, 3}};
  std::vector<uint64_t> seeds;
  const auto params = make_rows(setups, 4, &seeds);
  const int64_t rows = static_cast<int64_t>(params.size());
  std::mt19937 rng(2);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (auto& v : logits) v = static_cast<float>(static_cast<int>(rng() % 801) - 400) / 64.0f;  // exact ties
  const auto got = run_sample(logits, rows, vocab, params);
  check_rows(logits, vocab, params, seeds, got);
  // top_k = 1 and u = 0 both give the argmax.
  for (int64_t r = 0; r < rows; ++r) {
    if (params[r].top_k == 1 || params[r].u == 0.0 || !(params[r].temperature > 0.0f)) {
      EXPECT_EQ(got[r], host_argmax(logits.data() + r * vocab, vocab)) << "row " << r;
    }
  }
}

TEST_F(CudaSampling, LargeVocabularyRows) {
  const int64_t vocab = 152064;  // Qwen2-sized: many scan chunks per row
  const std::vector<RowSetup> setups = {
      {1.0f, 1.0f, 0.0f, 0}, {0.7f, 0.9f, 0.0f, 0}, {1.0f, 0.95f, 0.0f, 40}, {0.0f, 1.0f, 0.0f, 0}};
  std::vector<uint64_t> seeds;
  const auto params = make_rows(setups, 3, &seeds);
  const int64_t rows = static_cast<int64_t>(params.size());
  std::mt19937 rng(3);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (auto& v : logits) v = static_cast<float>(static_cast<int>(rng() % 1601) - 800) / 64.0f;
  const auto got = run_sample(logits, rows, vocab, params);
  check_rows(logits, vocab, params, seeds, got);
}

}  // namespace
}  // namespace troupe::kernels::cuda
