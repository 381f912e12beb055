// Admission without actors: InputProcessor on the real stories260K tokenizer
// (each check, the field it names, ids and seeds, LoRA names, logits-processor
// arguments) and the LoraRegistry behind the LoRA names.
#include "runtime/frontend/admission/input_processor.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/engine_core/lora_registry.hpp"
#include "engine_test_support.hpp"
#include "troupe/logits_processor.hpp"

namespace troupe::engine {
namespace {

using testing::stories_tokenizer;

constexpr int64_t kMaxModelLen = 64;
constexpr int64_t kHidden = 64;

InputProcessorSetup generate_setup() {
  InputProcessorSetup s;
  s.config.model.runner = "generate";
  s.config.model.served_model_name = "stories";
  s.config.model.max_model_len = kMaxModelLen;
  s.config.scheduler.scheduler_cls = "fcfs";
  s.model_info.vocab_size = stories_tokenizer()->vocab_size();
  s.model_info.hidden_size = kHidden;
  s.tokenizer = stories_tokenizer();
  return s;
}

InputProcessorSetup pooling_setup() {
  InputProcessorSetup s = generate_setup();
  s.config.model.runner = "pooling";
  s.config.scheduler.max_num_batched_tokens = 16;
  return s;
}

GenerateRequest ids_request(std::vector<int32_t> ids, int32_t max_tokens = 4) {
  GenerateRequest r;
  r.prompt_token_ids = std::move(ids);
  r.sampling.max_tokens = max_tokens;
  return r;
}

GenerateRequest pooling_request(std::vector<int32_t> ids) {
  GenerateRequest r;
  r.prompt_token_ids = std::move(ids);
  r.pooling = PoolingParams{};
  return r;
}

// Refused with `code`, naming `field`, with `text` in the message.
void expect_refused(InputProcessor& p, GenerateRequest r, StatusCode code, const std::string& field,
                    const std::string& text, int64_t in_flight = 0) {
  std::string named = "unset";
  auto out = p.process(std::move(r), in_flight, &named);
  ASSERT_FALSE(out.ok()) << "admitted; expected: " << text;
  EXPECT_EQ(out.status().code(), code) << out.status().to_string();
  EXPECT_EQ(named, field) << out.status().to_string();
  EXPECT_NE(out.status().message().find(text), std::string::npos) << out.status().message();
}

TEST(InputProcessor, TokenizesAndAssignsIdsAndSeeds) {
  InputProcessorSetup setup = generate_setup();
  setup.seeds.seed(7);
  std::mt19937_64 expected_seeds(7);
  InputProcessor p(std::move(setup));
  GenerateRequest text;
  text.prompt = "Once upon a time";
  auto a = p.process(text, 0);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  std::vector<int32_t> want = stories_tokenizer()->encode("Once upon a time", true, true);
  EXPECT_EQ(a->request.prompt_token_ids, want);
  EXPECT_EQ(a->request.prompt_token_ids.front(), stories_tokenizer()->bos_id());
  EXPECT_EQ(a->request.request_id, "req-0");
  EXPECT_EQ(a->request.seed, expected_seeds());
  EXPECT_EQ(a->request.lora_id, 0);
  EXPECT_EQ(a->lora, nullptr);
  text.add_special_tokens = false;
  auto b = p.process(text, 0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->request.prompt_token_ids, testing::ids_of("Once upon a time"));
  EXPECT_EQ(b->request.request_id, "req-1");
  EXPECT_EQ(b->request.seed, expected_seeds());
  // Given ids are used as they are; a given id and seed are kept.
  GenerateRequest given = ids_request({5, 6, 7});
  given.request_id = "mine";
  given.sampling.seed = 99;
  given.priority = 0;
  given.cache_salt = "salt";
  auto c = p.process(given, 0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->request.prompt_token_ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(c->request.request_id, "mine");
  EXPECT_EQ(c->request.seed, 99u);
  EXPECT_EQ(c->request.cache_salt, "salt");
  EXPECT_EQ(c->request.sampling.max_tokens, 4);
}

TEST(InputProcessor, RunnerMustMatchTheRequest) {
  InputProcessor gen(generate_setup());
  expect_refused(gen, pooling_request({1, 2}), StatusCode::invalid_argument, "", "start it with --runner pooling");
  InputProcessor pool(pooling_setup());
  expect_refused(pool, ids_request({1, 2}), StatusCode::invalid_argument, "", "runs as a pooling model");
  EXPECT_TRUE(pool.process(pooling_request({1, 2}), 0).ok());
}

TEST(InputProcessor, EmptyAndTruncatedPrompts) {
  InputProcessor p(generate_setup());
  expect_refused(p, ids_request({}), StatusCode::invalid_argument, "prompt", "The decoder prompt cannot be empty");
  InputProcessor pool(pooling_setup());
  expect_refused(pool, pooling_request({}), StatusCode::invalid_argument, "input", "The input cannot be empty");
  GenerateRequest r = ids_request({1, 2, 3, 4, 5});
  r.truncate_prompt_tokens = 2;
  auto kept = p.process(r, 0);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->request.prompt_token_ids, (std::vector<int32_t>{4, 5}));
  r.truncate_prompt_tokens = 0;
  expect_refused(p, r, StatusCode::invalid_argument, "truncate_prompt_tokens", "at least 1");
}

// truncate_prompt_tokens as a Hugging Face tokenizer truncates: the BOS the tokenizer adds
// stays; generation keeps the text's end, pooling its start; ids are cut plainly.
TEST(InputProcessor, TruncationKeepsTheSpecialTokens) {
  const auto tok = stories_tokenizer();
  ASSERT_TRUE(tok->add_bos());
  const std::string text = "Once upon a time there was a little girl who loved to play in the park";
  const std::vector<int32_t> bare = tok->encode(text, /*add_special=*/false, /*parse_special=*/true);
  ASSERT_GT(bare.size(), 8u);
  const int32_t bos = tok->bos_id();

  InputProcessor p(generate_setup());
  GenerateRequest g;
  g.prompt = text;
  g.sampling.max_tokens = 4;
  g.truncate_prompt_tokens = 5;
  auto kept = p.process(g, 0);
  ASSERT_TRUE(kept.ok()) << kept.status().to_string();
  std::vector<int32_t> want{bos};
  want.insert(want.end(), bare.end() - 4, bare.end());
  EXPECT_EQ(kept->request.prompt_token_ids, want);

  InputProcessor pool(pooling_setup());
  GenerateRequest e;
  e.prompt = text;
  e.pooling = PoolingParams{};
  e.truncate_prompt_tokens = 5;
  auto first = pool.process(e, 0);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  want = {bos};
  want.insert(want.end(), bare.begin(), bare.begin() + 4);
  EXPECT_EQ(first->request.prompt_token_ids, want);
  // Without special tokens, the text alone is cut.
  e.add_special_tokens = false;
  first = pool.process(e, 0);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->request.prompt_token_ids, std::vector<int32_t>(bare.begin(), bare.begin() + 5));
  // Token ids: pooling keeps the first N.
  GenerateRequest r = pooling_request({5, 6, 7, 8});
  r.truncate_prompt_tokens = 2;
  auto ids = pool.process(r, 0);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(ids->request.prompt_token_ids, (std::vector<int32_t>{5, 6}));

  // -1 is max_model_len: a shorter prompt is kept whole; beyond max_model_len is refused.
  g.truncate_prompt_tokens = -1;
  kept = p.process(g, 0);
  ASSERT_TRUE(kept.ok()) << kept.status().to_string();
  EXPECT_EQ(kept->request.prompt_token_ids.size(), bare.size() + 1);
  g.truncate_prompt_tokens = kMaxModelLen + 1;
  expect_refused(p, g, StatusCode::invalid_argument, "truncate_prompt_tokens", "greater than");
  g.truncate_prompt_tokens = -2;
  expect_refused(p, g, StatusCode::invalid_argument, "truncate_prompt_tokens", "at least 1");
}

TEST(InputProcessor, SamplingParametersAreValidated) {
  InputProcessor p(generate_setup());
  GenerateRequest r = ids_request({1, 2});
  r.sampling.top_p = 1.5f;
  std::string field;
  const std::string message = r.sampling.validate(&field).message();
  EXPECT_EQ(field, "top_p");
  expect_refused(p, r, StatusCode::invalid_argument, "top_p", message);
  r = ids_request({1, 2}, 3);
  r.sampling.min_tokens = 4;
  expect_refused(p, r, StatusCode::invalid_argument, "min_tokens", "max_tokens (3)");
}

TEST(InputProcessor, TokenIdsMustBeInTheVocabulary) {
  InputProcessorSetup setup = generate_setup();
  setup.model_info.vocab_size = 300;  // smaller than the tokenizer's: the smaller one counts
  InputProcessor p(std::move(setup));
  EXPECT_EQ(p.vocab_size(), 300);
  EXPECT_TRUE(p.process(ids_request({1, 299}), 0).ok());
  expect_refused(p, ids_request({1, 300}), StatusCode::out_of_range, "prompt",
                 "token id 300 is out of vocabulary (size 300)");
  expect_refused(p, ids_request({-1}), StatusCode::out_of_range, "prompt", "token id -1 is out of vocabulary");
  GenerateRequest r = ids_request({1});
  r.sampling.stop_token_ids = {2, 300};
  expect_refused(p, r, StatusCode::out_of_range, "stop_token_ids", "stop_token_ids: token id 300 is out of vocabulary");
  r = ids_request({1});
  r.sampling.logit_bias = {{400, 1.0f}};
  expect_refused(p, r, StatusCode::out_of_range, "logit_bias", "logit_bias: token id 400 is out of vocabulary");
  r = ids_request({1});
  r.sampling.allowed_token_ids = {5, 1000};
  expect_refused(p, r, StatusCode::out_of_range, "allowed_token_ids", "token id 1000 is out of vocabulary");
  InputProcessor pool(pooling_setup());
  expect_refused(pool, pooling_request({1, 100000}), StatusCode::out_of_range, "input", "out of vocabulary");
}

// vLLM's bad_words: each word (leading whitespace stripped) tokenized without special tokens,
// and " " + word too when that starts with another token and has as many tokens.
TEST(InputProcessor, BadWordsBecomeTokenSequences) {
  const auto tok = stories_tokenizer();
  InputProcessor p(generate_setup());
  GenerateRequest r = ids_request({1, 5});
  r.bad_words = {"  Lily", "once upon"};
  auto a = p.process(r, 0);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  std::vector<std::vector<int32_t>> want;
  for (std::string w : {"Lily", "once upon"}) {
    auto plain = tok->encode(w, false, true), spaced = tok->encode(" " + w, false, true);
    want.push_back(plain);
    if (spaced.front() != plain.front() && spaced.size() == plain.size()) want.push_back(spaced);
  }
  EXPECT_EQ(a->request.sampling.bad_words_token_ids, want);
  EXPECT_GE(want.size(), 2u);
  EXPECT_GT(want.back().size(), 1u);  // "once upon" is more than one token
  r.bad_words = {"ok", " \t "};
  expect_refused(p, r, StatusCode::invalid_argument, "bad_words", "empty or only whitespace");
}

TEST(InputProcessor, ContextLength) {
  InputProcessor p(generate_setup());
  EXPECT_TRUE(p.process(ids_request({1, 2, 3}, kMaxModelLen - 3), 0).ok());
  expect_refused(p, ids_request({1, 2, 3}, kMaxModelLen - 2), StatusCode::out_of_range, "max_tokens",
                 "This model's maximum context length is 64 tokens. However, you requested 65 tokens (3 in the "
                 "messages, 62 in the completion). Please reduce the length of the messages or completion.");
  // Unset max_tokens (vLLM): the rest of the context.
  GenerateRequest fill = ids_request({1, 2, 3}, 1);
  fill.max_tokens_fills_context = true;
  auto filled = p.process(fill, 0);
  ASSERT_TRUE(filled.ok());
  EXPECT_EQ(filled->request.sampling.max_tokens, kMaxModelLen - 3);
  fill.prompt_token_ids.assign(kMaxModelLen, 1);
  expect_refused(p, fill, StatusCode::out_of_range, "max_tokens", "(64 in the messages, 1 in the completion)");
  fill.prompt_token_ids = {1, 2, 3};
  fill.sampling.min_tokens = kMaxModelLen;  // more than the 61 left
  expect_refused(p, fill, StatusCode::invalid_argument, "min_tokens", "max_tokens (61)");
  // Pooling: the whole input in one step, within the context.
  InputProcessor pool(pooling_setup());
  EXPECT_TRUE(pool.process(pooling_request(std::vector<int32_t>(16, 1)), 0).ok());
  expect_refused(pool, pooling_request(std::vector<int32_t>(17, 1)), StatusCode::out_of_range, "input",
                 "more than max_num_batched_tokens 16");
  expect_refused(pool, pooling_request(std::vector<int32_t>(kMaxModelLen + 1, 1)), StatusCode::out_of_range, "input",
                 "maximum context length is 64");
}

class PriorityPolicy final : public SchedulerPolicy {
 public:
  bool before(const SchedulingRequest& a, const SchedulingRequest& b) const override { return a.priority < b.priority; }
  bool uses_priority() const override { return true; }
};

TEST(InputProcessor, PriorityNeedsAPolicyThatUsesIt) {
  InputProcessor fcfs(generate_setup());
  GenerateRequest r = ids_request({1, 2});
  r.priority = 3;
  expect_refused(fcfs, r, StatusCode::invalid_argument, "priority", "scheduler policy 'fcfs' does not use priorities");
  InputProcessorSetup setup = generate_setup();
  setup.policy = std::make_shared<PriorityPolicy>();
  InputProcessor prio(std::move(setup));
  auto admitted = prio.process(r, 0);
  ASSERT_TRUE(admitted.ok()) << admitted.status().to_string();
  EXPECT_EQ(admitted->request.priority, 3);
}

TEST(InputProcessor, MatryoshkaDimensions) {
  GenerateRequest r = pooling_request({1, 2});
  r.pooling->dimensions = 8;
  InputProcessor plain(pooling_setup());
  expect_refused(plain, r, StatusCode::invalid_argument, "dimensions", "does not support matryoshka representation");
  InputProcessorSetup setup = pooling_setup();
  setup.config.model.pooling_matryoshka = true;
  InputProcessor matryoshka(std::move(setup));
  auto ok = matryoshka.process(r, 0);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->request.pooling->dimensions, 8);
  for (int32_t bad : {0, static_cast<int32_t>(kHidden) + 1}) {
    r.pooling->dimensions = bad;
    expect_refused(matryoshka, r, StatusCode::invalid_argument, "dimensions", "dimensions must be in 1..64");
  }
}

TEST(InputProcessor, QueueCap) {
  InputProcessorSetup setup = generate_setup();
  setup.config.scheduler.max_num_seqs = 2;
  setup.config.scheduler.max_num_queued_requests = 3;
  InputProcessor p(std::move(setup));
  EXPECT_TRUE(p.process(ids_request({1}), 4).ok());
  expect_refused(p, ids_request({1}), StatusCode::resource_exhausted, "", "waiting queue is full (3 queued", 5);
  InputProcessor unbounded(generate_setup());
  EXPECT_TRUE(unbounded.process(ids_request({1}), 100000).ok());
}

TEST(InputProcessor, LoraNamesBecomeIdsHeldUntilReleased) {
  InputProcessor off(generate_setup());
  GenerateRequest r = ids_request({1, 2});
  r.lora_name = "a";
  expect_refused(off, r, StatusCode::not_found, "", "The model `a` does not exist.");

  auto loras = std::make_shared<LoraRegistry>();
  InputProcessorSetup setup = generate_setup();
  setup.loras = loras;
  InputProcessor p(std::move(setup));
  expect_refused(p, r, StatusCode::not_found, "", "The model `a` does not exist.");
  auto info = loras->begin_load("a", "/a.gguf", "stories");
  ASSERT_TRUE(info.ok());
  expect_refused(p, r, StatusCode::not_found, "", "does not exist");  // still loading
  ASSERT_TRUE(loras->finish_load(*info, Status{}).ok());
  auto admitted = p.process(r, 0);
  ASSERT_TRUE(admitted.ok()) << admitted.status().to_string();
  EXPECT_EQ(admitted->request.lora_id, info->id);
  ASSERT_NE(admitted->lora, nullptr);
  // Held: not unloadable; the structured answer says by how many requests.
  auto unload = loras->begin_unload("a");
  EXPECT_EQ(unload.outcome, LoraRegistry::UnloadOutcome::in_use);
  EXPECT_EQ(unload.users, 1);
  EXPECT_EQ(unload.info.id, info->id);
  admitted->lora->release();
  admitted->lora.reset();  // a second release (the destructor's) is a no-op
  unload = loras->begin_unload("a");
  ASSERT_EQ(unload.outcome, LoraRegistry::UnloadOutcome::started);
  // Being unloaded: no new request may name it, and it cannot be unloaded twice.
  expect_refused(p, r, StatusCode::not_found, "", "does not exist");
  EXPECT_EQ(loras->begin_unload("a").outcome, LoraRegistry::UnloadOutcome::unknown);
  loras->finish_unload("a");
  EXPECT_TRUE(loras->list().empty());
  // A new adapter of the same name never gets the old id back.
  auto again = loras->begin_load("a", "/a.gguf", "stories");
  ASSERT_TRUE(again.ok());
  EXPECT_GT(again->id, info->id);
}

TEST(LoraRegistry, NamesAndLoadErrors) {
  auto loras = std::make_shared<LoraRegistry>();
  EXPECT_EQ(loras->begin_load("", "/x", "base").status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(loras->begin_load("x", "", "base").status().code(), StatusCode::invalid_argument);
  EXPECT_NE(loras->begin_load("base", "/x", "base").status().message().find("the base model's name"),
            std::string::npos);
  auto x = loras->begin_load("x", "/x", "base");
  ASSERT_TRUE(x.ok());
  // Taken while loading, and once loaded.
  EXPECT_NE(loras->begin_load("x", "/y", "base").status().message().find("has already been loaded"),
            std::string::npos);
  // A file the client named that the ranks cannot use is the client's mistake; the name is free again.
  Status missing = loras->finish_load(*x, not_found("/x: no such file"));
  EXPECT_EQ(missing.code(), StatusCode::invalid_argument);
  EXPECT_EQ(missing.message(), "/x: no such file");
  x = loras->begin_load("x", "/x", "base");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(loras->finish_load(*x, data_loss("bad")).code(), StatusCode::invalid_argument);
  x = loras->begin_load("x", "/x", "base");
  ASSERT_TRUE(x.ok());
  // A rank that failed keeps its code.
  EXPECT_EQ(loras->finish_load(*x, unavailable("rank 1 died")).code(), StatusCode::unavailable);
  EXPECT_TRUE(loras->list().empty());
  x = loras->begin_load("x", "/x", "base");
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(loras->finish_load(*x, Status{}).ok());
  ASSERT_EQ(loras->list().size(), 1u);
  EXPECT_EQ(loras->list()[0].path, "/x");
  EXPECT_NE(loras->begin_load("x", "/y", "base").status().message().find("has already been loaded"),
            std::string::npos);
  EXPECT_EQ(loras->begin_unload("nope").outcome, LoraRegistry::UnloadOutcome::unknown);
  // A lease outliving nothing but itself releases on destruction.
  {
    auto lease = loras->acquire("x");
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(loras->begin_unload("x").outcome, LoraRegistry::UnloadOutcome::in_use);
  }
  EXPECT_EQ(loras->begin_unload("x").outcome, LoraRegistry::UnloadOutcome::started);
}

// Refuses requests whose arguments lack "n" (a processor's own check at submission).
class NeedsN final : public LogitsProcessor {
 public:
  Status validate_request(const LogitsRequest& r) const override {
    if (r.args_json.find("\"n\"") == std::string_view::npos) return invalid_argument("needs n");
    return {};
  }
  Status add_request(const LogitsRequest&) override { return {}; }
  void remove_request(std::string_view) override {}
  Status apply(const LogitsBatch&) override { return {}; }
};

TEST(InputProcessor, LogitsProcessorArguments) {
  logits_processor_registry::register_processor(
      "test_input_needs_n", [](const LogitsProcessorContext&) -> Result<std::unique_ptr<LogitsProcessor>> {
        return std::unique_ptr<LogitsProcessor>(std::make_unique<NeedsN>());
      });
  InputProcessorSetup setup = generate_setup();
  setup.config.model.logits_processors = {"test_input_needs_n"};
  auto chain = LogitsProcessorChain::create(setup.config, setup.model_info.vocab_size, setup.tokenizer);
  ASSERT_TRUE(chain.ok()) << chain.status().to_string();
  setup.processors = chain->get();
  InputProcessor p(std::move(setup));
  GenerateRequest r = ids_request({1, 2});
  expect_refused(p, r, StatusCode::invalid_argument, "", "logits processor test_input_needs_n: needs n");
  r.sampling.extra_args = R"({"m":1})";
  expect_refused(p, r, StatusCode::invalid_argument, "", "needs n");
  r.sampling.extra_args = "[1]";
  expect_refused(p, r, StatusCode::invalid_argument, "", "");  // not an object
  r.sampling.extra_args = R"({"n":2})";
  auto ok = p.process(r, 0);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->request.sampling.extra_args, R"({"n":2})");
  // Pooling requests carry no processor arguments.
  InputProcessorSetup pool_setup = pooling_setup();
  pool_setup.processors = chain->get();
  InputProcessor pool(std::move(pool_setup));
  EXPECT_TRUE(pool.process(pooling_request({1, 2}), 0).ok());
}

}  // namespace
}  // namespace troupe::engine
