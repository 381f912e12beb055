#include "runtime/model_files/dummy/model_shapes.hpp"

#include <algorithm>

namespace troupe::dummy {
namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// The mixture-of-experts shapes from their published configs (config.json).
template <class Make>
void add_moe_shapes(std::vector<ModelShape>& v, Make llama) {
  // name, source, n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx, rope_theta, rms_eps, tied
  v.push_back(llama("olmoe-1b-7b", "allenai/OLMoE-1B-7B-0924's config.json (64 experts, top 8, q/k norms)", 2048, 16,
                    16, 16, 1024, 50304, 4096, 10000.0f, 1e-5f, false));
  v.back().arch = "olmoe";
  v.back().n_expert = 64, v.back().n_expert_used = 8;
  v.back().qk_norm = true;
  v.push_back(llama("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B's config.json (128 experts of 768, top 8, head_dim 128)", 2048,
                    48, 32, 4, 6144, 151936, 40960, 1000000.0f, 1e-6f, false));
  v.back().arch = "qwen3moe";
  v.back().key_length = 128;
  v.back().qk_norm = true;
  v.back().n_expert = 128, v.back().n_expert_used = 8, v.back().n_ff_exp = 768;
  v.push_back(llama("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1's config.json (8 experts, top 2)", 4096, 32, 32, 8,
                    14336, 32000, 32768, 1000000.0f, 1e-5f, false));
  v.back().n_expert = 8, v.back().n_expert_used = 2;
  v.push_back(llama("gpt-oss-20b", "openai/gpt-oss-20b's config.json (32 experts, top 4, sinks, 128-token windows, YaRN)",
                    2880, 24, 64, 8, 2880, 201088, 131072, 150000.0f, 1e-5f, false));
  v.back().arch = "gpt-oss";
  v.back().key_length = 64;
  v.back().qkv_bias = true;
  v.back().sliding_window = 128;
  v.back().n_expert = 32, v.back().n_expert_used = 4, v.back().n_ff_exp = 2880;
  v.back().yarn_factor = 32.0f, v.back().yarn_original_context = 4096;
}

// Their small variants (tests: f32 files of a few MiB), with windows of 4 tokens.
template <class Tiny>
void add_tiny_moe_shapes(std::vector<ModelShape>& v, Tiny tiny) {
  // 8 heads over 4 kv heads: tensor and expert parallel over 2 and 4 ranks.
  tiny("tiny-qwen3moe", "qwen3moe", "tiny with qwen3moe's 16 experts of 128, top 4, normalized, head_dim 128");
  v.back().n_head = 8, v.back().n_head_kv = 4, v.back().key_length = 128, v.back().qk_norm = true, v.back().tied_embeddings = false, v.back().n_ff = 512;
  v.back().n_expert = 16, v.back().n_expert_used = 4, v.back().n_ff_exp = 128;
  tiny("tiny-olmoe", "olmoe", "tiny with olmoe's whole-projection q/k norms, 16 experts of 128, top 4");
  v.back().n_head_kv = 4, v.back().qk_norm = true, v.back().tied_embeddings = false, v.back().n_ff = 128;
  v.back().n_expert = 16, v.back().n_expert_used = 4;
  tiny("tiny-mixtral", "llama", "tiny Mixtral: llama with 8 experts of 256, top 2");
  v.back().n_head = 8, v.back().n_head_kv = 4, v.back().tied_embeddings = false, v.back().n_ff = 256, v.back().n_expert = 8, v.back().n_expert_used = 2;
  tiny("tiny-gpt-oss", "gpt-oss", "tiny with gpt-oss's biases, sinks, 4-token windows on even layers, YaRN x32 from 64, "
       "8 experts of 128, top 4, hidden 192 beside 8 heads of 64");
  v.back().n_embd = 192, v.back().n_head = 8, v.back().n_head_kv = 4, v.back().key_length = 64, v.back().qkv_bias = true, v.back().tied_embeddings = false;
  v.back().sliding_window = 4, v.back().rope_theta = 150000.0f, v.back().n_ff = 128;
  v.back().n_expert = 8, v.back().n_expert_used = 4, v.back().n_ff_exp = 128;
  v.back().yarn_factor = 32.0f, v.back().yarn_original_context = 64;
}

}  // namespace

const std::vector<ModelShape>& model_shapes() {
  auto llama = [](std::string name, std::string source, int64_t n_embd, int n_layer, int n_head, int n_head_kv,
                  int64_t n_ff, int64_t n_vocab, int64_t n_ctx, float theta, float eps, bool tied) {
    ModelShape s;
    s.name = std::move(name);
    s.source = std::move(source);
    s.n_embd = n_embd;
    s.n_layer = n_layer;
    s.n_head = n_head;
    s.n_head_kv = n_head_kv;
    s.n_ff = n_ff;
    s.n_vocab = n_vocab;
    s.n_ctx = n_ctx;
    s.rope_theta = theta;
    s.rms_eps = eps;
    s.tied_embeddings = tied;
    return s;
  };
  static const std::vector<ModelShape> kShapes = [&] {
    std::vector<ModelShape> v;
    // name, source, n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx, rope_theta, rms_eps, tied
    v.push_back(llama("llama-3.2-1b", "Llama-3.2-1B's config.json (llama3 rope scaling: rope_freqs)", 2048, 16, 32, 8,
                      8192, 128256, 131072, 500000.0f, 1e-5f, true));
    v.back().llama3_rope = {32.0f, 1.0f, 4.0f, 8192};
    v.push_back(llama("llama-3.2-3b", "Llama-3.2-3B's config.json (llama3 rope scaling: rope_freqs)", 3072, 28, 24, 8,
                      8192, 128256, 131072, 500000.0f, 1e-5f, true));
    v.back().llama3_rope = {32.0f, 1.0f, 4.0f, 8192};
    v.push_back(llama("llama-3.1-8b", "Llama-3.1-8B's config.json (llama3 rope scaling: rope_freqs)", 4096, 32, 32, 8,
                      14336, 128256, 131072, 500000.0f, 1e-5f, false));
    v.back().llama3_rope = {8.0f, 1.0f, 4.0f, 8192};
    v.push_back(llama("smollm2-135m", "the metadata of SmolLM2-135M-Instruct.Q4_1.gguf", 576, 30, 9, 3, 1536, 49152,
                      8192, 100000.0f, 1e-5f, true));
    v.push_back(llama("stories260k", "the metadata of tests/data/stories260K.gguf", 64, 5, 8, 4, 172, 512, 2048,
                      10000.0f, 1e-5f, false));
    v.push_back(llama("tiny", "troupe's own test shape: every row a whole number of 256-element blocks", 256, 2, 4, 2,
                      512, 512, 2048, 10000.0f, 1e-5f, true));
    v.push_back(llama("qwen2.5-0.5b", "Qwen2.5-0.5B-Instruct's config.json (q/k/v biases)", 896, 24, 14, 2, 4864,
                      151936, 32768, 1000000.0f, 1e-6f, true));
    v.back().arch = "qwen2";
    v.back().qkv_bias = true;
    v.push_back(llama("qwen3-0.6b", "Qwen3-0.6B's config.json (head_dim 128, q/k norms)", 1024, 28, 16, 8, 3072, 151936,
                      40960, 1000000.0f, 1e-6f, true));
    v.back().arch = "qwen3";
    v.back().key_length = 128;
    v.back().qk_norm = true;
    v.push_back(llama("phi3-mini", "Phi-3-mini-4k-instruct's config.json (fused qkv and gate/up)", 3072, 32, 32, 32,
                      8192, 32064, 4096, 10000.0f, 1e-5f, false));
    v.back().arch = "phi3";
    v.back().fused_qkv = true;
    v.back().fused_gate_up = true;
    v.back().sliding_window = 2047;
    v.back().rope_original_context = 4096;
    // Phi-3.5-mini: Phi-3-mini's block with the long-context RoPE of a 128k context trained
    // from 4k (rope_factors_long/short; llama.cpp runs the long set when its context exceeds 4096).
    v.push_back(llama("phi3.5-mini", "Phi-3.5-mini-instruct's config.json (longrope: 128k context from 4k)", 3072, 32,
                      32, 32, 8192, 32064, 131072, 10000.0f, 1e-5f, false));
    v.back().arch = "phi3";
    v.back().fused_qkv = true;
    v.back().fused_gate_up = true;
    v.back().sliding_window = 262144;
    v.back().rope_original_context = 4096;
    v.back().longrope = true;
    // Mistral 7B v0.1: Llama's block under `llama`, every layer windowed to 4096 keys
    // (llama.cpp's converter does not write the window; troupe applies it when a file has it).
    v.push_back(llama("mistral-7b-v0.1", "Mistral-7B-v0.1's config.json (sliding_window 4096 on every layer)", 4096,
                      32, 32, 8, 14336, 32000, 32768, 10000.0f, 1e-5f, false));
    v.back().sliding_window = 4096;
    v.push_back(llama("gemma2-2b", "gemma-2-2b's config.json (soft-capping, a 4096 window on even layers)", 2304, 26,
                      8, 4, 9216, 256000, 8192, 10000.0f, 1e-6f, true));
    v.back().arch = "gemma2";
    v.back().key_length = 256;
    v.back().sliding_window = 4096;
    v.back().attn_softcap = 50.0f;
    v.back().final_softcap = 30.0f;
    v.back().rope_theta_key = false;
    v.push_back(llama("gemma3-270m", "the metadata of gemma-3-270m-q4_k_m.gguf (q/k norms, 5 of 6 layers windowed to 512)",
                      640, 18, 4, 1, 2048, 262144, 32768, 1000000.0f, 1e-6f, true));
    v.back().arch = "gemma3";
    v.back().key_length = 256;
    v.back().qk_norm = true;
    v.back().sliding_window = 512;
    // GPT-2 124M (openai-community/gpt2): a model troupe runs only through the example plugin
    // examples/gpt2_model. Its 50257 tokens are the 256 bytes, 50000 merges and <|endoftext|>.
    v.push_back(llama("gpt2", "openai-community/gpt2's config.json (learned positions, layer norms, biases)", 768, 12,
                      12, 12, 3072, 50257, 1024, 10000.0f, 1e-5f, true));
    v.back().arch = "gpt2";
    add_moe_shapes(v, llama);
    // troupe's own small shapes of every family (tests of the Hugging Face folder path: f32
    // files of a few MiB); windows of 4 tokens so that short prompts reach past them.
    auto tiny = [&](std::string name, std::string arch, std::string what) {
      v.push_back(llama(std::move(name), "troupe's own test shape: " + std::move(what), 256, 2, 4, 2, 512, 512, 2048,
                        10000.0f, 1e-5f, true));
      v.back().arch = std::move(arch);
      return &v.back();
    };
    tiny("tiny-llama3", "llama", "tiny with Llama 3's rope scaling (rope_freqs), untied")->llama3_rope = {8.0f, 1.0f, 4.0f, 64};
    v.back().tied_embeddings = false;
    v.back().rope_theta = 500000.0f;
    tiny("tiny-qwen2", "qwen2", "tiny with qwen2's q/k/v biases")->qkv_bias = true;
    v.back().rope_theta = 1000000.0f;
    v.back().rms_eps = 1e-6f;
    tiny("tiny-qwen3", "qwen3", "tiny with qwen3's q/k norms and head_dim 128")->qk_norm = true;
    v.back().key_length = 128;
    tiny("tiny-phi3", "phi3", "tiny with phi3's fused qkv and gate/up, untied")->fused_qkv = true;
    v.back().fused_gate_up = true;
    v.back().tied_embeddings = false;
    v.back().n_head_kv = 4;
    v.back().sliding_window = 2047;
    v.back().rope_original_context = 2048;
    tiny("tiny-phi3.5", "phi3", "tiny with phi3's long-context RoPE (original context 32 of 2048)")->fused_qkv = true;
    v.back().fused_gate_up = true;
    v.back().tied_embeddings = false;
    v.back().n_head_kv = 4;
    v.back().rope_original_context = 32;
    v.back().longrope = true;
    tiny("tiny-gemma2", "gemma2", "tiny with gemma2's post-norms, soft-caps and alternating 4-token windows");
    v.back().sliding_window = 4;
    v.back().attn_softcap = 50.0f;
    v.back().final_softcap = 30.0f;
    v.back().rms_eps = 1e-6f;
    tiny("tiny-gemma3", "gemma3", "tiny with gemma3's q/k norms, local rope base and 4-token windows (pattern 2)");
    v.back().qk_norm = true;
    v.back().key_length = 128;
    v.back().sliding_window = 4;
    v.back().sliding_window_pattern = 2;
    v.back().rope_theta = 1000000.0f;
    v.back().rope_theta_swa = 10000.0f;
    v.back().rms_eps = 1e-6f;
    add_tiny_moe_shapes(v, tiny);
    return v;
  }();
  return kShapes;
}

Result<ModelShape> find_model_shape(std::string_view name) {
  std::vector<std::string> names;
  for (const ModelShape& s : model_shapes()) {
    if (s.name == name) return s;
    names.push_back(s.name);
  }
  if (name.empty()) return invalid_argument("the dummy load format needs a model shape (one of: " + joined(names) + ")");
  return invalid_argument("unknown model shape '" + std::string(name) + "' (valid: " + joined(names) + ")");
}

const std::vector<DType>& dummy_weight_types() {
  static const std::vector<DType> kTypes = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0, DType::q4_0,
                                            DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_k, DType::q3_k,
                                            DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_nl, DType::iq4_xs,
                                            kMxfp4};
  return kTypes;
}

Result<DType> parse_weight_type(std::string_view name) {
  std::vector<std::string> names;
  for (DType t : dummy_weight_types()) {
    if (to_string(t) == name) return t;
    names.emplace_back(to_string(t));
  }
  return invalid_argument("unknown weight type '" + std::string(name) + "' (valid: " + joined(names) + ")");
}

DType matrix_type(DType type, bool expert) {
  if (type != kMxfp4) return type;
  return expert ? kMxfp4 : DType::q8_0;
}

namespace {

// The row lengths of `shape` that are not whole blocks of `type` (and its mix's other type).
std::vector<std::string> misfits(const ModelShape& shape, DType type) {
  const int64_t block = std::max(traits(matrix_type(type, false)).block_elems, traits(matrix_type(type, true)).block_elems);
  const std::pair<int64_t, const char*> rows[] = {{shape.n_embd, "hidden size"},
                                                  {shape.moe() ? shape.expert_ff() : shape.n_ff, "feed-forward size"},
                                                  {shape.head_dim() * shape.n_head, "attention size"}};
  std::vector<std::string> bad;
  for (const auto& [n, what] : rows)
    if (n % block != 0) bad.push_back(std::to_string(n) + " (" + what + ")");
  return bad;
}

}  // namespace

Status check_shape_fits(const ModelShape& shape, DType type) {
  const int64_t block = traits(type).block_elems;
  const std::vector<std::string> bad = misfits(shape, type);
  if (bad.empty()) return {};
  std::vector<std::string> fit;
  for (DType t : dummy_weight_types())
    if (misfits(shape, t).empty()) fit.emplace_back(to_string(t));
  return invalid_argument("weight type " + std::string(to_string(type)) + " stores rows in blocks of " +
                          std::to_string(block) + " elements; shape " + shape.name + " has rows of " + joined(bad) +
                          "; types that fit it: " + joined(fit));
}

}  // namespace troupe::dummy
