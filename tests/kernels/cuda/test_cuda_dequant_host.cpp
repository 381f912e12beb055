// The device-side weight readers (kernels/cuda/dequant.cuh, host-and-device
// code) run here on the CPU against kernels/cpu dequantize_row, the
// definition of every GGUF layout: the block indexing that the embedding and
// matmul kernels share is checked on every machine, GPU or not (label unit).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/quantize.hpp"
#include "kernels/cuda/dequant.cuh"

namespace troupe::kernels::cuda {
namespace {

template <DType T>
void check_type(uint32_t seed) {
  SCOPED_TRACE(std::string(to_string(T)));
  const int64_t n = 1024;  // four K-quant super-blocks, 32 small blocks
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> raw(static_cast<size_t>(n));
  for (auto& v : raw) v = dist(rng);
  std::vector<uint8_t> row(static_cast<size_t>(row_bytes(T, n)));
  cpu::quantize_row_reference(T, raw.data(), row.data(), n);
  std::vector<float> ref(static_cast<size_t>(n));
  cpu::dequantize_row(T, row.data(), ref.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(detail::dq<T>(row.data(), i), ref[i]) << "element " << i;
}

TEST(CudaDequantHost, EveryWeightTypeReadsLikeTheCpuDefinition) {
  check_type<DType::f32>(1);
  check_type<DType::f16>(2);
  check_type<DType::bf16>(3);
  check_type<DType::q4_0>(4);
  check_type<DType::q4_1>(5);
  check_type<DType::q5_0>(6);
  check_type<DType::q5_1>(7);
  check_type<DType::q8_0>(8);
  check_type<DType::q4_k>(9);
  check_type<DType::q6_k>(10);
  check_type<DType::q2_k>(11);
  check_type<DType::q3_k>(12);
  check_type<DType::q5_k>(13);
  check_type<DType::iq4_nl>(14);
  check_type<DType::iq4_xs>(15);
  check_type<cpu::kMxfp4>(16);
}

}  // namespace
}  // namespace troupe::kernels::cuda
