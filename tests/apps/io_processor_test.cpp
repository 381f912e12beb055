// IO processor plugins end to end: the example semantic-search plugin
// (examples/semantic_search) through /pooling of a real `troupe serve` on
// all-MiniLM-L6-v2, and offline through the C++ API; a missing plugin is a
// clear start-up error; a plugin that throws gets a 500 and the server stays up.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>

#include "actors/engine.hpp"
#include "actors/io_processing.hpp"
#include "plugin_host/plugin_host.hpp"
#include "serve_process.hpp"

namespace troupe::tests {
namespace {

using json = nlohmann::json;

const char* minilm_dir() {
  const char* d = std::getenv("TROUPE_MINILM_DIR");
  return d && *d ? d : nullptr;
}

const std::string kPluginPath = std::string(TROUPE_BINARY_DIR) + "/examples/plugins:" + TROUPE_BINARY_DIR +
                                "/tests/plugin_host/plugins/throwing_io";

class PluginEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("TROUPE_PLUGIN_PATH", kPluginPath.c_str(), 1);
    setenv("TROUPE_PLUGINS", "semantic_search,throwing_io", 1);
  }
};
[[maybe_unused]] const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new PluginEnv);

const json kSearch = {{"query", "How do I bake bread?"},
                      {"documents",
                       {"The stock market fell sharply today.", "Knead the dough, let it rise, then bake it at 220 C.",
                        "Cats sleep for most of the day."}},
                      {"top_k", 2}};

void expect_ranked(const json& answer) {
  ASSERT_EQ(answer["object"], "semantic_search") << answer.dump();
  ASSERT_EQ(answer["results"].size(), 2u) << answer.dump();  // top_k
  EXPECT_EQ(answer["results"][0]["index"], 1) << answer.dump();
  EXPECT_GT(answer["results"][0]["score"].get<double>(), answer["results"][1]["score"].get<double>());
}

TEST(IOProcessor, SemanticSearchThroughPooling) {
  if (!minilm_dir()) GTEST_SKIP() << "TROUPE_MINILM_DIR is not set (scripts/test.sh sets it)";
  ServeProcess server({"--io-processor-plugin", "semantic_search", "--disable-log-stats"}, minilm_dir());
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  auto post = [&](const std::string& body) {
    return apps::http::request("127.0.0.1", server.port(), "POST", "/pooling", body,
                               {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
  };
  auto r = post(kSearch.dump());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  expect_ranked(json::parse(r->body));
  auto bad = post(R"({"query": "x"})");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_NE(bad->body.find("'documents' must be a non-empty list"), std::string::npos) << bad->body;
  // /v1/embeddings still works beside the plugin.
  auto e = apps::http::request("127.0.0.1", server.port(), "POST", "/v1/embeddings", R"({"input": "hello"})",
                               {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->status, 200) << e->body;
}

TEST(IOProcessor, SemanticSearchOffline) {
  if (!minilm_dir()) GTEST_SKIP() << "TROUPE_MINILM_DIR is not set";
  engine::EngineOptions opts;
  opts.config.model.model_path = minilm_dir();
  opts.stat_log_interval_s = 0;
  auto eng = engine::Engine::start(std::move(opts));
  ASSERT_TRUE(eng.ok()) << eng.status().to_string();
  auto io = plugin_host::PluginHost::instance().make_io_processor("semantic_search", (*eng)->config());
  ASSERT_TRUE(io.ok()) << io.status().to_string();
  auto out = engine::run_io_processor(**eng, **io, "semantic_search", kSearch.dump());
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_ranked(json::parse(*out));
  auto bad = engine::run_io_processor(**eng, **io, "semantic_search", "not json");
  EXPECT_EQ(bad.status().code(), StatusCode::invalid_argument);
}

TEST(IOProcessor, AMissingPluginIsAStartUpErrorNamingTheInstalledOnes) {
  if (!minilm_dir()) GTEST_SKIP() << "TROUPE_MINILM_DIR is not set";
  ServeProcess server({"--io-processor-plugin", "nope"}, minilm_dir());
  EXPECT_FALSE(server.wait_healthy(std::chrono::seconds(60)));
  EXPECT_NE(server.log().find("no IO processor plugin named nope (loaded: semantic_search, throwing_io)"),
            std::string::npos)
      << server.log();
}

TEST(IOProcessor, AThrowingPluginGetsA500AndTheServerStaysUp) {
  if (!minilm_dir()) GTEST_SKIP() << "TROUPE_MINILM_DIR is not set";
  ServeProcess server({"--io-processor-plugin", "throwing_io", "--disable-log-stats"}, minilm_dir());
  ASSERT_TRUE(server.wait_healthy()) << server.log();
  for (int i = 0; i < 2; ++i) {
    auto r = apps::http::request("127.0.0.1", server.port(), "POST", "/pooling", R"({"x": 1})",
                                 {{"Content-Type", "application/json"}}, {}, std::chrono::seconds(60));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 500) << r->body;
    EXPECT_NE(r->body.find("throws on purpose"), std::string::npos) << r->body;
  }
  EXPECT_TRUE(server.wait_healthy(std::chrono::seconds(5)));
}

}  // namespace
}  // namespace troupe::tests
