// A mixture-of-experts layer's experts in one call (the CPU's named op moe_ffn.v1): the
// step's tokens grouped by expert (moe_routing on the host), each chosen expert's matrices
// read once for all its tokens, in four synchronizations of the pool whatever the number of
// experts (two when the step is a few tokens: the quantizations then stay on the calling
// thread): (1) each group's rows gathered and quantized once, (2) the rows of every group's
// gate and up in one pass (a unit: 8 rows of one expert, then its biases and the activation
// on those columns), (3) each group's activations quantized for its down, (4) the columns of
// the output in one pass (a unit: 8 columns, every group's down rows for them in expert
// order, then each token's weighted share added), so every output element is written by one
// thread in a fixed order. The results are bit-identical to gather_rows, matmul_silu_mul or
// the matmuls with the activation, matmul and scatter_add_rows in that order (the same
// kernels on the same quantized activations, the same order of additions), whatever the pool.
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace troupe::kernels::cpu {

/// One expert's matrices (y of the jobs unused): gate and up {n_embd -> ff}, down
/// {ff -> n_embd}, and optional f32 biases (nullptr: none).
struct MoeExpertMatrices {
  MatmulJob gate{}, up{}, down{};
  const float* gate_bias = nullptr;
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;
};

struct MoeFfnArgs {
  const MoeExpertMatrices* experts = nullptr;  // indexed by the groups' expert
  int64_t n_embd = 0, ff = 0;
  int activation = 0;  // 0: silu(gate) * up; 1: swiglu_oai(alpha, limit)
  float alpha = 0.0f, limit = 0.0f;
  int32_t n_groups = 0;
  const int32_t* expert = nullptr;  // [n_groups]
  const int32_t* begin = nullptr;   // [n_groups + 1]
  const int32_t* rows = nullptr;    // token row of each assignment
  const float* weights = nullptr;   // its weight
  const float* x = nullptr;         // [n_tokens][n_embd]
  int64_t n_tokens = 0;
  float* out = nullptr;             // [n_tokens][n_embd], overwritten
};

void moe_ffn(const MoeFfnArgs& args, ThreadPool* pool);
/// The same on a given ISA (tests compare ISAs).
void moe_ffn_with_isa(Isa isa, const MoeFfnArgs& args, ThreadPool* pool);

}  // namespace troupe::kernels::cpu
