// The mixture-of-experts families (qwen3moe, olmoe, Mixtral, gpt-oss in f32 and with MXFP4
// experts) on the CPU platform against recorded references: the random-weight files `troupe
// make-gguf` writes (tests/golden/gen_arch_goldens.sh's cases) are rebuilt, troupe's
// log-probabilities at every generated step are held to the references' top 8 at the dense
// families' tolerances (arch_golden_check.hpp), and the router's top-k choice for every
// prompt token of every layer to theirs: ref_moe.py's (float64 numpy) in
// arch_goldens_numpy.json, llama.cpp b11434's in moe_routes_llamacpp.json
// (gen_moe_routes.sh: its ffn_moe_topk tensors through libllama's eval callback).
#include <gtest/gtest.h>

#include "tests/golden/arch_golden_check.hpp"
#include "tests/golden/moe_golden_check.hpp"
#include "tests/platforms/cpu_test_platform.hpp"

namespace troupe {
namespace {

using testing::kLlamaCppTol;
using testing::kNumpyTol;

void logprobs(const std::string& shape, const std::string& file, double tol, const std::string& type = "f32",
              bool hf_folder = false) {
  testing::check_against(testing::cpu_platform(), shape, file, tol, type, hf_folder);
}

void routes(const std::string& shape, const std::string& file, const std::string& type = "f32") {
  const auto g = testing::goldens(file);
  if (g.is_null()) GTEST_SKIP() << "tests/data/golden/" << file << " is absent";
  testing::check_routes(testing::cpu_platform(), testing::case_of(g, shape, type));
}

TEST(MoeGoldens, Qwen3Moe) { logprobs("tiny-qwen3moe", "arch_goldens_numpy.json", kNumpyTol); }
TEST(MoeGoldens, Olmoe) { logprobs("tiny-olmoe", "arch_goldens_numpy.json", kNumpyTol); }
TEST(MoeGoldens, Mixtral) { logprobs("tiny-mixtral", "arch_goldens_numpy.json", kNumpyTol); }
TEST(MoeGoldens, GptOss) { logprobs("tiny-gpt-oss", "arch_goldens_numpy.json", kNumpyTol); }
TEST(MoeGoldens, GptOssMxfp4) { logprobs("tiny-gpt-oss", "arch_goldens_numpy.json", kNumpyTol, "mxfp4"); }
TEST(MoeGoldensLlamaCpp, Qwen3Moe) { logprobs("tiny-qwen3moe", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(MoeGoldensLlamaCpp, Olmoe) { logprobs("tiny-olmoe", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(MoeGoldensLlamaCpp, Mixtral) { logprobs("tiny-mixtral", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(MoeGoldensLlamaCpp, GptOss) { logprobs("tiny-gpt-oss", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(MoeGoldensLlamaCpp, GptOssMxfp4) {
  logprobs("tiny-gpt-oss", "arch_goldens_llamacpp.json", kLlamaCppTol, "mxfp4");
}

// The same weights as Hugging Face folders (Mixtral, Qwen3-MoE, OLMoE: experts one by one).
TEST(MoeGoldensHfFolder, Qwen3Moe) { logprobs("tiny-qwen3moe", "arch_goldens_numpy.json", kNumpyTol, "f32", true); }
TEST(MoeGoldensHfFolder, Olmoe) { logprobs("tiny-olmoe", "arch_goldens_numpy.json", kNumpyTol, "f32", true); }
TEST(MoeGoldensHfFolder, Mixtral) { logprobs("tiny-mixtral", "arch_goldens_numpy.json", kNumpyTol, "f32", true); }
TEST(MoeGoldensHfFolderLlamaCpp, Qwen3Moe) {
  logprobs("tiny-qwen3moe", "arch_goldens_llamacpp.json", kLlamaCppTol, "f32", true);
}
TEST(MoeGoldensHfFolderLlamaCpp, Olmoe) {
  logprobs("tiny-olmoe", "arch_goldens_llamacpp.json", kLlamaCppTol, "f32", true);
}
TEST(MoeGoldensHfFolderLlamaCpp, Mixtral) {
  logprobs("tiny-mixtral", "arch_goldens_llamacpp.json", kLlamaCppTol, "f32", true);
}

TEST(MoeRoutes, Qwen3Moe) { routes("tiny-qwen3moe", "arch_goldens_numpy.json"); }
TEST(MoeRoutes, Olmoe) { routes("tiny-olmoe", "arch_goldens_numpy.json"); }
TEST(MoeRoutes, Mixtral) { routes("tiny-mixtral", "arch_goldens_numpy.json"); }
TEST(MoeRoutes, GptOss) { routes("tiny-gpt-oss", "arch_goldens_numpy.json"); }
TEST(MoeRoutes, GptOssMxfp4) { routes("tiny-gpt-oss", "arch_goldens_numpy.json", "mxfp4"); }
TEST(MoeRoutesLlamaCpp, Qwen3Moe) { routes("tiny-qwen3moe", "moe_routes_llamacpp.json"); }
TEST(MoeRoutesLlamaCpp, Olmoe) { routes("tiny-olmoe", "moe_routes_llamacpp.json"); }
TEST(MoeRoutesLlamaCpp, Mixtral) { routes("tiny-mixtral", "moe_routes_llamacpp.json"); }
TEST(MoeRoutesLlamaCpp, GptOss) { routes("tiny-gpt-oss", "moe_routes_llamacpp.json"); }
TEST(MoeRoutesLlamaCpp, GptOssMxfp4) { routes("tiny-gpt-oss", "moe_routes_llamacpp.json", "mxfp4"); }

}  // namespace
}  // namespace troupe
