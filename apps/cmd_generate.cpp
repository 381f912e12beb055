// `troupe generate [MODEL] -p PROMPT ...` or `--prompts-file FILE`: generation
// through the actor engine (greedy by default). --json prints exactly one
// object; a prompts file prints one JSON line per prompt in input order, all
// run concurrently; --stats adds the run's totals. Any failure is a message on
// stderr (or an {"error"} line) and exit code 1.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "apps/default_model.hpp"
#include "apps/load_format_options.hpp"
#include "apps/policy_options.hpp"
#include "apps/quantization_option.hpp"
#include "apps/speculative_options.hpp"
#include "runtime/text/chat/chat_template.hpp"
#include "actors/engine.hpp"
#include "apps/node_options.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "troupe/log.hpp"

namespace troupe::apps {
namespace {

struct Options {
  std::string model;
  std::string prompt;
  // Unset: the model folder's generation_config.json value (--generation-config auto),
  // else troupe generate's own default (greedy, 128 tokens).
  std::optional<int> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::string generation_config = "auto";
  std::optional<uint64_t> seed;
  bool chat = false;
  std::string chat_template;
  std::string system;
  bool json = false;
  std::string prompts_file;
  bool stats = false;
  int max_num_seqs = 256;
  std::string runner = "auto";
  std::string quantization;  // --quantization: a load-time method (vLLM's flag)
  LoadFormatOptions load;
  PolicyOptions policy;
  std::string speculative_config;  // --speculative-config JSON
  std::string vllm_xargs;  // per-request arguments of the logits processors (JSON object)
  PlacementOptions placement;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "troupe generate: error: %s\n", message.c_str());
  return 1;
}

// One prompt as an engine request: plain text, or one chat turn rendered with
// the model's (or the named) template.
Result<engine::GenerateRequest> make_request(const engine::Engine& eng, const Options& o, const std::string& prompt,
                                             const sampling::SamplingParams& params) {
  engine::GenerateRequest req;
  req.sampling = params;
  if (eng.config().model.runner == "pooling") {
    req.prompt = prompt;
    req.pooling = engine::PoolingParams{};
    return req;
  }
  if (!o.chat) {
    req.prompt = prompt;
    return req;
  }
  std::vector<chat::Message> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  messages.push_back({"user", prompt});
  auto text = eng.apply_chat_template(messages, /*add_generation_prompt=*/true);
  if (!text.ok()) return text.status();
  const auto& tok = eng.tokenizer();
  const std::string bos = tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id(), true) : "";
  // A template that writes BOS itself must not get a second one from the tokenizer.
  req.add_special_tokens = bos.empty() || text->rfind(bos, 0) != 0;
  req.prompt = std::move(*text);
  return req;
}

nlohmann::json output_json(const engine::FinalOutput& out) {
  if (out.finish_reason == FinishReason::error) return {{"error", out.error.to_string()}};
  if (!out.embedding.empty()) return {{"prompt_token_ids", out.prompt_token_ids}, {"embedding", out.embedding}};
  return {{"prompt_token_ids", out.prompt_token_ids},
          {"token_ids", out.token_ids},
          {"text", out.text},
          {"finish_reason", to_string(out.finish_reason)}};
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

/// Totals over every step of the run, for --stats.
struct RunStats {
  std::mutex mu;
  std::condition_variable cv;
  int64_t steps = 0, prompt_tokens = 0, generation_tokens = 0, preemptions = 0;
  int64_t prefix_queries = 0, prefix_hits = 0, finished = 0;
  double max_kv_usage = 0, model_seconds = 0, communicator_seconds = 0;
  int64_t communicator_bytes = 0;
  int64_t spec_drafts = 0, spec_draft_tokens = 0, spec_accepted_tokens = 0;  // speculative decoding
  std::vector<double> ttft, itl, e2e;
  void add(const engine::StatsEvent& ev) {
    std::lock_guard lock(mu);
    if (ev.scheduler.num_scheduled_tokens > 0) ++steps;
    prompt_tokens += ev.iteration.num_prompt_tokens;
    generation_tokens += ev.iteration.num_generation_tokens;
    preemptions += ev.scheduler.num_preempted_reqs;
    prefix_queries += ev.scheduler.prefix_cache_queries;
    prefix_hits += ev.scheduler.prefix_cache_hits;
    max_kv_usage = std::max(max_kv_usage, ev.scheduler.kv_cache_usage);
    model_seconds += ev.scheduler.model_seconds;
    communicator_seconds += ev.scheduler.communicator_seconds;
    communicator_bytes += ev.scheduler.communicator_bytes;
    spec_drafts += ev.scheduler.spec_decoding.num_drafts;
    spec_draft_tokens += ev.scheduler.spec_decoding.num_draft_tokens;
    spec_accepted_tokens += ev.scheduler.spec_decoding.num_accepted_tokens;
    ttft.insert(ttft.end(), ev.iteration.time_to_first_tokens_s.begin(), ev.iteration.time_to_first_tokens_s.end());
    itl.insert(itl.end(), ev.iteration.inter_token_latencies_s.begin(), ev.iteration.inter_token_latencies_s.end());
    for (const auto& f : ev.iteration.finished_requests) {
      ++finished;
      e2e.push_back(f.e2e_latency_s);
    }
    cv.notify_all();
  }
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

int run_generate(const Options& o) {
  engine::EngineOptions eo;
  if (Status s = apply_load_format(o.load, o.model, &eo.config.model); !s.ok()) return fail(s.message());
  if (Status s = apply_policy_options(o.policy, &eo.config); !s.ok()) return fail(s.message());
  if (Status s = apply_speculative_options(o.speculative_config, &eo.config); !s.ok()) return fail(s.message());
  if (Status s = check_quantization_option(o.quantization); !s.ok()) return fail(s.message());
  const std::string model = o.load.dummy() ? "" : o.model.empty() ? default_model_path() : o.model;
  if (!o.load.dummy() && !std::filesystem::exists(model)) {
    if (o.model.empty())
      return fail("the default model " + model + " is missing; run scripts/fetch-model.sh to download it");
    return fail("model file not found: " + model);
  }
  std::vector<std::string> prompts;
  if (!o.prompts_file.empty()) {
    if (!o.prompt.empty()) return fail("give either -p/--prompt or --prompts-file, not both");
    std::ifstream in(o.prompts_file);
    if (!in) return fail("cannot read prompts file: " + o.prompts_file);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) prompts.push_back(line);
    }
    if (prompts.empty()) return fail("the prompts file has no prompts: " + o.prompts_file);
  } else {
    if (o.prompt.empty()) return fail("a prompt is required: -p PROMPT or --prompts-file FILE");
    prompts.push_back(o.prompt);
  }
  if (o.placement.threads < 0) return fail("--threads must be >= 0");

  eo.config.model.model_path = model;
  eo.config.model.generation_config = o.generation_config;
  eo.config.model.quantization = o.quantization;
  eo.config.scheduler.max_num_seqs = std::max<int>(o.max_num_seqs, 1);
  if (o.seed) eo.config.model.seed = *o.seed;
  if (!o.chat_template.empty()) eo.config.extra["chat_template"] = o.chat_template;
  eo.stat_log_interval_s = 0;  // one-shot runs report through --stats instead
  eo.config.model.runner = o.runner;
  apply_placement(o.placement, &eo.config);
  if (Status s = parse_nodes(o.placement.nodes, &eo.nodes); !s.ok()) return fail(s.message());
  if (Status s = read_optional_secret(o.placement.secret_file, &eo.node_secret); !s.ok()) return fail(s.message());
  if (auto tls = net::TlsContext::load(o.placement.tls); !tls.ok()) return fail(tls.status().message());
  eo.tls_cert_file = o.placement.tls.cert;
  eo.tls_key_file = o.placement.tls.key;
  eo.tls_ca_file = o.placement.tls.ca;
  auto started = engine::Engine::start(std::move(eo));
  if (!started.ok()) return fail(started.status().to_string());
  auto& eng = **started;
  // The model's generation_config.json defaults fill what the command line leaves unset.
  const GenerationDefaults& d = eng.config().model.generation_defaults;
  auto pick = [](auto flag, auto from_model, auto fallback) {
    using T = decltype(fallback);
    return flag ? static_cast<T>(*flag) : from_model ? static_cast<T>(*from_model) : fallback;
  };
  sampling::SamplingParams params;
  params.temperature = pick(o.temperature, d.temperature, 0.0f);
  params.top_p = pick(o.top_p, d.top_p, 1.0f);
  params.top_k = pick(o.top_k, d.top_k, 0);
  params.min_p = pick(o.min_p, d.min_p, 0.0f);
  params.repetition_penalty = pick(o.repetition_penalty, d.repetition_penalty, 1.0f);
  params.seed = o.seed;
  params.max_tokens = pick(o.max_tokens, d.max_tokens, 128);
  params.extra_args = o.vllm_xargs;
  if (Status s = params.validate(); !s.ok()) return fail(s.message());
  if (!d.origin.empty() && !d.empty())
    TROUPE_LOG_INFO("sampling defaults from {}: temperature {}, top_p {}, top_k {}, min_p {}, repetition_penalty {}, "
                    "max_tokens {}", d.origin, params.temperature, params.top_p, params.top_k, params.min_p,
                    params.repetition_penalty, params.max_tokens);

  RunStats stats;
  if (o.stats) eng.subscribe_stats([&stats](const engine::StatsEvent& ev) { stats.add(ev); });

  // Every prompt goes to the engine at once; outputs are printed in input order.
  std::vector<engine::FinalOutput> outputs(prompts.size());
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto req = make_request(eng, o, prompts[i], params);
    if (req.ok()) {
      auto id = eng.submit(std::move(*req), [&, i](engine::RequestOutput out) {
        std::lock_guard lock(mu);
        engine::accumulate(outputs[i], out);
        if (out.finished) {
          ++done;
          cv.notify_all();
        }
      });
      if (id.ok()) continue;
      req = id.status();
    }
    std::lock_guard lock(mu);
    outputs[i].finished = true;
    outputs[i].finish_reason = FinishReason::error;
    outputs[i].error = req.status();
    ++done;
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done == prompts.size(); });
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  bool any_error = false;
  for (const auto& out : outputs) any_error |= out.finish_reason == FinishReason::error;
  if (o.prompts_file.empty()) {
    const auto& out = outputs.front();
    if (out.finish_reason == FinishReason::error) return fail(out.error.to_string());
    std::cout << (o.json || !out.embedding.empty() ? dump(output_json(out)) : out.text) << std::endl;
  } else {
    for (const auto& out : outputs) std::cout << dump(output_json(out)) << "\n";
  }
  if (o.stats) {
    // The stat logger may still be handling the last step's event: wait (bounded)
    // until every request that ended in the engine is counted.
    std::unique_lock lock(stats.mu);
    size_t ended_in_engine = 0;
    for (const auto& out : outputs) ended_in_engine += out.finish_reason != FinishReason::error || out.error.ok();
    stats.cv.wait_for(lock, std::chrono::seconds(5),
                      [&] { return stats.finished >= static_cast<int64_t>(ended_in_engine); });
    nlohmann::json j = {{"num_prompts", prompts.size()},
                        {"finished_requests", stats.finished},
                        {"steps", stats.steps},
                        {"max_running_requests", eng.max_running_requests()},
                        {"prompt_tokens", stats.prompt_tokens},
                        {"generation_tokens", stats.generation_tokens},
                        {"preemptions", stats.preemptions},
                        {"prefix_cache_queries", stats.prefix_queries},
                        {"prefix_cache_hits", stats.prefix_hits},
                        {"max_kv_cache_usage", stats.max_kv_usage},
                        {"wall_seconds", wall},
                        {"model_seconds", stats.model_seconds},
                        {"communicator_seconds", stats.communicator_seconds},
                        {"communicator_bytes", stats.communicator_bytes},
                        {"spec_decode_num_drafts", stats.spec_drafts},
                        {"spec_decode_num_draft_tokens", stats.spec_draft_tokens},
                        {"spec_decode_num_accepted_tokens", stats.spec_accepted_tokens},
                        {"generation_throughput", wall > 0 ? static_cast<double>(stats.generation_tokens) / wall : 0.0},
                        {"mean_ttft_ms", 1000 * mean(stats.ttft)},
                        {"mean_itl_ms", 1000 * mean(stats.itl)},
                        {"mean_e2e_latency_ms", 1000 * mean(stats.e2e)}};
    std::cout << dump(j) << std::endl;
  }
  return any_error ? 1 : 0;
}

const CommandRegistration kRegistration(
    "generate", "Generate text from a prompt with a local model (greedy by default)", [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.add_option("model", o->model,
                     std::string("GGUF model file or Hugging Face model folder (default: $TROUPE_MODEL_CACHE/") +
                         kDefaultModelName + "; none with --load-format dummy)");
      add_load_format_options(sub, &o->load);
      add_policy_options(sub, &o->policy);
      add_speculative_options(sub, &o->speculative_config);
      sub.add_option("--vllm-xargs", o->vllm_xargs,
                     "Arguments for the logits processors of every prompt, as a JSON object (the request body's "
                     "'vllm_xargs'), e.g. '{\"banned_words\": [\"dragon\"]}'");
      sub.add_option("--runner", o->runner,
                     "generate or pooling (prints each prompt's embedding as JSON); default: from the model");
      sub.add_option("--quantization,-q", o->quantization, kQuantizationHelp);
      sub.add_option("-p,--prompt", o->prompt, "Prompt text");
      sub.add_option("-n,--max-tokens", o->max_tokens,
                     "Tokens to generate at most (default: generation_config.json's max_new_tokens, else 128)");
      sub.add_option("--temperature", o->temperature,
                     "Sampling temperature; 0 = greedy (default: generation_config.json's, else greedy)");
      sub.add_option("--repetition-penalty", o->repetition_penalty,
                     "Repetition penalty (default: generation_config.json's, else 1)");
      sub.add_option("--generation-config", o->generation_config,
                     "auto (default): a model folder's generation_config.json gives the sampling defaults; vllm: "
                     "ignore it; a folder: its generation_config.json");
      sub.add_option("--top-p", o->top_p, "Nucleus sampling mass in (0, 1]");
      sub.add_option("--top-k", o->top_k, "Sample among the k best tokens; 0 = all");
      sub.add_option("--min-p", o->min_p, "Drop tokens below min_p times the best probability");
      sub.add_option_function<uint64_t>("--seed", [o](const uint64_t& s) { o->seed = s; }, "Random seed (sampling; dummy weights)");
      sub.add_flag("--chat", o->chat, "Wrap the prompt in the model's chat template");
      sub.add_option("--chat-template", o->chat_template, "Chat template: a Jinja file or string, or a built-in name (implies --chat)");
      sub.add_option("--system", o->system, "System message for --chat");
      sub.add_flag("--json", o->json, "Print one JSON object with token ids, text and finish reason");
      sub.add_option("--prompts-file", o->prompts_file,
                     "One prompt per line; all run through the engine concurrently, one JSON line each");
      sub.add_flag("--stats", o->stats, "Print the run's final stats as one JSON object at the end");
      sub.add_option("--max-num-seqs", o->max_num_seqs, "Requests that may run in one step (default 256)");
      add_placement_options(sub, &o->placement);
      return [o]() {
        if (!o->chat_template.empty()) o->chat = true;
        return run_generate(*o);
      };
    });

}  // namespace
}  // namespace troupe::apps
