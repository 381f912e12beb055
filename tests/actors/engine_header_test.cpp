// The public engine header includes no CAF: a program that only embeds the
// engine (start, stream, stats callbacks) compiles and runs against
// actors/engine.hpp alone. The #error below is the check; the test runs a real
// engine through that header.
#include "actors/engine.hpp"

#ifdef CAF_VERSION
#error "actors/engine.hpp pulled in a CAF header: keep CAF behind actors/engine_caf.hpp"
#endif

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>

namespace {

TEST(EngineHeader, AnEngineRunsThroughThePlainHeaderAlone) {
  troupe::engine::EngineOptions opts;
  opts.config.model.model_path = std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf";
  opts.config.parallel.num_threads = 2;
  opts.stat_log_interval_s = 0;
  auto engine = troupe::engine::Engine::start(std::move(opts));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::atomic<int> steps{0};
  const uint64_t sub = (*engine)->subscribe_stats([&steps](const troupe::engine::StatsEvent&) { ++steps; });

  troupe::engine::GenerateRequest request;
  request.prompt = "Once upon a time";
  request.sampling.temperature = 0;
  request.sampling.max_tokens = 8;
  request.sampling.ignore_eos = true;
  auto streamed = std::make_shared<std::promise<int>>();
  auto count = std::make_shared<int>(0);
  auto id = (*engine)->submit(request, [streamed, count](troupe::engine::RequestOutput out) {
    *count += static_cast<int>(out.new_token_ids.size());
    if (out.finished) streamed->set_value(*count);
  });
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  auto done = streamed->get_future();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(done.get(), 8);
  auto blocking = (*engine)->generate(request);
  ASSERT_TRUE(blocking.ok()) << blocking.status().to_string();
  EXPECT_EQ(blocking->token_ids.size(), 8u);
  (*engine)->unsubscribe_stats(sub);
  EXPECT_GT(steps.load(), 0) << "no stats event reached the callback";
}

}  // namespace
