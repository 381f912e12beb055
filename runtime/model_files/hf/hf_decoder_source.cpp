#include "runtime/model_files/hf/hf_decoder_source.hpp"

#include <cmath>
#include <cstring>

#include "runtime/model_files/hf/hf_model_folder.hpp"
#include "runtime/text/json/json_io.hpp"

namespace troupe::hf {
namespace {

using json = nlohmann::json;

struct ArchInfo {
  const char* hf;       // config.json architectures[0]
  const char* gguf;     // general.architecture llama.cpp's converter writes
  bool tied_default;    // transformers' default of tie_word_embeddings for this config class
  bool permuted_qk;     // llama.cpp's converter permutes Q/K rows (rotary pairs adjacent)
  const char* act;      // the activation the model computes (hidden_act / hidden_activation)
};

constexpr ArchInfo kArchs[] = {
    {"LlamaForCausalLM", "llama", false, true, "silu"},
    {"MistralForCausalLM", "llama", false, true, "silu"},
    {"Qwen2ForCausalLM", "qwen2", false, false, "silu"},
    {"Qwen3ForCausalLM", "qwen3", false, false, "silu"},
    {"Phi3ForCausalLM", "phi3", false, false, "silu"},
    {"Gemma2ForCausalLM", "gemma2", true, false, "gelu_pytorch_tanh"},
    {"Gemma3ForCausalLM", "gemma3", true, false, "gelu_pytorch_tanh"},
    // Mixtures of experts: the router and every expert one by one (moe_weights.hpp reads them so).
    {"MixtralForCausalLM", "llama", false, true, "silu"},
    {"Qwen3MoeForCausalLM", "qwen3moe", false, false, "silu"},
    {"OlmoeForCausalLM", "olmoe", false, false, "silu"},
};

bool is_moe(std::string_view hf) {
  return hf == "MixtralForCausalLM" || hf == "Qwen3MoeForCausalLM" || hf == "OlmoeForCausalLM";
}

const ArchInfo* find_arch(std::string_view hf) {
  for (const ArchInfo& a : kArchs)
    if (hf == a.hf) return &a;
  return nullptr;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    f = mant ? NAN : INFINITY;
  } else {
    f = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u |= sign;
  std::memcpy(&f, &u, 4);
  return f;
}

float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// config.json's values, read with the file named in every error.
class Config;
Status moe_keys(const Config& c, const std::string& hf_arch, const std::string& a, json& k);
class Config {
 public:
  Config(const json& c, std::string file) : c_(c), file_(std::move(file)) {}
  const std::string& file() const { return file_; }
  const json* find(const std::string& key) const {
    auto it = c_.find(key);
    return it == c_.end() || it->is_null() ? nullptr : &*it;
  }
  Result<int64_t> integer(const std::string& key, std::optional<int64_t> fallback, int64_t min = 1) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return invalid_argument(file_ + ": the key '" + key + "' is missing");
    }
    const auto u = json_io::non_negative_integer(*v);
    if (!u || *u < static_cast<uint64_t>(min) || *u > (uint64_t{1} << 31))
      return invalid_argument(file_ + ": '" + key + "' is " + v->dump().substr(0, 40) + ", expected an integer >= " +
                              std::to_string(min));
    return static_cast<int64_t>(*u);
  }
  Result<double> number(const std::string& key, double fallback, bool positive = true) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>()) || (positive ? !(v->get<double>() > 0) : v->get<double>() < 0))
      return invalid_argument(file_ + ": '" + key + "' is " + v->dump().substr(0, 40) + ", expected a " +
                              (positive ? "positive" : "non-negative") + " number");
    return v->get<double>();
  }

 private:
  const json& c_;
  std::string file_;
};

// The experts' keys as llama.cpp's converter writes them: expert_count, expert_used_count and,
// for qwen3moe, expert_feed_forward_length. What llama.cpp fixes per family (qwen3moe and
// Mixtral normalize the top-k weights, OLMoE does not; every qwen3moe block is experts) must
// agree with config.json, else the folder is refused naming the key.
Status moe_keys(const Config& c, const std::string& hf_arch, const std::string& a, json& k) {
  const bool mixtral = hf_arch == "MixtralForCausalLM", qwen = hf_arch == "Qwen3MoeForCausalLM";
  auto experts = c.integer(mixtral ? "num_local_experts" : "num_experts", std::nullopt);
  if (!experts.ok()) return experts.status();
  auto used = c.integer("num_experts_per_tok", std::nullopt);
  if (!used.ok()) return used.status();
  k[a + "expert_count"] = *experts;
  k[a + "expert_used_count"] = *used;
  if (qwen) {
    auto ff = c.integer("moe_intermediate_size", std::nullopt);
    if (!ff.ok()) return ff.status();
    k[a + "expert_feed_forward_length"] = *ff;
    if (auto step = c.integer("decoder_sparse_step", 1); !step.ok() || *step != 1)
      return not_supported(c.file() + ": decoder_sparse_step other than 1 (dense blocks between the experts) is not "
                           "supported");
    if (const json* dense = c.find("mlp_only_layers"); dense && (!dense->is_array() || !dense->empty()))
      return not_supported(c.file() + ": mlp_only_layers (dense blocks among the experts) is not supported");
  }
  if (!mixtral) {
    const json* norm = c.find("norm_topk_prob");
    const bool want = qwen;  // llama.cpp b11434: qwen3moe normalizes, olmoe does not
    if (norm != nullptr && (!norm->is_boolean() || norm->get<bool>() != want))
      return not_supported(c.file() + ": norm_topk_prob " + norm->dump() + " is not supported for " + hf_arch +
                           " (only " + (want ? "true" : "false") + ", as llama.cpp runs it)");
  }
  if (const json* clip = c.find("clip_qkv"))
    return not_supported(c.file() + ": clip_qkv " + clip->dump().substr(0, 20) + " is not supported");
  return {};
}

}  // namespace

const std::vector<std::string>& hf_decoder_architectures() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const ArchInfo& a : kArchs) v.emplace_back(a.hf);
    return v;
  }();
  return kNames;
}

std::string gguf_architecture_of(std::string_view hf_architecture) {
  const ArchInfo* a = find_arch(hf_architecture);
  return a ? a->gguf : "";
}

Result<std::unique_ptr<HfDecoderSource>> HfDecoderSource::create(std::shared_ptr<const HfModelFolder> folder) {
  const HfModelFolder& f = *folder;
  const std::string hf_arch = f.architecture();
  const ArchInfo* info = find_arch(hf_arch);
  const std::string cfile = f.dir() + "/config.json";
  if (info == nullptr) {
    std::string names;
    for (const ArchInfo& a : kArchs) names += (names.empty() ? "" : ", ") + std::string(a.hf);
    return not_supported(cfile + ": architecture '" + json_io::printable(hf_arch) +
                         "' is not supported (decoders: " + names + "; encoders: BertModel)");
  }
  std::unique_ptr<HfDecoderSource> s(new HfDecoderSource());
  s->folder_ = folder;
  s->arch_ = info->gguf;
  const Config c(f.config_json(), cfile);
  const bool gemma = s->arch_ == "gemma2" || s->arch_ == "gemma3";
  const bool g3 = s->arch_ == "gemma3";
  const std::string a = s->arch_ + ".";
  json& k = s->keys_;
  k["general.architecture"] = s->arch_;
  k["general.name"] = f.dir();

  auto hidden = c.integer("hidden_size", std::nullopt);
  if (!hidden.ok()) return hidden.status();
  auto layers = c.integer("num_hidden_layers", std::nullopt);
  if (!layers.ok()) return layers.status();
  auto heads = c.integer("num_attention_heads", std::nullopt);
  if (!heads.ok()) return heads.status();
  auto kv_heads = c.integer("num_key_value_heads", *heads);
  if (!kv_heads.ok()) return kv_heads.status();
  auto ff = c.integer("intermediate_size", std::nullopt);
  if (!ff.ok()) return ff.status();
  auto vocab = c.integer("vocab_size", std::nullopt);
  if (!vocab.ok()) return vocab.status();
  auto ctx = c.integer("max_position_embeddings", g3 ? std::optional<int64_t>(131072) : std::nullopt);
  if (!ctx.ok()) return ctx.status();
  if (*hidden % *heads != 0 && !c.find("head_dim"))
    return invalid_argument(cfile + ": hidden_size " + std::to_string(*hidden) + " is not a multiple of "
                            "num_attention_heads " + std::to_string(*heads) + " and there is no head_dim");
  auto head_dim = c.integer("head_dim", *hidden / *heads);
  if (!head_dim.ok()) return head_dim.status();
  if (*heads % *kv_heads != 0)
    return invalid_argument(cfile + ": num_attention_heads " + std::to_string(*heads) +
                            " is not a multiple of num_key_value_heads " + std::to_string(*kv_heads));
  auto eps = c.number("rms_norm_eps", 1e-6);
  if (!eps.ok()) return eps.status();
  auto theta = c.number("rope_theta", g3 ? 1000000.0 : 10000.0);
  if (!theta.ok()) return theta.status();
  if (auto prf = c.number("partial_rotary_factor", 1.0); !prf.ok() || *prf != 1.0)
    return not_supported(cfile + ": partial_rotary_factor other than 1 (partial rotary embeddings) is not supported");
  const std::string act_key = gemma && c.find("hidden_activation") ? "hidden_activation" : "hidden_act";
  if (const json* act = c.find(act_key); act && (!act->is_string() || act->get<std::string>() != info->act))
    return not_supported(cfile + ": " + act_key + " " + act->dump().substr(0, 40) + " is not supported for " + hf_arch +
                         " (only \"" + info->act + "\")");
  bool tied = info->tied_default;
  if (const json* t = c.find("tie_word_embeddings")) {
    if (!t->is_boolean()) return invalid_argument(cfile + ": 'tie_word_embeddings' is not true or false");
    tied = t->get<bool>();
  }
  if (s->arch_ == "gemma2") tied = true;  // llama.cpp always ties gemma2's output to the embedding

  k[a + "context_length"] = *ctx;
  k[a + "embedding_length"] = *hidden;
  k[a + "block_count"] = *layers;
  k[a + "feed_forward_length"] = *ff;
  k[a + "attention.head_count"] = *heads;
  k[a + "attention.head_count_kv"] = *kv_heads;
  k[a + "attention.layer_norm_rms_epsilon"] = *eps;
  k[a + "rope.freq_base"] = *theta;
  k[a + "rope.dimension_count"] = *head_dim;
  k[a + "vocab_size"] = *vocab;
  if (c.find("head_dim") || gemma) {
    k[a + "attention.key_length"] = *head_dim;
    k[a + "attention.value_length"] = *head_dim;
  }
  if (info->permuted_qk) k["troupe.rope.neox"] = 1;

  // rope_scaling (transformers: "rope_type", older files "type").
  if (const json* rs = c.find("rope_scaling")) {
    if (!rs->is_object()) return invalid_argument(cfile + ": 'rope_scaling' is not an object");
    std::string type;
    for (const char* key : {"rope_type", "type"})
      if (auto it = rs->find(key); it != rs->end() && it->is_string()) type = it->get<std::string>();
    if (type == "su") type = "longrope";  // Phi-3's first name for it
    if (type != "default" && !type.empty()) {
      k[a + "rope.scaling.type"] = type;
      for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "attention_factor"})
        if (auto it = rs->find(key); it != rs->end() && it->is_number())
          k[a + "rope.scaling." + (std::string(key) == "attention_factor" ? "attn_factor" : key)] = *it;
      if (auto it = rs->find("original_max_position_embeddings"); it != rs->end() && it->is_number_integer())
        k[a + "rope.scaling.original_context_length"] = *it;
    }
  }
  // Mistral v0.1 windows every layer (sliding_window 4096; later versions write null): troupe
  // applies a llama file's window, as transformers and vLLM do.
  if (s->arch_ == "llama") {
    if (auto w = c.integer("sliding_window", std::nullopt); w.ok()) k[a + "attention.sliding_window"] = *w;
  }
  if (s->arch_ == "phi3") {
    if (auto w = c.integer("sliding_window", std::nullopt); w.ok()) k[a + "attention.sliding_window"] = *w;
    if (auto o = c.integer("original_max_position_embeddings", std::nullopt); o.ok())
      k[a + "rope.scaling.original_context_length"] = *o;
  }
  // Phi-3's long-context RoPE ("longrope", first "su"): the two factor lists become the
  // tensors llama.cpp's converter writes (rope_factors_long/short.weight), and the attention
  // factor, unless config.json gives attention_factor (transformers uses it then; the
  // converter ignores it), is transformers' and the converter's sqrt(1 + ln(s) / ln(original))
  // with s = max_position_embeddings / original_max_position_embeddings.
  if (k.contains(a + "rope.scaling.type") && k[a + "rope.scaling.type"] == "longrope") {
    if (s->arch_ != "phi3")
      return not_supported(cfile + ": rope_scaling type longrope is read for Phi3ForCausalLM only, not " + hf_arch);
    const json& rs = *c.find("rope_scaling");
    const size_t pairs = static_cast<size_t>(*head_dim / 2);
    for (const char* key : {"long_factor", "short_factor"}) {
      auto it = rs.find(key);
      bool good = it != rs.end() && it->is_array() && it->size() == pairs;
      std::vector<float> v;
      for (size_t i = 0; good && i < pairs; ++i) {
        const json& x = (*it)[i];
        good = x.is_number() && std::isfinite(x.get<double>()) && x.get<double>() > 0;
        if (good) v.push_back(static_cast<float>(x.get<double>()));
      }
      if (!good)
        return invalid_argument(cfile + ": rope_scaling." + key + " must be a list of " + std::to_string(pairs) +
                                " positive numbers (head_dim / 2)");
      const std::string name = std::string(key) == "long_factor" ? "rope_factors_long.weight" : "rope_factors_short.weight";
      auto owned = std::make_unique<WeightTensor>();
      owned->name = name;
      owned->type = DType::f32;
      owned->n_dims = 1;
      owned->ne[0] = static_cast<int64_t>(pairs);
      owned->nbytes = pairs * sizeof(float);
      s->owned_data_.push_back(std::move(v));
      owned->data = s->owned_data_.back().data();
      s->tensors_[name] = owned.get();
      s->owned_.push_back(std::move(owned));
    }
    if (!k.contains(a + "rope.scaling.attn_factor")) {
      const int64_t original = k.value(a + "rope.scaling.original_context_length", int64_t{0});
      if (original <= 1)
        return invalid_argument(cfile + ": rope_scaling longrope needs original_max_position_embeddings (> 1)");
      const double scale = static_cast<double>(*ctx) / static_cast<double>(original);
      k[a + "rope.scaling.attn_factor"] =
          scale > 1.0 ? std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(original))) : 1.0;
    }
  }
  if (is_moe(hf_arch)) TROUPE_RETURN_IF_ERROR(moe_keys(c, hf_arch, a, k));
  if (s->arch_ == "qwen2" || s->arch_ == "qwen3" || s->arch_ == "qwen3moe") {
    if (const json* u = c.find("use_sliding_window"); u && u->is_boolean() && u->get<bool>())
      return not_supported(cfile + ": use_sliding_window true is not supported for " + hf_arch);
  }
  if (gemma) {
    auto window = c.integer("sliding_window", g3 ? std::nullopt : std::optional<int64_t>(4096), 0);
    if (!window.ok()) return window.status();
    k[a + "attention.sliding_window"] = *window;
    auto scalar = c.number("query_pre_attn_scalar", static_cast<double>(*head_dim));
    if (!scalar.ok()) return scalar.status();
    k[a + "attention.query_pre_attn_scalar"] = *scalar;
    if (!g3) {
      for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
        auto cap = c.number(key, std::string(key) == "attn_logit_softcapping" ? 50.0 : 30.0);
        if (!cap.ok()) return cap.status();
        k[a + key] = *cap;
      }
    } else {
      auto local = c.number("rope_local_base_freq", 10000.0);
      if (!local.ok()) return local.status();
      k[a + "rope.freq_base_swa"] = *local;
      if (c.find("final_logit_softcapping")) {
        auto cap = c.number("final_logit_softcapping", 0.0, false);
        if (!cap.ok()) return cap.status();
        k[a + "final_logit_softcapping"] = *cap;
      }
      // Local/global layers: sliding_window_pattern (every pattern-th layer global), or
      // newer configs' layer_types, which must follow such a pattern.
      if (const json* types = c.find("layer_types")) {
        if (!types->is_array() || static_cast<int64_t>(types->size()) != *layers)
          return invalid_argument(cfile + ": 'layer_types' is not a list of num_hidden_layers (" +
                                  std::to_string(*layers) + ") strings");
        int64_t pattern = 0;
        for (size_t i = 0; i < types->size(); ++i)
          if ((*types)[i] == "full_attention") {
            pattern = static_cast<int64_t>(i) + 1;
            break;
          }
        for (size_t i = 0; i < types->size(); ++i) {
          const bool local = pattern == 0 || static_cast<int64_t>(i) % pattern < pattern - 1;
          if ((*types)[i] != (local ? "sliding_attention" : "full_attention"))
            return not_supported(cfile + ": layer_types " + types->dump().substr(0, 80) +
                                 " do not follow one sliding-window pattern (n-1 sliding layers, then a full one)");
        }
        if (pattern > 0) k[a + "attention.sliding_window_pattern"] = pattern;
        else k[a + "attention.sliding_window_pattern"] = 0;
      } else {
        auto pattern = c.integer("sliding_window_pattern", 6, 0);
        if (!pattern.ok()) return pattern.status();
        k[a + "attention.sliding_window_pattern"] = *pattern;
      }
    }
  }

  // Tensors: HF name -> GGUF name with the PyTorch shape config.json implies.
  const HfWeightShards& w = f.shards();
  const int64_t q_dim = *heads * *head_dim, kv_dim = *kv_heads * *head_dim;
  auto map = [&](const std::string& hf, const std::string& gguf, std::vector<int64_t> shape,
                 bool required = true) -> Status {
    const safetensors::TensorEntry* e = w.entry(hf);
    if (e == nullptr) {
      if (!required) return {};
      return not_found(f.dir() + ": tensor '" + hf + "' is missing (" + hf_arch + ")");
    }
    if (e->shape != shape)
      return invalid_argument(f.dir() + ": tensor '" + hf + "' has shape " + shape_str(e->shape) + " but config.json (" +
                              "hidden_size " + std::to_string(*hidden) + ", heads " + std::to_string(*heads) + "/" +
                              std::to_string(*kv_heads) + ", head_dim " + std::to_string(*head_dim) +
                              ", intermediate_size " + std::to_string(*ff) + ", vocab_size " + std::to_string(*vocab) +
                              ") needs " + shape_str(shape));
    const WeightTensor* t = w.tensor(hf);
    if (t == nullptr)
      return not_supported(f.dir() + ": tensor '" + hf + "' is " + e->dtype + " (F32, F16 and BF16 are read)");
    if (shape.size() != 1) {
      s->tensors_[gguf] = t;
      return {};
    }
    // 1-D: an owned f32 copy (Gemma: +1, as its RMSNorm scales by 1 + w).
    const int64_t n = shape[0];
    std::vector<float> v(static_cast<size_t>(n));
    const auto* p = static_cast<const uint8_t*>(t->data);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = 0;
      if (t->type == DType::f32) {
        std::memcpy(&v[i], p + 4 * i, 4);
        continue;
      }
      std::memcpy(&h, p + 2 * i, 2);
      v[i] = t->type == DType::f16 ? half_to_float(h) : bf16_to_float(h);
    }
    const bool norm = gguf.size() > 12 && gguf.compare(gguf.size() - 12, 12, "_norm.weight") == 0;
    if (gemma && norm)
      for (float& x : v) x += 1.0f;
    auto owned = std::make_unique<WeightTensor>(*t);
    owned->name = gguf;
    owned->type = DType::f32;
    owned->nbytes = static_cast<uint64_t>(n) * 4;
    owned->row_stride = 0;
    s->owned_data_.push_back(std::move(v));
    owned->data = s->owned_data_.back().data();
    s->tensors_[gguf] = owned.get();
    s->owned_.push_back(std::move(owned));
    return {};
  };
  TROUPE_RETURN_IF_ERROR(map("model.embed_tokens.weight", "token_embd.weight", {*vocab, *hidden}));
  TROUPE_RETURN_IF_ERROR(map("model.norm.weight", "output_norm.weight", {*hidden}));
  if (!tied) TROUPE_RETURN_IF_ERROR(map("lm_head.weight", "output.weight", {*vocab, *hidden}));
  for (int64_t l = 0; l < *layers; ++l) {
    const std::string h = "model.layers." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
    TROUPE_RETURN_IF_ERROR(map(h + "input_layernorm.weight", g + "attn_norm.weight", {*hidden}));
    if (s->arch_ == "phi3") {
      TROUPE_RETURN_IF_ERROR(map(h + "self_attn.qkv_proj.weight", g + "attn_qkv.weight", {q_dim + 2 * kv_dim, *hidden}));
      TROUPE_RETURN_IF_ERROR(map(h + "mlp.gate_up_proj.weight", g + "ffn_up.weight", {2 * *ff, *hidden}));
    } else {
      TROUPE_RETURN_IF_ERROR(map(h + "self_attn.q_proj.weight", g + "attn_q.weight", {q_dim, *hidden}));
      TROUPE_RETURN_IF_ERROR(map(h + "self_attn.k_proj.weight", g + "attn_k.weight", {kv_dim, *hidden}));
      TROUPE_RETURN_IF_ERROR(map(h + "self_attn.v_proj.weight", g + "attn_v.weight", {kv_dim, *hidden}));
    }
    TROUPE_RETURN_IF_ERROR(map(h + "self_attn.o_proj.weight", g + "attn_output.weight", {*hidden, q_dim}));
    if (is_moe(hf_arch)) {
      // The router, then each expert under the per-expert GGUF names (blk.N.ffn_gate.E.weight).
      const bool mixtral = hf_arch == "MixtralForCausalLM";
      const int64_t n_exp = k[a + "expert_count"].get<int64_t>();
      const int64_t eff = k.value(a + "expert_feed_forward_length", *ff);
      const std::string moe = h + (mixtral ? "block_sparse_moe." : "mlp.");
      TROUPE_RETURN_IF_ERROR(map(moe + "gate.weight", g + "ffn_gate_inp.weight", {n_exp, *hidden}));
      for (int64_t e = 0; e < n_exp; ++e) {
        const std::string x = moe + "experts." + std::to_string(e) + ".", ge = "." + std::to_string(e) + ".weight";
        TROUPE_RETURN_IF_ERROR(map(x + (mixtral ? "w1.weight" : "gate_proj.weight"), g + "ffn_gate" + ge, {eff, *hidden}));
        TROUPE_RETURN_IF_ERROR(map(x + (mixtral ? "w3.weight" : "up_proj.weight"), g + "ffn_up" + ge, {eff, *hidden}));
        TROUPE_RETURN_IF_ERROR(map(x + (mixtral ? "w2.weight" : "down_proj.weight"), g + "ffn_down" + ge, {*hidden, eff}));
      }
    } else if (s->arch_ != "phi3") {
      TROUPE_RETURN_IF_ERROR(map(h + "mlp.gate_proj.weight", g + "ffn_gate.weight", {*ff, *hidden}));
      TROUPE_RETURN_IF_ERROR(map(h + "mlp.up_proj.weight", g + "ffn_up.weight", {*ff, *hidden}));
      TROUPE_RETURN_IF_ERROR(map(h + "mlp.down_proj.weight", g + "ffn_down.weight", {*hidden, *ff}));
    } else {
      TROUPE_RETURN_IF_ERROR(map(h + "mlp.down_proj.weight", g + "ffn_down.weight", {*hidden, *ff}));
    }
    // Biases: qwen2 always has them; other families load them when present, as llama.cpp does.
    const bool bias = s->arch_ == "qwen2";
    TROUPE_RETURN_IF_ERROR(map(h + "self_attn.q_proj.bias", g + "attn_q.bias", {q_dim}, bias));
    TROUPE_RETURN_IF_ERROR(map(h + "self_attn.k_proj.bias", g + "attn_k.bias", {kv_dim}, bias));
    TROUPE_RETURN_IF_ERROR(map(h + "self_attn.v_proj.bias", g + "attn_v.bias", {kv_dim}, bias));
    if (s->arch_ == "qwen3" || s->arch_ == "qwen3moe" || g3) {
      TROUPE_RETURN_IF_ERROR(map(h + "self_attn.q_norm.weight", g + "attn_q_norm.weight", {*head_dim}));
      TROUPE_RETURN_IF_ERROR(map(h + "self_attn.k_norm.weight", g + "attn_k_norm.weight", {*head_dim}));
    }
    if (s->arch_ == "olmoe") {  // over the whole projection
      TROUPE_RETURN_IF_ERROR(map(h + "self_attn.q_norm.weight", g + "attn_q_norm.weight", {q_dim}));
      TROUPE_RETURN_IF_ERROR(map(h + "self_attn.k_norm.weight", g + "attn_k_norm.weight", {kv_dim}));
    }
    if (gemma) {
      TROUPE_RETURN_IF_ERROR(map(h + "post_attention_layernorm.weight", g + "post_attention_norm.weight", {*hidden}));
      TROUPE_RETURN_IF_ERROR(map(h + "pre_feedforward_layernorm.weight", g + "ffn_norm.weight", {*hidden}));
      TROUPE_RETURN_IF_ERROR(map(h + "post_feedforward_layernorm.weight", g + "post_ffw_norm.weight", {*hidden}));
    } else {
      TROUPE_RETURN_IF_ERROR(map(h + "post_attention_layernorm.weight", g + "ffn_norm.weight", {*hidden}));
    }
    for (const char* extra : {"self_attn.o_proj.bias", "mlp.down_proj.bias", "mlp.up_proj.bias", "mlp.gate_proj.bias"})
      if (w.entry(h + extra) != nullptr)
        return not_supported(f.dir() + ": tensor '" + h + extra + "' is not supported (" + hf_arch + ")");
  }
  if (w.entry("model.layers." + std::to_string(*layers) + ".input_layernorm.weight") != nullptr)
    return invalid_argument(f.dir() + ": the weights hold more layers than config.json's num_hidden_layers " +
                            std::to_string(*layers));
  return s;
}

const WeightTensor* HfDecoderSource::tensor(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

const json* HfDecoderSource::key(std::string_view k) const {
  auto it = keys_.find(std::string(k));
  return it == keys_.end() ? nullptr : &*it;
}

std::optional<int64_t> HfDecoderSource::get_int(std::string_view k) const {
  const json* v = key(k);
  if (v == nullptr || !v->is_number_integer()) return std::nullopt;
  return v->get<int64_t>();
}

std::optional<double> HfDecoderSource::get_float(std::string_view k) const {
  const json* v = key(k);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

std::optional<std::string> HfDecoderSource::get_string(std::string_view k) const {
  const json* v = key(k);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

}  // namespace troupe::hf
