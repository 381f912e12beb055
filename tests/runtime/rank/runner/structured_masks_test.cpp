// StructuredOutputs' masks as a step uses them: computed from the requests' states
// before the logits exist, applied to the logits afterwards, advanced by the tokens.
#include "runtime/rank/runner/structured_outputs.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace troupe::engine {
namespace {

using tokenizer::TokenType;

// Token ids:                     0        1      2       3    4     5      6    7    8     9    10
const std::vector<std::string> kTokens = {"<unk>", "<s>", "</s>", "y", "es", "yes", "n", "o", "no", "{", "}"};
constexpr int64_t kVocab = 11;

std::shared_ptr<const tokenizer::Tokenizer> tiny_tokenizer() {
  tokenizer::Vocab v;
  v.kind = tokenizer::VocabKind::spm;
  v.tokens = kTokens;
  v.scores.assign(kTokens.size(), -1.0f);
  v.types.assign(kTokens.size(), TokenType::normal);
  v.types[0] = TokenType::unknown;
  v.types[1] = v.types[2] = TokenType::control;
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  auto tok = tokenizer::Tokenizer::from_vocab(std::move(v));
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return tok.ok() ? std::shared_ptr<const tokenizer::Tokenizer>(std::move(*tok)) : nullptr;
}

StructuredOutputs make_outputs() {
  auto tok = tiny_tokenizer();
  return StructuredOutputs([tok]() -> Result<std::shared_ptr<const tokenizer::Tokenizer>> { return tok; }, kVocab);
}

SamplingState request(std::string id, std::string kind, std::vector<std::string> choices = {}) {
  SamplingState s;
  s.request_id = std::move(id);
  s.params.structured_output = std::move(kind);
  s.params.choices = std::move(choices);
  return s;
}

// The tokens row `row` of `logits` still allows.
std::vector<int32_t> allowed(const std::vector<float>& logits, size_t row) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < kVocab; ++id)
    if (std::isfinite(logits[row * kVocab + static_cast<size_t>(id)])) ids.push_back(id);
  return ids;
}

TEST(StructuredMasks, ComputedBeforeTheLogitsAppliedAfter) {
  StructuredOutputs outputs = make_outputs();
  ASSERT_TRUE(outputs.add(request("plain", "")).ok());
  ASSERT_TRUE(outputs.add(request("c", "choice", {"yes", "no"})).ok());
  EXPECT_FALSE(outputs.has("plain"));
  // "c" verifies one draft ("y"): its second row is masked from the state after it.
  TokenMasks masks;
  outputs.compute_masks({"plain", "c"}, {{}, {3}}, masks);
  ASSERT_EQ(masks.rows(), 3u);
  EXPECT_FALSE(masks.masked(0));
  EXPECT_TRUE(masks.masked(1));
  EXPECT_TRUE(masks.masked(2));
  std::vector<float> logits(3 * kVocab, 0.0f);
  masks.apply(logits.data(), kVocab + 1, 3);  // another width: not these masks' logits
  EXPECT_EQ(allowed(logits, 1).size(), static_cast<size_t>(kVocab));
  masks.apply(logits.data(), kVocab, 3);
  EXPECT_EQ(allowed(logits, 0).size(), static_cast<size_t>(kVocab));
  EXPECT_EQ(allowed(logits, 1), (std::vector<int32_t>{3, 5, 6, 8}));  // y, yes, n, no
  EXPECT_EQ(allowed(logits, 2), (std::vector<int32_t>{4}));           // es
}

TEST(StructuredMasks, AdvanceFollowsTheStepsTokens) {
  StructuredOutputs outputs = make_outputs();
  ASSERT_TRUE(outputs.add(request("plain", "")).ok());
  ASSERT_TRUE(outputs.add(request("c", "choice", {"yes", "no"})).ok());
  StepOutput out;
  out.tokens.resize(3);
  out.tokens[0].token = 7;
  out.tokens[1].token = 3;  // "y", an accepted draft
  out.tokens[2].token = 4;  // "es"
  out.num_accepted = {0, 1};
  outputs.advance({"plain", "c"}, out);
  TokenMasks masks;
  outputs.compute_masks({"c"}, {}, masks);
  std::vector<float> logits(kVocab, 0.0f);
  masks.apply(logits.data(), kVocab, 1);
  EXPECT_EQ(allowed(logits, 0), (std::vector<int32_t>{2}));  // "yes" is whole: only the end
}

TEST(StructuredMasks, JsonObjectStartsWithABrace) {
  StructuredOutputs outputs = make_outputs();
  ASSERT_TRUE(outputs.add(request("j", "json_object")).ok());
  TokenMasks masks;
  outputs.compute_masks({"j"}, {}, masks);
  std::vector<float> logits(kVocab, 0.0f);
  masks.apply(logits.data(), kVocab, 1);
  EXPECT_EQ(allowed(logits, 0), (std::vector<int32_t>{9}));
  outputs.remove("j");
  outputs.compute_masks({"j"}, {}, masks);
  EXPECT_FALSE(masks.masked(0));
}

}  // namespace
}  // namespace troupe::engine
