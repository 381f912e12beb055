// `troupe make-gguf --model-shape NAME [--weight-type T] [--seed N] [--layers N] -o FILE`:
// writes the dummy load format's random-weights model as a GGUF file that
// troupe and llama.cpp load (for side-by-side benchmarks without downloads).
// The file holds the same bytes `--load-format dummy` builds in memory, so
// both give the same logits. `--list` prints the shapes. `--hf-folder DIR`
// also writes the same weights as a Hugging Face folder (config.json,
// safetensors, optionally `--shards N`, generation_config.json), with Q/K rows
// and norms as HF stores them: the folder path is held to the GGUF with it.
// `--from-gguf FILE --hf-folder DIR` writes a real model's f32/f16/bf16 GGUF
// (e.g. llama-quantize's F32 copy of a quantized file) as a folder instead,
// checked against the named shape, so a folder with meaningful output can be served.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "apps/command.hpp"
#include "apps/load_format_options.hpp"
#include "runtime/model_files/dummy/dummy_model.hpp"
#include "runtime/model_files/hf/hf_folder_writer.hpp"

namespace troupe::apps {
namespace {

struct Options {
  LoadFormatOptions load;
  uint64_t seed = 0;
  int layers = 0;
  std::string output;
  std::string hf_folder;
  std::string from_gguf;
  std::string hf_architecture;
  int shards = 1;
  std::string generation_config;  // JSON object merged into generation_config.json
  bool list = false;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "troupe make-gguf: error: %s\n", message.c_str());
  return 1;
}

int list_shapes() {
  std::printf("%-14s %-6s %7s %6s %6s %8s %7s %8s %9s %10s %5s  %s\n", "shape", "arch", "hidden", "layers", "heads",
              "kv_heads", "ffn", "vocab", "context", "rope_theta", "tied", "source");
  for (const auto& s : dummy::model_shapes())
    std::printf("%-14s %-6s %7lld %6d %6d %8d %7lld %8lld %9lld %10.0f %5s  %s\n", s.name.c_str(), s.arch.c_str(),
                static_cast<long long>(s.n_embd), s.n_layer, s.n_head, s.n_head_kv, static_cast<long long>(s.n_ff),
                static_cast<long long>(s.n_vocab), static_cast<long long>(s.n_ctx), s.rope_theta,
                s.tied_embeddings ? "yes" : "no", s.source.c_str());
  std::printf("weight types: %s\n", weight_type_names().c_str());
  return 0;
}

// The GGUF's hyperparameters must be the shape's: the folder's config.json comes from the shape.
Status check_file_is_shape(const gguf::GgufFile& file, const dummy::ModelShape& s) {
  const std::string arch = file.get_string("general.architecture").value_or("");
  if (arch != s.arch) return invalid_argument("its architecture '" + arch + "' is not the shape's '" + s.arch + "'");
  const std::pair<const char*, int64_t> keys[] = {
      {"block_count", s.n_layer},         {"embedding_length", s.n_embd},       {"feed_forward_length", s.n_ff},
      {"attention.head_count", s.n_head}, {"attention.head_count_kv", s.n_head_kv}};
  for (const auto& [key, want] : keys) {
    const auto got = file.get_int(arch + "." + key);
    if (got != want)
      return invalid_argument(arch + "." + key + " is " + (got ? std::to_string(*got) : std::string("missing")) +
                              ", the shape's is " + std::to_string(want));
  }
  const auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (!tokens || static_cast<int64_t>(tokens->size()) != s.n_vocab)
    return invalid_argument("its vocabulary is not the shape's " + std::to_string(s.n_vocab) + " tokens");
  return {};
}

int from_gguf(const Options& o) {
  if (o.hf_folder.empty()) return fail("--from-gguf writes a Hugging Face folder: --hf-folder DIR is required");
  if (!o.output.empty()) return fail("--from-gguf takes no -o (the GGUF is the input)");
  auto shape = dummy::find_model_shape(o.load.model_shape);
  if (!shape) return fail(shape.status().message());
  auto file = gguf::GgufFile::open(o.from_gguf);
  if (!file) return fail(file.status().message());
  if (Status s = check_file_is_shape(**file, *shape); !s.ok())
    return fail(o.from_gguf + " is not shape " + shape->name + ": " + s.message());
  hf::HfFolderOptions ho;
  ho.shards = o.shards;
  ho.architecture = o.hf_architecture;
  if (!o.generation_config.empty()) {
    ho.generation_config = nlohmann::json::parse(o.generation_config, nullptr, false);
    if (!ho.generation_config.is_object()) return fail("--generation-config-json is not a JSON object");
  }
  if (Status s = hf::write_hf_folder(*shape, **file, o.hf_folder, ho); !s.ok()) return fail(o.from_gguf + ": " + s.message());
  std::printf("wrote %s: %s (shape %s) as a Hugging Face folder, %d shard(s)\n", o.hf_folder.c_str(),
              o.from_gguf.c_str(), shape->name.c_str(), o.shards);
  return 0;
}

int run(const Options& o) {
  if (o.list) return list_shapes();
  if (o.load.model_shape.empty()) return fail("--model-shape is required (one of: " + model_shape_names() + ")");
  if (!o.from_gguf.empty()) return from_gguf(o);
  if (o.output.empty() && o.hf_folder.empty()) return fail("-o/--output FILE or --hf-folder DIR is required");
  auto spec = dummy::make_dummy_spec(o.load.model_shape, o.load.weight_type, o.seed, o.layers);
  if (!spec) return fail(spec.status().message());
  auto builder = dummy::dummy_gguf(*spec);
  if (!builder) return fail(builder.status().message());
  if (!o.hf_folder.empty()) {
    hf::HfFolderOptions ho;
    ho.shards = o.shards;
    ho.architecture = o.hf_architecture;
    if (!o.generation_config.empty()) {
      ho.generation_config = nlohmann::json::parse(o.generation_config, nullptr, false);
      if (!ho.generation_config.is_object()) return fail("--generation-config-json is not a JSON object");
    }
    auto image = builder->build_in_memory();
    if (!image) return fail(image.status().message());
    if (Status s = hf::write_hf_folder(spec->shape, *image->file, o.hf_folder, ho); !s.ok()) return fail(s.message());
    std::printf("wrote %s: shape %s as a Hugging Face folder, %d shard(s)\n", o.hf_folder.c_str(),
                spec->shape.name.c_str(), o.shards);
    if (o.output.empty()) return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (Status s = builder->write_file(o.output); !s.ok()) return fail(s.message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote %s: shape %s, %s weights, seed %llu, %zu tensors, %.1f MiB in %.1f s\n", o.output.c_str(),
              spec->shape.name.c_str(), std::string(to_string(spec->weight_type)).c_str(),
              static_cast<unsigned long long>(spec->seed), builder->num_tensors(),
              static_cast<double>(builder->size()) / (1 << 20), secs);
  return 0;
}

const CommandRegistration kRegistration(
    "make-gguf", "Write a random-weights model of a named shape as a GGUF file (troupe and llama.cpp load it)",
    [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      add_model_shape_options(sub, &o->load);
      sub.add_option("--seed", o->seed, "Seed of the weights (default 0); --load-format dummy --seed N is the same model");
      sub.add_option("--layers", o->layers, "Keep only the first N blocks (small test files; default: all)");
      sub.add_option("-o,--output", o->output, "GGUF file to write");
      sub.add_option("--hf-folder", o->hf_folder,
                     "Also write the same weights as a Hugging Face folder DIR (f32, f16 or bf16 weights)");
      sub.add_option("--from-gguf", o->from_gguf,
                     "With --hf-folder and --model-shape: write this f32/f16/bf16 GGUF of that shape as the folder "
                     "(no random weights)");
      sub.add_option("--shards", o->shards, "With --hf-folder: split the weights into N safetensors shards");
      sub.add_option("--hf-architecture", o->hf_architecture,
                     "With --hf-folder: config.json's architecture (default from the shape; MistralForCausalLM for a "
                     "llama shape)");
      sub.add_option("--generation-config-json", o->generation_config,
                     "With --hf-folder: a JSON object merged into generation_config.json");
      sub.add_flag("--list", o->list, "List the model shapes and weight types");
      return [o]() { return run(*o); };
    });

}  // namespace
}  // namespace troupe::apps
