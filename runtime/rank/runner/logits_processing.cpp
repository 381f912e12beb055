#include "runtime/rank/runner/logits_processing.hpp"

#include <exception>

#include "runtime/text/json/json_io.hpp"
#include "troupe/check.hpp"

namespace troupe::engine {

/// The runtime tokenizer as the SDK's TokenizerView.
class LogitsProcessorChain::Tokenizer final : public TokenizerView {
 public:
  explicit Tokenizer(std::shared_ptr<const tokenizer::Tokenizer> tok) : tok_(std::move(tok)) {}
  int32_t vocab_size() const override { return tok_->vocab_size(); }
  std::vector<int32_t> encode(std::string_view text) const override {
    return tok_->encode(text, /*add_special=*/false, /*parse_special=*/false);
  }
  std::string token_text(int32_t id) const override {
    if (id < 0 || id >= tok_->vocab_size()) return {};
    return tok_->decode({id}, /*skip_special=*/true);
  }

 private:
  std::shared_ptr<const tokenizer::Tokenizer> tok_;
};

namespace {
/// Plugin code must not throw; if it does, the exception becomes an error naming it.
template <class F>
Status guarded(const std::string& name, const char* what, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return internal_error("logits processor '" + name + "' threw in " + what + ": " + e.what());
  } catch (...) {
    return internal_error("logits processor '" + name + "' threw in " + what);
  }
}
}  // namespace

Result<std::string> normalize_extra_args(std::string_view extra_args) {
  if (extra_args.empty()) return std::string("{}");
  json_io::ParseError error;
  auto j = json_io::parse(extra_args, &error);
  if (j.is_discarded())
    return invalid_argument("vllm_xargs is not valid JSON at byte " + std::to_string(error.offset) + ": " +
                            error.message);
  if (!j.is_object()) return invalid_argument("vllm_xargs must be a JSON object");
  return std::string(extra_args);
}

LogitsProcessorChain::~LogitsProcessorChain() {
  processors_.clear();  // before the tokenizer they may point to
}

Result<std::unique_ptr<LogitsProcessorChain>> LogitsProcessorChain::create(
    const EngineConfig& config, int64_t vocab_size, std::shared_ptr<const tokenizer::Tokenizer> tokenizer) {
  std::unique_ptr<LogitsProcessorChain> chain(new LogitsProcessorChain());
  if (config.model.logits_processors.empty()) return chain;
  if (!tokenizer) return invalid_argument("logits processors need the model's tokenizer");
  chain->tokenizer_ = std::make_unique<Tokenizer>(std::move(tokenizer));
  LogitsProcessorContext context;
  context.config = &config;
  context.vocab_size = vocab_size;
  context.tokenizer = chain->tokenizer_.get();
  for (const auto& name : config.model.logits_processors) {
    Result<std::unique_ptr<LogitsProcessor>> made = internal_error("not made");
    Status st = guarded(name, "its factory", [&]() -> Status {
      made = logits_processor_registry::create(name, context);
      return made.status();
    });
    if (!st.ok()) return st;
    chain->names_.push_back(name);
    chain->processors_.push_back(std::move(made).value());
  }
  return chain;
}

Status LogitsProcessorChain::validate(std::string_view request_id, std::string_view extra_args,
                                      std::span<const int32_t> prompt) const {
  auto args = normalize_extra_args(extra_args);
  if (!args) return args.status();
  const LogitsRequest request{request_id, *args, prompt};
  for (size_t i = 0; i < processors_.size(); ++i) {
    Status st = guarded(names_[i], "validate_request", [&] { return processors_[i]->validate_request(request); });
    if (!st.ok()) return Status(st.code(), "logits processor " + names_[i] + ": " + st.message());
  }
  return {};
}

Status LogitsProcessorChain::add_request(std::string_view request_id, std::string_view extra_args,
                                         std::span<const int32_t> prompt) {
  auto args = normalize_extra_args(extra_args);
  if (!args) return args.status();
  const LogitsRequest request{request_id, *args, prompt};
  for (size_t i = 0; i < processors_.size(); ++i) {
    Status st = guarded(names_[i], "add_request", [&] { return processors_[i]->add_request(request); });
    if (!st.ok()) return Status(st.code(), "logits processor " + names_[i] + ": " + st.message());
  }
  return {};
}

void LogitsProcessorChain::remove_request(std::string_view request_id) {
  for (size_t i = 0; i < processors_.size(); ++i)
    (void)guarded(names_[i], "remove_request", [&] {
      processors_[i]->remove_request(request_id);
      return Status{};
    });
}

Status LogitsProcessorChain::apply(float* logits, int64_t vocab_size, std::span<const LogitsRow> rows) {
  LogitsBatch batch;
  batch.vocab_size = vocab_size;
  batch.logits = logits;
  batch.rows = rows;
  for (size_t i = 0; i < processors_.size(); ++i) {
    Status st = guarded(names_[i], "apply", [&] { return processors_[i]->apply(batch); });
    if (!st.ok()) return Status(st.code(), "logits processor " + names_[i] + ": " + st.message());
  }
  return {};
}

}  // namespace troupe::engine
