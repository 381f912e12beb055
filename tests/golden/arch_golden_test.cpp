// qwen2, qwen3, phi3, Llama 3.2 (with rope_freqs, past position 8192), Phi-3.5 (long-context
// RoPE, past position 4096), gemma2, gemma3 and a Mistral-style window (prompts past their
// sliding windows) against recorded
// references: the random-weight files `troupe make-gguf` writes (same shape, layers, seed
// and type as tests/golden/gen_arch_goldens.sh used) are rebuilt here, and troupe's
// log-probabilities at every generated step (teacher-forced on the reference's tokens,
// through the real CPU platform plugin) are held to the reference's top 8. References:
// tests/data/golden/arch_goldens_numpy.json (ref_forward.py, an independent float64
// forward) and, when generated, arch_goldens_llamacpp.json (llama.cpp b11434).
#include <gtest/gtest.h>

#include "tests/golden/arch_golden_check.hpp"
#include "tests/platforms/cpu_test_platform.hpp"

namespace troupe {
namespace {

using testing::kLlamaCppTol;
using testing::kNumpyTol;

void check_against(const std::string& shape, const std::string& file, double tol) {
  testing::check_against(testing::cpu_platform(), shape, file, tol);
}

TEST(ArchGoldens, Qwen2WithQkvBiasesMatchesTheReference) {
  check_against("qwen2.5-0.5b", "arch_goldens_numpy.json", kNumpyTol);
}
TEST(ArchGoldens, Qwen3WithQkNormsMatchesTheReference) {
  check_against("qwen3-0.6b", "arch_goldens_numpy.json", kNumpyTol);
}
TEST(ArchGoldens, Phi3WithFusedProjectionsMatchesTheReference) {
  check_against("phi3-mini", "arch_goldens_numpy.json", kNumpyTol);
}
TEST(ArchGoldens, Llama32WithRopeFreqsMatchesTheReferencePast8k) {
  check_against("llama-3.2-1b", "arch_goldens_numpy.json", kNumpyTol);
}
TEST(ArchGoldensLlamaCpp, Qwen2) { check_against("qwen2.5-0.5b", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(ArchGoldensLlamaCpp, Qwen3) { check_against("qwen3-0.6b", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(ArchGoldensLlamaCpp, Phi3) { check_against("phi3-mini", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(ArchGoldensLlamaCpp, Llama32Past8k) {
  check_against("llama-3.2-1b", "arch_goldens_llamacpp.json", kLlamaCppTol);
}
// Gemma's blocks and windows: 6 gemma3 layers (5 windowed to 512, then a global one) on a
// 700-token prompt, and 2 gemma2 layers (layer 0 windowed to 4096) with soft-capping on a
// 4300-token prompt.
TEST(ArchGoldens, Gemma3PastItsWindowMatchesTheReference) {
  check_against("gemma3-270m", "arch_goldens_numpy.json", kNumpyTol);
}
TEST(ArchGoldens, Gemma2PastItsWindowMatchesTheReference) {
  check_against("gemma2-2b", "arch_goldens_numpy.json", kNumpyTol);
}
TEST(ArchGoldensLlamaCpp, Gemma3PastItsWindow) {
  check_against("gemma3-270m", "arch_goldens_llamacpp.json", kLlamaCppTol);
}
TEST(ArchGoldensLlamaCpp, Gemma2PastItsWindow) {
  check_against("gemma2-2b", "arch_goldens_llamacpp.json", kLlamaCppTol);
}
// Mistral 7B's window on every layer under `llama`, 8200-token prompt: llama.cpp b11434 does
// not read a window for llama files, so the reference is ref_forward.py's.
TEST(ArchGoldens, MistralSlidingWindowMatchesTheReferencePastTheWindow) {
  check_against("mistral-7b-v0.1", "arch_goldens_numpy.json", kNumpyTol);
}
// Phi-3.5's long-context RoPE (rope_factors_long/short, original context 4096) on a
// 4300-token prompt: llama.cpp ran with -c 4608 and troupe runs with max_model_len 4368, both
// past 4096, so both rotate with the long set (and scale cos/sin by attn_factor 1.19).
TEST(ArchGoldens, Phi35LongRopePast4kMatchesTheReference) {
  check_against("phi3.5-mini", "arch_goldens_numpy.json", kNumpyTol);
}
TEST(ArchGoldensLlamaCpp, Phi35LongRopePast4k) {
  check_against("phi3.5-mini", "arch_goldens_llamacpp.json", kLlamaCppTol);
}

}  // namespace
}  // namespace troupe
