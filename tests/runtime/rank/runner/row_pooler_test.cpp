// RowPooler: each pooling request's rows found in the step's batch and pooled.
#include "runtime/rank/runner/pooling.hpp"

#include <gtest/gtest.h>

namespace troupe::engine {
namespace {

SamplingState pooling_request(std::string id, PoolingParams params = {}) {
  SamplingState s;
  s.request_id = std::move(id);
  s.pooling = true;
  s.pooling_params = params;
  return s;
}

// Two whole prompts in one step: "a" has rows 0..1, "b" rows 2..4; hidden size 2.
struct TwoSequences {
  ForwardBatch batch;
  ModelRunnerOutput result;
  DriverRequests requests;
  TwoSequences() {
    batch.token_ids = {10, 11, 20, 21, 22};
    batch.query_start = {0, 2, 5};
    batch.seq_lens = {2, 3};
    batch.logits_indices = {1, 4};
    result.hidden_size = 2;
    result.hidden_states = {1, 2, 3, 4,  // a
                            0, 3, 6, 9, 3, 0};  // b
    requests.add(pooling_request("a"));
    requests.add(pooling_request("b", {PoolingType::cls, false, std::nullopt}));
  }
};

TEST(RowPooler, PoolsEachSequencesOwnRows) {
  TwoSequences s;
  RowPooler pooler(0, PoolingDefaults{PoolingType::mean, false, false});
  StepOutput out;
  ASSERT_TRUE(pooler.pool_rows({"a", "b"}, s.batch, s.result, s.requests, out).ok());
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.tokens[0].embedding, (std::vector<float>{2, 3}));  // the mean of a's rows (the default)
  EXPECT_EQ(out.tokens[1].embedding, (std::vector<float>{0, 3}));  // b asked for its first row
  EXPECT_EQ(out.tokens[0].token, 0);
}

TEST(RowPooler, RefusesSplitPromptsGenerationAndBadShapes) {
  RowPooler pooler(3, PoolingDefaults{});
  StepOutput out;
  {
    TwoSequences s;
    s.batch.seq_lens[1] = 7;  // b's prompt began in an earlier step
    auto st = pooler.pool_rows({"a", "b"}, s.batch, s.result, s.requests, out);
    EXPECT_EQ(st.code(), StatusCode::internal);
    EXPECT_NE(st.message().find("split over steps"), std::string::npos) << st.message();
  }
  {
    TwoSequences s;
    SamplingState gen;
    gen.request_id = "b";
    s.requests.add(gen);
    EXPECT_EQ(pooler.pool_rows({"a", "b"}, s.batch, s.result, s.requests, out).code(), StatusCode::invalid_argument);
  }
  {
    TwoSequences s;
    s.result.hidden_states.pop_back();
    auto st = pooler.pool_rows({"a", "b"}, s.batch, s.result, s.requests, out);
    EXPECT_EQ(st.code(), StatusCode::internal);
    EXPECT_NE(st.message().find("rank 3"), std::string::npos) << st.message();
  }
  {
    TwoSequences s;
    EXPECT_EQ(pooler.pool_rows({"a", "gone"}, s.batch, s.result, s.requests, out).code(), StatusCode::internal);
  }
}

}  // namespace
}  // namespace troupe::engine
