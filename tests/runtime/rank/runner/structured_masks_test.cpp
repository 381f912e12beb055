// StructuredOutputs' masks as a step uses them: computed from the requests' states
// before the logits exist (on the worker thread), applied to the logits afterwards,
// advanced by the tokens; a request whose grammar fails ends alone.
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

std::unique_ptr<StructuredOutputs> make_outputs(structured::GrammarLimits limits = {}) {
  auto tok = tiny_tokenizer();
  return std::make_unique<StructuredOutputs>(
      [tok]() -> Result<std::shared_ptr<const tokenizer::Tokenizer>> { return tok; }, kVocab, limits);
}

SamplingState request(std::string id, std::string kind, std::vector<std::string> choices = {}, std::string spec = "") {
  SamplingState s;
  s.request_id = std::move(id);
  s.params.structured_output = std::move(kind);
  s.params.choices = std::move(choices);
  s.params.structured_spec = std::move(spec);
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
  auto outputs_ptr = make_outputs();
  StructuredOutputs& outputs = *outputs_ptr;
  outputs.add(request("plain", ""));
  outputs.add(request("c", "choice", {"yes", "no"}));
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
  auto outputs_ptr = make_outputs();
  StructuredOutputs& outputs = *outputs_ptr;
  outputs.add(request("plain", ""));
  outputs.add(request("c", "choice", {"yes", "no"}));
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
  auto outputs_ptr = make_outputs();
  StructuredOutputs& outputs = *outputs_ptr;
  outputs.add(request("j", "json_object"));
  TokenMasks masks;
  outputs.compute_masks({"j"}, {}, masks);
  std::vector<float> logits(kVocab, 0.0f);
  masks.apply(logits.data(), kVocab, 1);
  EXPECT_EQ(allowed(logits, 0), (std::vector<int32_t>{9}));
  outputs.remove("j");
  outputs.compute_masks({"j"}, {}, masks);
  EXPECT_FALSE(masks.masked(0));
}

// Every kind goes through the one engine: a regex, a GBNF grammar.
TEST(StructuredMasks, RegexAndGrammarKinds) {
  auto outputs_ptr = make_outputs();
  StructuredOutputs& outputs = *outputs_ptr;
  outputs.add(request("r", "regex", {}, "(yes|no)"));
  outputs.add(request("g", "grammar", {}, "root ::= \"n\" \"o\""));
  TokenMasks masks;
  outputs.compute_masks({"r", "g"}, {}, masks);
  EXPECT_TRUE(outputs.take_failures().empty());
  std::vector<float> logits(2 * kVocab, 0.0f);
  masks.apply(logits.data(), kVocab, 2);
  EXPECT_EQ(allowed(logits, 0), (std::vector<int32_t>{3, 5, 6, 8}));  // y, yes, n, no
  EXPECT_EQ(allowed(logits, 1), (std::vector<int32_t>{6, 8}));        // n, no
}

// A grammar that does not compile on the rank, or a mask over its limit, fails only its
// own request; its neighbours' masks are made as usual.
TEST(StructuredMasks, AFailingGrammarFailsItsRequestAlone) {
  structured::GrammarLimits tight;
  tight.max_mask_steps = 1;  // every mask of a grammar with choices to walk goes over it
  auto outputs_ptr = make_outputs(tight);
  StructuredOutputs& outputs = *outputs_ptr;
  outputs.add(request("bad", "json_schema", {}, R"({"not": {"type": "string"}})"));
  outputs.add(request("heavy", "choice", {"yes", "no"}));
  outputs.add(request("plain", ""));
  auto failures = outputs.take_failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].request_id, "bad");
  EXPECT_NE(failures[0].error.message().find("'not'"), std::string::npos) << failures[0].error.message();
  TokenMasks masks;
  outputs.compute_masks({"bad", "heavy", "plain"}, {}, masks);
  failures = outputs.take_failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].request_id, "heavy");
  EXPECT_NE(failures[0].error.message().find("limit"), std::string::npos) << failures[0].error.message();
  EXPECT_FALSE(masks.masked(0));
  EXPECT_FALSE(masks.masked(1));
  EXPECT_FALSE(masks.masked(2));
  // Reported once.
  outputs.compute_masks({"heavy"}, {}, masks);
  EXPECT_TRUE(outputs.take_failures().empty());
  // A mask over its wall time (--structured-outputs-mask-timeout-ms) names that limit.
  structured::GrammarLimits timed;
  timed.max_mask_seconds = 1e-9;
  auto slow_ptr = make_outputs(timed);
  slow_ptr->add(request("slow", "choice", {"yes", "no"}));
  slow_ptr->compute_masks({"slow"}, {}, masks);
  failures = slow_ptr->take_failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].error.message().find("time limit of 0 ms"), std::string::npos) << failures[0].error.message();
}

// Masks are computed on the worker thread while the caller does something else; many steps
// in a row give the same masks as one at a time.
TEST(StructuredMasks, BeginThenEndAcrossManySteps) {
  auto outputs_ptr = make_outputs();
  StructuredOutputs& outputs = *outputs_ptr;
  outputs.add(request("c", "choice", {"yes", "no"}));
  outputs.add(request("j", "json_object"));
  TokenMasks masks;
  for (int step = 0; step < 200; ++step) {
    outputs.begin_masks({"c", "j"}, {}, masks);
    outputs.end_masks();
    std::vector<float> logits(2 * kVocab, 0.0f);
    masks.apply(logits.data(), kVocab, 2);
    ASSERT_EQ(allowed(logits, 0), (std::vector<int32_t>{3, 5, 6, 8}));
    ASSERT_EQ(allowed(logits, 1), (std::vector<int32_t>{9}));
  }
  outputs.end_masks();  // nothing started: returns at once
}

}  // namespace
}  // namespace troupe::engine
