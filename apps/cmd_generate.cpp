// `troupe generate [MODEL] -p PROMPT ...`: offline generation through the
// active platform's worker (greedy by default). --json prints exactly one
// object; any failure is a message on stderr and exit code 1.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "plugin_host/plugin_host.hpp"
#include "runtime/chat/chat_template.hpp"
#include "runtime/generation/offline_generator.hpp"
#include "troupe/log.hpp"

namespace troupe::apps {
namespace {

constexpr const char* kDefaultModelName = "SmolLM2-135M-Instruct.Q4_1.gguf";

std::string default_model_path() {
  std::string dir;
  if (const char* c = std::getenv("TROUPE_MODEL_CACHE"); c && *c) {
    dir = c;
  } else {
    const char* home = std::getenv("HOME");
    dir = std::string(home ? home : ".") + "/.cache/troupe/models";
  }
  return dir + "/" + kDefaultModelName;
}

struct Options {
  std::string model;
  std::string prompt;
  int max_tokens = 128;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;
  bool chat = false;
  std::string chat_template;
  std::string system;
  bool json = false;
  int threads = 0;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "troupe generate: error: %s\n", message.c_str());
  return 1;
}

// Render the prompt as one chat turn with the model's (or the named) template.
Result<std::vector<int32_t>> chat_prompt_ids(const generation::OfflineGenerator& gen, const Options& o) {
  const auto& tok = gen.tokenizer();
  Result<chat::ChatTemplate> tmpl = internal_error("unset");
  if (!o.chat_template.empty()) {
    tmpl = chat::by_name(o.chat_template);
  } else {
    auto jinja = gen.file().get_string("tokenizer.chat_template");
    if (!jinja) return invalid_argument("the model has no chat template; name one with --chat-template");
    tmpl = chat::detect(*jinja);
  }
  if (!tmpl.ok()) return tmpl.status();
  std::vector<chat::Message> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  messages.push_back({"user", o.prompt});
  const std::string bos = tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id(), true) : "";
  const std::string eos = tok.eos_id() >= 0 ? tok.token_to_piece(tok.eos_id(), true) : "";
  auto text = chat::apply(*tmpl, messages, /*add_generation_prompt=*/true, bos, eos);
  if (!text.ok()) return text.status();
  // A template that writes BOS itself must not get a second one from the tokenizer.
  const bool has_bos = !bos.empty() && text->rfind(bos, 0) == 0;
  return tok.encode(*text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

int run_generate(const Options& o) {
  const std::string model = o.model.empty() ? default_model_path() : o.model;
  if (!std::filesystem::exists(model)) {
    if (o.model.empty())
      return fail("the default model " + model + " is missing; run scripts/fetch-model.sh to download it");
    return fail("model file not found: " + model);
  }
  sampling::SamplingParams params;
  params.temperature = o.temperature;
  params.top_p = o.top_p;
  params.top_k = o.top_k;
  params.min_p = o.min_p;
  params.seed = o.seed;
  params.max_tokens = o.max_tokens;
  if (Status s = params.validate(); !s.ok()) return fail(s.message());
  if (o.threads < 0) return fail("--threads must be >= 0");

  auto& host = plugin_host::PluginHost::instance();
  host.load_all();
  auto platform = host.activate_platform();
  if (!platform.ok()) return fail(platform.status().message());

  EngineConfig config;
  config.parallel.num_threads = o.threads;
  if (o.seed) config.model.seed = *o.seed;
  auto gen = generation::OfflineGenerator::create(**platform, config, model);
  if (!gen.ok()) return fail(gen.status().to_string());

  Result<generation::GenerateOutput> out = internal_error("unset");
  if (o.chat) {
    auto ids = chat_prompt_ids(**gen, o);
    if (!ids.ok()) return fail(ids.status().message());
    out = (*gen)->generate(*ids, params);
  } else {
    out = (*gen)->generate_text(o.prompt, params);
  }
  if (!out.ok()) return fail(out.status().to_string());
  if (o.json) {
    nlohmann::json j = {{"prompt_token_ids", out->prompt_token_ids},
                        {"token_ids", out->token_ids},
                        {"text", out->text},
                        {"finish_reason", out->finish_reason}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else {
    std::cout << out->text << std::endl;
  }
  return 0;
}

const CommandRegistration kRegistration(
    "generate", "Generate text from a prompt with a local model (greedy by default)", [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.add_option("model", o->model, std::string("GGUF model file (default: $TROUPE_MODEL_CACHE/") +
                                            kDefaultModelName + ")");
      sub.add_option("-p,--prompt", o->prompt, "Prompt text")->required();
      sub.add_option("-n,--max-tokens", o->max_tokens, "Tokens to generate at most (default 128)");
      sub.add_option("--temperature", o->temperature, "Sampling temperature; 0 = greedy (default)");
      sub.add_option("--top-p", o->top_p, "Nucleus sampling mass in (0, 1]");
      sub.add_option("--top-k", o->top_k, "Sample among the k best tokens; 0 = all");
      sub.add_option("--min-p", o->min_p, "Drop tokens below min_p times the best probability");
      sub.add_option_function<uint64_t>("--seed", [o](const uint64_t& s) { o->seed = s; }, "Random seed");
      sub.add_flag("--chat", o->chat, "Wrap the prompt in the model's chat template");
      sub.add_option("--chat-template", o->chat_template, "Use this named chat template (implies --chat)");
      sub.add_option("--system", o->system, "System message for --chat");
      sub.add_flag("--json", o->json, "Print one JSON object with token ids, text and finish reason");
      sub.add_option("--threads", o->threads, "CPU compute threads (default: all cores)");
      return [o]() {
        if (!o->chat_template.empty()) o->chat = true;
        return run_generate(*o);
      };
    });

}  // namespace
}  // namespace troupe::apps
