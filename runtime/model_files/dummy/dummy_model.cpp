#include "runtime/model_files/dummy/dummy_model.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/model_files/dummy/random_weights.hpp"
#include "runtime/model_files/dummy/synthetic_vocab.hpp"
#include "runtime/model_files/gguf/llama3_rope_factors.hpp"
#include "troupe/log.hpp"

namespace troupe::dummy {
namespace {

// llama.cpp's general.file_type (LLAMA_FTYPE_*) of a file whose matrices are all `type`.
uint32_t file_type(DType type) {
  if (type == kMxfp4) return 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE (no enumerator to switch on)
  switch (type) {
    case DType::f32: return 0;
    case DType::f16: return 1;
    case DType::q4_0: return 2;
    case DType::q4_1: return 3;
    case DType::q8_0: return 7;
    case DType::q5_0: return 8;
    case DType::q5_1: return 9;
    case DType::q2_k: return 10;
    case DType::q3_k: return 11;  // Q3_K_S
    case DType::q4_k: return 14;  // Q4_K_S
    case DType::q5_k: return 16;  // Q5_K_S
    case DType::q6_k: return 18;
    case DType::iq4_nl: return 25;
    case DType::iq4_xs: return 30;
    case DType::bf16: return 32;
    default: return 0;
  }
}

// Phi-3's long-context RoPE factors of `pairs` rotary pairs, shaped like Phi-3.5-mini's
// config.json lists (not its values): divisors that grow with the pair index (lower
// frequencies are stretched more), short 1.0 -> 2.7, long 1.08 -> 64.
std::vector<float> longrope_factors(int64_t pairs, bool long_set) {
  std::vector<float> f(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    const double t = pairs > 1 ? static_cast<double>(i) / static_cast<double>(pairs - 1) : 0.0;
    const double smooth = t * t * (3 - 2 * t);
    f[static_cast<size_t>(i)] = static_cast<float>(long_set ? 1.08 * std::exp(std::log(64.0 / 1.08) * smooth)
                                                            : 1.0 + 1.7 * t * t);
  }
  return f;
}

std::string cache_key(const DummyModelSpec& s) {
  return s.shape.name + "/" + std::to_string(s.shape.n_layer) + "/" + std::string(to_string(s.weight_type)) + "/" +
         std::to_string(s.seed);
}

// The hyperparameters of the llama-style families, as their converters write them.
void add_decoder_keys(const ModelShape& s, gguf::GgufBuilder& b) {
  const std::string a = s.arch + ".";  // llama.cpp's per-architecture key prefix
  if (s.arch == "llama") b.set_u32(a + "vocab_size", static_cast<uint32_t>(s.n_vocab));  // only llama's converter
  b.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  b.set_u32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  b.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  b.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  b.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  b.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  if (s.rope_theta_key) b.set_f32(a + "rope.freq_base", s.rope_theta);
  b.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  if (!s.gemma()) b.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(s.head_dim()));  // Gemma's converters omit it
  if (s.key_length > 0 || s.gemma()) {  // Gemma's converters always write the head size
    b.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim()));
    b.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim()));
  }
  if (s.sliding_window > 0) b.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
  if (s.attn_softcap > 0) b.set_f32(a + "attn_logit_softcapping", s.attn_softcap);
  if (s.final_softcap > 0) b.set_f32(a + "final_logit_softcapping", s.final_softcap);
  if (s.rope_original_context > 0)
    b.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(s.rope_original_context));
  if (s.longrope && s.rope_original_context > 0) {
    // llama.cpp's converter (Phi3MiniModel): sqrt(1 + ln(scale) / ln(original)) for scale > 1.
    const double scale = static_cast<double>(s.n_ctx) / static_cast<double>(s.rope_original_context);
    const double attn = scale > 1.0 ? std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(s.rope_original_context)))
                                    : 1.0;
    b.set_f32(a + "rope.scaling.attn_factor", static_cast<float>(attn));
  }
  if (s.sliding_window_pattern > 0)
    b.set_u32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(s.sliding_window_pattern));
  if (s.rope_theta_swa > 0) b.set_f32(a + "rope.freq_base_swa", s.rope_theta_swa);
  if (s.moe()) {
    b.set_u32(a + "expert_count", static_cast<uint32_t>(s.n_expert));
    b.set_u32(a + "expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    if (s.n_ff_exp > 0) b.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_exp));
  }
  if (s.yarn_factor > 0) {  // as llama.cpp's converter writes gpt-oss's rope_scaling
    b.set_string(a + "rope.scaling.type", "yarn");
    b.set_f32(a + "rope.scaling.factor", s.yarn_factor);
    b.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(s.yarn_original_context));
    b.set_f32(a + "rope.scaling.yarn_beta_fast", 32.0f);
    b.set_f32(a + "rope.scaling.yarn_beta_slow", 1.0f);
  }
}

// One block's router and experts (merged 3-D tensors) and, for gpt-oss, their biases.
template <class Matrix, class Bias>
Status add_experts(const ModelShape& s, const std::string& p, Matrix matrix3, Bias bias) {
  const int64_t ff = s.expert_ff(), E = s.n_expert;
  TROUPE_RETURN_IF_ERROR(bias(p + "ffn_gate_inp.weight", s.n_embd, E));  // the router: f32, as llama-quantize keeps it
  TROUPE_RETURN_IF_ERROR(matrix3(p + "ffn_gate_exps.weight", s.n_embd, ff, E));
  TROUPE_RETURN_IF_ERROR(matrix3(p + "ffn_up_exps.weight", s.n_embd, ff, E));
  TROUPE_RETURN_IF_ERROR(matrix3(p + "ffn_down_exps.weight", ff, s.n_embd, E));
  if (!s.gpt_oss()) return {};
  TROUPE_RETURN_IF_ERROR(bias(p + "ffn_gate_inp.bias", E, 0));
  TROUPE_RETURN_IF_ERROR(bias(p + "ffn_gate_exps.bias", ff, E));
  TROUPE_RETURN_IF_ERROR(bias(p + "ffn_up_exps.bias", ff, E));
  return bias(p + "ffn_down_exps.bias", s.n_embd, E);
}

// GPT-2's keys, the ones llama.cpp's GPT2Model converter writes (no RoPE, no KV-head count).
void add_gpt2_keys(const ModelShape& s, gguf::GgufBuilder& b) {
  b.set_u32("gpt2.context_length", static_cast<uint32_t>(s.n_ctx));
  b.set_u32("gpt2.embedding_length", static_cast<uint32_t>(s.n_embd));
  b.set_u32("gpt2.block_count", static_cast<uint32_t>(s.n_layer));
  b.set_u32("gpt2.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  b.set_u32("gpt2.attention.head_count", static_cast<uint32_t>(s.n_head));
  b.set_f32("gpt2.attention.layer_norm_epsilon", s.rms_eps);
}

}  // namespace

Result<DummyModelSpec> make_dummy_spec(std::string_view shape, std::string_view weight_type, uint64_t seed,
                                       int layers) {
  DummyModelSpec spec;
  auto s = find_model_shape(shape);
  if (!s) return s.status();
  spec.shape = *s;
  if (layers < 0 || layers > s->n_layer)
    return invalid_argument("shape " + s->name + " has " + std::to_string(s->n_layer) + " layers; --layers " +
                            std::to_string(layers) + " must be 1.." + std::to_string(s->n_layer));
  if (layers > 0) spec.shape.n_layer = layers;
  auto t = parse_weight_type(weight_type.empty() ? std::string_view(kDefaultWeightType) : weight_type);
  if (!t) return t.status();
  spec.weight_type = *t;
  spec.seed = seed;
  TROUPE_RETURN_IF_ERROR(check_shape_fits(spec.shape, spec.weight_type));
  return spec;
}

Result<DummyModelSpec> dummy_spec(const ModelConfig& config) {
  return make_dummy_spec(config.model_shape, config.weight_type, config.seed);
}

std::string dummy_model_name(const DummyModelSpec& spec) {
  return spec.shape.name + "-" + std::string(to_string(spec.weight_type)) + "-dummy";
}

Result<gguf::GgufBuilder> dummy_gguf(const DummyModelSpec& spec) {
  const ModelShape& s = spec.shape;
  gguf::GgufBuilder b;
  b.set_string("general.architecture", s.arch);
  b.set_string("general.name", "troupe dummy " + s.name + " " + std::string(to_string(spec.weight_type)) +
                                   " seed " + std::to_string(spec.seed));
  b.set_u32("general.file_type", file_type(spec.weight_type));
  if (traits(spec.weight_type).quantized) b.set_u32("general.quantization_version", 2);
  if (s.gpt2()) {
    add_gpt2_keys(s, b);
  } else {
    add_decoder_keys(s, b);
  }
  b.set_string("troupe.dummy.shape", s.name);
  b.set_string("troupe.dummy.weight_type", std::string(to_string(spec.weight_type)));
  b.set_u64("troupe.dummy.seed", spec.seed);
  auto vocab = make_synthetic_vocab(s.n_vocab, vocab_style_of(s.arch));
  if (!vocab) return vocab.status();
  add_tokenizer_metadata(*vocab, b);

  const DType wt = spec.weight_type;
  const uint64_t seed = spec.seed;
  auto matrix = [&](const std::string& name, int64_t ne0, int64_t rows) {
    const uint64_t ts = tensor_seed(seed, name);
    const DType t = matrix_type(wt, false);
    return b.add_tensor(name, t, ne0, rows, [t, ts, ne0](uint8_t* dst, int64_t begin, int64_t end) {
      fill_random_rows(t, ts, ne0, begin, end, dst);
    });
  };
  auto matrix3 = [&](const std::string& name, int64_t ne0, int64_t ne1, int64_t ne2) {
    const uint64_t ts = tensor_seed(seed, name);
    const DType t = matrix_type(wt, true);
    return b.add_tensor_3d(name, t, ne0, ne1, ne2, [t, ts, ne0](uint8_t* dst, int64_t begin, int64_t end) {
      fill_random_rows(t, ts, ne0, begin, end, dst);
    });
  };
  auto norm = [&](const std::string& name, int64_t n) {
    return b.add_tensor(name, DType::f32, n, 0, [n](uint8_t* dst, int64_t, int64_t) { fill_constant_f32(1.0f, n, dst); });
  };
  // Biases are f32 vectors as converters write them, random like the matrices (zeros would
  // not test that they are added).
  auto bias = [&](const std::string& name, int64_t n) {
    const uint64_t ts = tensor_seed(seed, name);
    return b.add_tensor(name, DType::f32, n, 0, [ts, n](uint8_t* dst, int64_t, int64_t) {
      fill_random_rows(DType::f32, ts, n, 0, 1, dst);
    });
  };
  // Random f32 of `rows` rows (0: a vector): routers, expert biases, sinks.
  auto random_f32 = [&](const std::string& name, int64_t n, int64_t rows) {
    const uint64_t ts = tensor_seed(seed, name);
    return b.add_tensor(name, DType::f32, n, rows, [ts, n](uint8_t* dst, int64_t begin, int64_t end) {
      fill_random_rows(DType::f32, ts, n, begin, end, dst);
    });
  };
  const int64_t q_dim = s.head_dim() * s.n_head, kv_dim = s.head_dim() * s.n_head_kv;
  TROUPE_RETURN_IF_ERROR(matrix("token_embd.weight", s.n_embd, s.n_vocab));
  if (s.gpt2()) {
    // GPT-2 in llama.cpp's layout: a learned position per context slot, layer norms with
    // biases, one fused and biased attn_qkv, biased attn_output, ffn_up and ffn_down.
    TROUPE_RETURN_IF_ERROR(matrix("position_embd.weight", s.n_embd, s.n_ctx));
    for (int l = 0; l < s.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      TROUPE_RETURN_IF_ERROR(norm(p + "attn_norm.weight", s.n_embd));
      TROUPE_RETURN_IF_ERROR(bias(p + "attn_norm.bias", s.n_embd));
      TROUPE_RETURN_IF_ERROR(matrix(p + "attn_qkv.weight", s.n_embd, 3 * s.n_embd));
      TROUPE_RETURN_IF_ERROR(bias(p + "attn_qkv.bias", 3 * s.n_embd));
      TROUPE_RETURN_IF_ERROR(matrix(p + "attn_output.weight", s.n_embd, s.n_embd));
      TROUPE_RETURN_IF_ERROR(bias(p + "attn_output.bias", s.n_embd));
      TROUPE_RETURN_IF_ERROR(norm(p + "ffn_norm.weight", s.n_embd));
      TROUPE_RETURN_IF_ERROR(bias(p + "ffn_norm.bias", s.n_embd));
      TROUPE_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", s.n_embd, s.n_ff));
      TROUPE_RETURN_IF_ERROR(bias(p + "ffn_up.bias", s.n_ff));
      TROUPE_RETURN_IF_ERROR(matrix(p + "ffn_down.weight", s.n_ff, s.n_embd));
      TROUPE_RETURN_IF_ERROR(bias(p + "ffn_down.bias", s.n_embd));
    }
    TROUPE_RETURN_IF_ERROR(norm("output_norm.weight", s.n_embd));
    TROUPE_RETURN_IF_ERROR(bias("output_norm.bias", s.n_embd));
    if (!s.tied_embeddings) TROUPE_RETURN_IF_ERROR(matrix("output.weight", s.n_embd, s.n_vocab));
    return b;
  }
  if (s.llama3_rope.factor > 0) {
    models::Llama3RopeParams p{s.llama3_rope.factor, s.llama3_rope.low_freq_factor, s.llama3_rope.high_freq_factor,
                               static_cast<float>(s.llama3_rope.original_context_length)};
    const std::vector<float> f = models::llama3_rope_factors(p, s.rope_theta, static_cast<int>(s.head_dim()));
    TROUPE_RETURN_IF_ERROR(b.add_tensor("rope_freqs.weight", DType::f32, static_cast<int64_t>(f.size()), 0,
                                        [f](uint8_t* dst, int64_t, int64_t) {
                                          std::memcpy(dst, f.data(), f.size() * sizeof(float));
                                        }));
  }
  if (s.longrope) {
    for (bool long_set : {true, false}) {
      const std::vector<float> f = longrope_factors(s.head_dim() / 2, long_set);
      TROUPE_RETURN_IF_ERROR(b.add_tensor(long_set ? "rope_factors_long.weight" : "rope_factors_short.weight",
                                          DType::f32, static_cast<int64_t>(f.size()), 0,
                                          [f](uint8_t* dst, int64_t, int64_t) {
                                            std::memcpy(dst, f.data(), f.size() * sizeof(float));
                                          }));
    }
  }
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    TROUPE_RETURN_IF_ERROR(norm(p + "attn_norm.weight", s.n_embd));
    if (s.fused_qkv) {
      TROUPE_RETURN_IF_ERROR(matrix(p + "attn_qkv.weight", s.n_embd, q_dim + 2 * kv_dim));
    } else {
      TROUPE_RETURN_IF_ERROR(matrix(p + "attn_q.weight", s.n_embd, q_dim));
      TROUPE_RETURN_IF_ERROR(matrix(p + "attn_k.weight", s.n_embd, kv_dim));
      TROUPE_RETURN_IF_ERROR(matrix(p + "attn_v.weight", s.n_embd, kv_dim));
    }
    if (s.qkv_bias) {
      TROUPE_RETURN_IF_ERROR(bias(p + "attn_q.bias", q_dim));
      TROUPE_RETURN_IF_ERROR(bias(p + "attn_k.bias", kv_dim));
      TROUPE_RETURN_IF_ERROR(bias(p + "attn_v.bias", kv_dim));
    }
    if (s.qk_norm) {  // olmoe's span the whole projection
      TROUPE_RETURN_IF_ERROR(norm(p + "attn_q_norm.weight", s.arch == "olmoe" ? q_dim : s.head_dim()));
      TROUPE_RETURN_IF_ERROR(norm(p + "attn_k_norm.weight", s.arch == "olmoe" ? kv_dim : s.head_dim()));
    }
    TROUPE_RETURN_IF_ERROR(matrix(p + "attn_output.weight", q_dim, s.n_embd));
    if (s.gpt_oss()) {
      TROUPE_RETURN_IF_ERROR(bias(p + "attn_output.bias", s.n_embd));
      TROUPE_RETURN_IF_ERROR(bias(p + "attn_sinks.weight", s.n_head));
    }
    if (s.gemma()) TROUPE_RETURN_IF_ERROR(norm(p + "post_attention_norm.weight", s.n_embd));
    TROUPE_RETURN_IF_ERROR(norm(p + (s.gpt_oss() ? "post_attention_norm.weight" : "ffn_norm.weight"), s.n_embd));
    if (s.moe()) {
      TROUPE_RETURN_IF_ERROR(add_experts(s, p, matrix3, random_f32));
    } else if (s.fused_gate_up) {
      TROUPE_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", s.n_embd, 2 * s.n_ff));
    } else {
      TROUPE_RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff));
      TROUPE_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", s.n_embd, s.n_ff));
    }
    if (!s.moe()) TROUPE_RETURN_IF_ERROR(matrix(p + "ffn_down.weight", s.n_ff, s.n_embd));
    if (s.gemma()) TROUPE_RETURN_IF_ERROR(norm(p + "post_ffw_norm.weight", s.n_embd));
  }
  TROUPE_RETURN_IF_ERROR(norm("output_norm.weight", s.n_embd));
  if (!s.tied_embeddings) TROUPE_RETURN_IF_ERROR(matrix("output.weight", s.n_embd, s.n_vocab));
  return b;
}

Result<std::shared_ptr<const gguf::GgufFile>> open_dummy_model(const DummyModelSpec& spec) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const gguf::GgufFile>> cache;
  // Held while building, so two ranks of one process build the model once.
  std::lock_guard lock(mu);
  const std::string key = cache_key(spec);
  if (auto it = cache.find(key); it != cache.end())
    if (auto file = it->second.lock()) return file;
  const auto t0 = std::chrono::steady_clock::now();
  auto builder = dummy_gguf(spec);
  if (!builder) return builder.status();
  auto image = builder->build_in_memory();
  if (!image) return Status(image.status().code(), "dummy model " + dummy_model_name(spec) + ": " +
                                                       image.status().message());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  TROUPE_LOG_INFO("Dummy weights: shape {}, {} weights, seed {}: {:.1f} MiB built in memory in {:.2f} s",
                  spec.shape.name, to_string(spec.weight_type), spec.seed,
                  static_cast<double>(image->size) / (1 << 20), s);
  cache[key] = image->file;
  return image->file;
}

}  // namespace troupe::dummy
