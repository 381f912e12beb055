// Speculative decoding's speed-up: greedy single-stream generation of the same prompts
// with and without --speculative-config, alternating in one process on one model, on a
// repetitive workload (repeat or edit a given text: the n-gram drafter finds the text in
// the prompt) and a non-repetitive one (open questions). Prints tokens/s of both, their
// ratio, the acceptance rate, and whether the greedy outputs agree (they must).
//
//   troupe_bench_spec_decode [MODEL.gguf] [--speculative-config JSON] [--repeats 2] [--max-tokens 96]
//
// Prompts are wrapped in ChatML (SmolLM2-Instruct's template); --raw leaves them as is.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "plugin_host/plugin_host.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "runtime/rank/spec_decode/speculative_config.hpp"
#include "troupe/log.hpp"

namespace {
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kRepetitive = {
    "Repeat the following paragraph exactly, word for word.\n\nThe old lighthouse stood at the end of the rocky "
    "point for more than a hundred years. Every night its keeper climbed the narrow stairs, trimmed the wick and "
    "watched the ships pass safely through the dark channel below.",
    "Correct the spelling mistakes in this text and write the whole corrected text:\n\nOur team will meet on "
    "wensday at the main office to discus the new project plan. Please bring your notes, your laptop and any "
    "questons you have about the budjet for next year.",
    "Rewrite this list in the same order, adding a full stop at the end of each line:\n- buy milk and eggs\n- call "
    "the plumber about the kitchen sink\n- send the report to Maria\n- book the train tickets for Friday\n- water "
    "the plants on the balcony",
};
const std::vector<std::string> kOpen = {
    "Write a short story about a robot who learns to paint.",
    "Explain why the sky is blue to a ten year old.",
    "Give three tips for staying focused while studying.",
};

struct Figures {
  std::vector<double> tps;       // per repeat
  int64_t tokens = 0;            // of the last repeat
  troupe::SpecDecodingStats spec;
  std::vector<std::vector<int32_t>> outputs;
};

double best(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
double worst(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"speculative decoding (n-gram) vs plain greedy decoding, same model, same run"};
  std::string model, spec_json = R"({"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2})";
  std::string json_path;
  int repeats = 2, max_tokens = 96, threads = 0;
  bool raw = false;
  app.add_option("model", model, "GGUF model (default: $TROUPE_TEST_MODEL)");
  app.add_option("--speculative-config", spec_json, "the speculative run's config (vLLM's JSON)");
  app.add_option("--repeats", repeats, "alternations of plain and speculative runs (default 2)");
  app.add_option("--max-tokens", max_tokens, "tokens generated per prompt at most (default 96)");
  app.add_option("--threads", threads, "compute threads (default: all cores)");
  app.add_flag("--raw", raw, "no ChatML wrapping of the prompts");
  app.add_option("--json", json_path, "also write the figures as JSON here");
  CLI11_PARSE(app, argc, argv);
  if (model.empty() && std::getenv("TROUPE_TEST_MODEL")) model = std::getenv("TROUPE_TEST_MODEL");
  if (model.empty()) {
    std::fprintf(stderr, "give a model file (or set TROUPE_TEST_MODEL)\n");
    return 1;
  }
  if (repeats < 1 || max_tokens < 1) {
    std::fprintf(stderr, "--repeats and --max-tokens must be >= 1\n");
    return 2;
  }
  auto spec = troupe::spec_decode::parse_speculative_config(spec_json);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().to_string().c_str());
    return 2;
  }
  troupe::log::set_level(troupe::log::Level::warning);
  auto& host = troupe::plugin_host::PluginHost::instance();
  host.load_all();
  auto platform = host.activate_platform();
  if (!platform.ok()) {
    std::fprintf(stderr, "%s\n", platform.status().to_string().c_str());
    return 1;
  }
  auto make = [&](const troupe::SpeculativeConfig& s) {
    troupe::EngineConfig config;
    config.parallel.num_threads = threads;
    config.model.max_model_len = 1024;
    config.cache.enable_prefix_caching = false;  // every repeat computes its prompt again
    config.speculative = s;
    return troupe::generation::OfflineGenerator::create(**platform, config, model);
  };
  auto plain = make(troupe::SpeculativeConfig{});
  auto specd = make(*spec);
  if (!plain.ok() || !specd.ok()) {
    std::fprintf(stderr, "%s\n", (!plain.ok() ? plain.status() : specd.status()).to_string().c_str());
    return 1;
  }
  troupe::sampling::SamplingParams params;
  params.temperature = 0;
  params.max_tokens = max_tokens;

  auto wrap = [&](const std::string& p) {
    return raw ? p : "<|im_start|>user\n" + p + "<|im_end|>\n<|im_start|>assistant\n";
  };
  auto run = [&](troupe::generation::OfflineGenerator& g, const std::vector<std::string>& prompts, Figures& f) -> bool {
    const troupe::SpecDecodingStats before = g.spec_decoding_stats();
    int64_t tokens = 0;
    f.outputs.clear();
    const auto t0 = Clock::now();
    for (const auto& p : prompts) {
      auto out = g.generate_text(wrap(p), params);
      if (!out.ok()) {
        std::fprintf(stderr, "%s\n", out.status().to_string().c_str());
        return false;
      }
      tokens += static_cast<int64_t>(out->token_ids.size());
      f.outputs.push_back(out->token_ids);
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    f.tps.push_back(static_cast<double>(tokens) / s);
    f.tokens = tokens;
    const auto& after = g.spec_decoding_stats();
    f.spec.num_drafts += after.num_drafts - before.num_drafts;
    f.spec.num_draft_tokens += after.num_draft_tokens - before.num_draft_tokens;
    f.spec.num_accepted_tokens += after.num_accepted_tokens - before.num_accepted_tokens;
    return true;
  };

  std::printf("model %s, speculative config %s, %d repeat(s), greedy, %d tokens at most per prompt\n", model.c_str(),
              troupe::spec_decode::describe(*spec).c_str(), repeats, max_tokens);
  std::printf("| workload | plain tok/s (worst..best) | speculative tok/s (worst..best) | speed-up (best/best) | "
              "acceptance rate | mean acceptance length | outputs equal |\n|---|---|---|---|---|---|---|\n");
  nlohmann::json report = nlohmann::json::array();
  for (const auto& [name, prompts] : {std::pair{"repetitive", kRepetitive}, std::pair{"non-repetitive", kOpen}}) {
    Figures p, s;
    // Untimed warm-up of both (pages the weights in), then alternate.
    Figures warm;
    if (!run(**plain, {prompts[0]}, warm) || !run(**specd, {prompts[0]}, warm)) return 1;
    for (int r = 0; r < repeats; ++r) {
      if (!run(**plain, prompts, p) || !run(**specd, prompts, s)) return 1;
    }
    const bool equal = p.outputs == s.outputs;
    const double rate = s.spec.num_draft_tokens > 0
                            ? static_cast<double>(s.spec.num_accepted_tokens) / static_cast<double>(s.spec.num_draft_tokens)
                            : 0.0;
    const double mean_len = s.spec.num_drafts > 0 ? 1.0 + static_cast<double>(s.spec.num_accepted_tokens) /
                                                              static_cast<double>(s.spec.num_drafts)
                                                  : 0.0;
    std::printf("| %s | %.2f (%.2f..%.2f) | %.2f (%.2f..%.2f) | %.2fx | %.1f%% | %.2f | %s |\n", name,
                best(p.tps), worst(p.tps), best(p.tps), best(s.tps), worst(s.tps), best(s.tps),
                best(s.tps) / best(p.tps), 100.0 * rate, mean_len, equal ? "yes" : "NO");
    report.push_back({{"workload", name},
                      {"plain_tps", p.tps},
                      {"spec_tps", s.tps},
                      {"tokens_per_repeat", p.tokens},
                      {"num_drafts", s.spec.num_drafts},
                      {"num_draft_tokens", s.spec.num_draft_tokens},
                      {"num_accepted_tokens", s.spec.num_accepted_tokens},
                      {"outputs_equal", equal}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << report.dump(2) << "\n";
  return 0;
}
