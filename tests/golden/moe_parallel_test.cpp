// Mixture-of-experts models split over ranks in separate processes (local node processes,
// shared-memory collectives) give one process's greedy tokens: tensor parallelism (every
// expert's rows over 2 ranks), expert parallelism (--enable-expert-parallel: whole experts
// over 2 and 4 ranks, attention tensor parallel), and pipeline stages; for each family, on
// the tiny f32 files of the goldens. Across two `troupe node`s in network namespaces:
// tests/apps/netns/netns_cluster_test.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/run_troupe.hpp"

namespace troupe {
namespace {

using testing::run_troupe;

std::string make_file(const std::string& shape) {
  const std::string path = ::testing::TempDir() + "moe_parallel_" + std::to_string(::getpid()) + "_" + shape + ".gguf";
  auto r = run_troupe("make-gguf --model-shape " + shape + " --weight-type f32 --seed 7 -o " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

void expect_same_tokens_split(const std::string& shape) {
  SCOPED_TRACE(shape);
  const std::string file = make_file(shape);
  const std::string base = "generate " + file + " -p 'Hello world, this is a test of' -n 24 --json --threads 1";
  auto one = run_troupe(base);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto want = nlohmann::json::parse(one.out)["token_ids"];
  ASSERT_EQ(want.size(), 24u);
  for (const char* split : {"--tensor-parallel-size 2", "--tensor-parallel-size 2 --enable-expert-parallel",
                            "--tensor-parallel-size 4 --enable-expert-parallel",
                            "--tensor-parallel-size 2 --pipeline-parallel-size 2 --enable-expert-parallel"}) {
    SCOPED_TRACE(split);
    auto r = run_troupe(base + " " + split);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["token_ids"], want);
    const bool ep = std::string(split).find("expert") != std::string::npos;
    EXPECT_NE(r.err.find(ep ? "expert parallel," : "tensor parallel,"), std::string::npos) << r.err;
  }
  std::remove(file.c_str());
}

TEST(MoeParallel, Qwen3MoeIsTokenExactOverRanks) { expect_same_tokens_split("tiny-qwen3moe"); }
TEST(MoeParallel, OlmoeIsTokenExactOverRanks) { expect_same_tokens_split("tiny-olmoe"); }
TEST(MoeParallel, MixtralIsTokenExactOverRanks) { expect_same_tokens_split("tiny-mixtral"); }
TEST(MoeParallel, GptOssIsTokenExactOverRanks) { expect_same_tokens_split("tiny-gpt-oss"); }

}  // namespace
}  // namespace troupe
