// `troupe make-lora BASE.gguf -o ADAPTER.gguf [--rank R] [--alpha A] [--seed N]
// [--targets attn_q,...] [--merged-output MERGED.gguf]`: writes a random LoRA
// adapter for a llama-family GGUF model in llama.cpp's adapter format, and
// optionally the base model with that adapter merged into its f32 weights
// (W + alpha/rank * B A), so serving the adapter can be checked against a plain model.
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "apps/command.hpp"
#include "runtime/rank/lora/lora_writer.hpp"

namespace troupe::apps {
namespace {

struct Options {
  std::string base;
  std::string output;
  std::string merged;
  std::string targets;
  lora::RandomLoraOptions lora;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "troupe make-lora: error: %s\n", message.c_str());
  return 1;
}

int run(Options o) {
  if (o.output.empty()) return fail("-o/--output FILE is required");
  std::stringstream list(o.targets);
  for (std::string kind; std::getline(list, kind, ',');)
    if (!kind.empty()) o.lora.kinds.push_back(kind);
  o.lora.mergeable = !o.merged.empty();  // refused before the adapter is written, not after
  auto n = lora::write_random_lora(o.base, o.lora, o.output);
  if (!n.ok()) return fail(n.status().message());
  std::printf("wrote %s: %lld adapted tensors, rank %lld, alpha %g, seed %llu\n", o.output.c_str(),
              static_cast<long long>(*n), static_cast<long long>(o.lora.rank), static_cast<double>(o.lora.alpha),
              static_cast<unsigned long long>(o.lora.seed));
  if (!o.merged.empty()) {
    if (Status s = lora::write_merged_model(o.base, o.output, o.merged); !s.ok()) return fail(s.message());
    std::printf("wrote %s: %s with the adapter merged into its weights\n", o.merged.c_str(), o.base.c_str());
  }
  return 0;
}

const CommandRegistration kRegistration(
    "make-lora", "Write a random LoRA adapter (GGUF) for a model, and optionally the model with it merged in",
    [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.add_option("base", o->base, "The base model (GGUF)")->required();
      sub.add_option("-o,--output", o->output, "Adapter file to write");
      sub.add_option("--merged-output", o->merged, "Also write the base model with the adapter merged in");
      sub.add_option("--rank", o->lora.rank, "Rank (default 8)");
      sub.add_option("--alpha", o->lora.alpha, "adapter.lora.alpha (default 16; scale = alpha / rank)");
      sub.add_option("--seed", o->lora.seed, "Seed of the random values (default 1)");
      sub.add_option("--stddev", o->lora.stddev, "Standard deviation of A's and B's elements (default 0.05)");
      sub.add_option("--targets", o->targets,
                     "Comma list of tensor kinds to adapt (default attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,"
                     "ffn_down)");
      return [o]() { return run(*o); };
    });

}  // namespace
}  // namespace troupe::apps
