// The mixture-of-experts goldens on the simulated accelerator (examples/sim_accelerator): a
// device whose memory the core cannot read, with its own kernels (the MoE row ops and
// attention sinks in double), held to the same references and tolerances as on the CPU
// (moe_golden_test): ref_moe.py's float64 log-probabilities and router choices, and llama.cpp
// b11434's. The sim computes f32/f16/bf16 only: the f32 cases.
#include <gtest/gtest.h>

#include "plugin_host/plugin_host.hpp"
#include "tests/golden/arch_golden_check.hpp"
#include "tests/golden/moe_golden_check.hpp"

namespace troupe {
namespace {

using testing::kLlamaCppTol;
using testing::kNumpyTol;

Platform* sim_platform() {
  static plugin_host::PluginHost host([] {
    plugin_host::HostOptions o;
    o.plugin_dirs = {SIM_PLUGIN_DIR};
    return o;
  }());
  host.load_all();
  plugin_host::PlatformRequest request;
  request.device = "sim";
  auto p = host.activate_platform(request);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? *p : nullptr;
}

void logprobs(const std::string& shape, const std::string& file, double tol) {
  testing::check_against(sim_platform(), shape, file, tol, "f32");
}

void routes(const std::string& shape, const std::string& file) {
  const auto g = testing::goldens(file);
  if (g.is_null()) GTEST_SKIP() << "tests/data/golden/" << file << " is absent";
  testing::check_routes(sim_platform(), testing::case_of(g, shape, "f32"));
}

TEST(MoeGoldensSim, Qwen3Moe) { logprobs("tiny-qwen3moe", "arch_goldens_numpy.json", kNumpyTol); }
TEST(MoeGoldensSim, Olmoe) { logprobs("tiny-olmoe", "arch_goldens_numpy.json", kNumpyTol); }
TEST(MoeGoldensSim, Mixtral) { logprobs("tiny-mixtral", "arch_goldens_numpy.json", kNumpyTol); }
TEST(MoeGoldensSim, GptOss) { logprobs("tiny-gpt-oss", "arch_goldens_numpy.json", kNumpyTol); }
TEST(MoeGoldensSimLlamaCpp, Qwen3Moe) { logprobs("tiny-qwen3moe", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(MoeGoldensSimLlamaCpp, Olmoe) { logprobs("tiny-olmoe", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(MoeGoldensSimLlamaCpp, Mixtral) { logprobs("tiny-mixtral", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(MoeGoldensSimLlamaCpp, GptOss) { logprobs("tiny-gpt-oss", "arch_goldens_llamacpp.json", kLlamaCppTol); }
TEST(MoeRoutesSim, Qwen3Moe) { routes("tiny-qwen3moe", "arch_goldens_numpy.json"); }
TEST(MoeRoutesSim, Olmoe) { routes("tiny-olmoe", "arch_goldens_numpy.json"); }
TEST(MoeRoutesSim, Mixtral) { routes("tiny-mixtral", "arch_goldens_numpy.json"); }
TEST(MoeRoutesSim, GptOss) { routes("tiny-gpt-oss", "arch_goldens_numpy.json"); }

}  // namespace
}  // namespace troupe
