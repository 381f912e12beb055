#include "runtime/model_files/hf/hf_folder_writer.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/model_files/hf/hf_decoder_source.hpp"
#include "runtime/text/tokenizer/tokenizer_json_writer.hpp"
#include "runtime/model_files/gguf/gguf_vocab.hpp"

namespace troupe::hf {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

struct OutTensor {
  std::string name;             // HF name
  std::string dtype;            // "F32", "F16", "BF16"
  std::vector<int64_t> shape;   // PyTorch order
  std::vector<uint8_t> bytes;
};

Result<std::string> st_dtype(DType t) {
  switch (t) {
    case DType::f32: return std::string("F32");
    case DType::f16: return std::string("F16");
    case DType::bf16: return std::string("BF16");
    default:
      return invalid_argument(std::string("a Hugging Face folder holds f32, f16 or bf16 weights, not ") +
                              std::string(to_string(t)));
  }
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float f = exp == 0 ? std::ldexp(static_cast<float>(mant), -24)
                     : std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u |= sign;
  std::memcpy(&f, &u, 4);
  return f;
}

// One GGUF tensor as f32 values (1-D tensors only: norms and biases).
std::vector<float> as_f32(const WeightTensor& t) {
  const int64_t n = t.ne[0] * t.rows();
  std::vector<float> v(static_cast<size_t>(n));
  const auto* p = static_cast<const uint8_t*>(t.data);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    if (t.type == DType::f32) {
      std::memcpy(&v[i], p + 4 * i, 4);
      continue;
    }
    std::memcpy(&h, p + 2 * i, 2);
    if (t.type == DType::f16) {
      v[i] = f16_to_f32(h);
    } else {
      const uint32_t u = static_cast<uint32_t>(h) << 16;
      std::memcpy(&v[i], &u, 4);
    }
  }
  return v;
}

Status write_safetensors(const std::string& path, const std::vector<const OutTensor*>& tensors) {
  ojson h = ojson::object();
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const OutTensor* t : tensors) {
    h[t->name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string text = h.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return invalid_argument(path + ": cannot be written");
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const OutTensor* t : tensors) out.write(reinterpret_cast<const char*>(t->bytes.data()), static_cast<std::streamsize>(t->bytes.size()));
  out.close();
  if (!out) return data_loss(path + ": write failed");
  return {};
}

Status write_json(const std::string& path, const ojson& j) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return invalid_argument(path + ": cannot be written");
  out << j.dump(2) << "\n";
  out.close();
  if (!out) return data_loss(path + ": write failed");
  return {};
}

// Expert e of a merged GGUF tensor blk.N.ffn_<kind>_exps.weight {in, out, E} as the HF
// tensor model.layers.N.mlp.experts.e.<kind>_proj.weight [out, in] (Mixtral:
// block_sparse_moe.experts.e.w1 / w3 / w2 for gate / up / down).
Status split_experts(const dummy::ModelShape& s, const WeightTensor& t, std::vector<OutTensor>* out, uint64_t* total,
                     std::string* matrix_dtype) {
  auto dt = st_dtype(t.type);
  if (!dt.ok()) return Status(dt.status().code(), "tensor '" + t.name + "': " + dt.status().message());
  *matrix_dtype = *dt;
  const size_t dot = t.name.find('.', 4);
  const std::string layer = "model.layers." + t.name.substr(4, dot - 4) + ".";
  const std::string rest = t.name.substr(dot + 1);
  std::string kind;
  for (const char* k : {"gate", "up", "down"})
    if (rest == std::string("ffn_") + k + "_exps.weight") kind = k;
  if (kind.empty()) return invalid_argument("tensor '" + t.name + "' has no Hugging Face name here");
  const bool mixtral = s.arch == "llama";
  const std::string proj = mixtral ? (kind == "gate" ? "w1" : kind == "up" ? "w3" : "w2") : kind + "_proj";
  const size_t bytes = t.nbytes / static_cast<size_t>(t.ne[2]);
  for (int64_t e = 0; e < t.ne[2]; ++e) {
    OutTensor o;
    o.name = layer + (mixtral ? "block_sparse_moe.experts." : "mlp.experts.") + std::to_string(e) + "." + proj +
             ".weight";
    o.dtype = *dt;
    o.shape = {t.ne[1], t.ne[0]};
    const auto* src = static_cast<const uint8_t*>(t.data) + static_cast<size_t>(e) * bytes;
    o.bytes.assign(src, src + bytes);
    *total += o.bytes.size();
    out->push_back(std::move(o));
  }
  return {};
}

}  // namespace

std::string hf_architecture_for(const dummy::ModelShape& shape) {
  if (shape.arch == "llama" && shape.moe()) return "MixtralForCausalLM";
  if (shape.arch == "qwen3moe") return "Qwen3MoeForCausalLM";
  if (shape.arch == "olmoe") return "OlmoeForCausalLM";
  if (shape.arch == "llama") return "LlamaForCausalLM";
  if (shape.arch == "qwen2") return "Qwen2ForCausalLM";
  if (shape.arch == "qwen3") return "Qwen3ForCausalLM";
  if (shape.arch == "phi3") return "Phi3ForCausalLM";
  if (shape.arch == "gemma2") return "Gemma2ForCausalLM";
  if (shape.arch == "gemma3") return "Gemma3ForCausalLM";
  return "";
}

Status write_hf_folder(const dummy::ModelShape& s, const gguf::GgufFile& model, const std::string& dir,
                       const HfFolderOptions& options) {
  const std::string arch = options.architecture.empty() ? hf_architecture_for(s) : options.architecture;
  if (arch.empty())  // gpt2: troupe reads no GPT-2 folder (its model is a plugin's, over GGUF)
    return invalid_argument("shape " + s.name + " (" + s.arch +
                            ") has no Hugging Face folder form; write it as a GGUF file");
  if (gguf_architecture_of(arch) != s.arch)
    return invalid_argument("shape " + s.name + " (" + s.arch + ") cannot be written as a '" + arch + "' folder");
  if (options.shards < 1 || options.shards > 999)
    return invalid_argument("--shards " + std::to_string(options.shards) + " must be 1..999");
  const bool gemma = s.arch == "gemma2" || s.arch == "gemma3";
  const bool permuted = s.arch == "llama" && options.unpermute_qk;  // llama.cpp's converter permutes llama/mistral Q/K
  const int64_t hd = s.head_dim();

  // GGUF name -> HF name (per block: "blk.N." -> "model.layers.N.").
  auto hf_name = [&](const std::string& g) -> std::string {
    if (g == "token_embd.weight") return "model.embed_tokens.weight";
    if (g == "output_norm.weight") return "model.norm.weight";
    if (g == "output.weight") return "lm_head.weight";
    if (g.rfind("blk.", 0) != 0) return "";
    const size_t dot = g.find('.', 4);
    const std::string layer = "model.layers." + g.substr(4, dot - 4) + ".";
    const std::string rest = g.substr(dot + 1);
    static const std::pair<const char*, const char*> kCommon[] = {
        {"attn_norm.weight", "input_layernorm.weight"}, {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"},   {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_q.bias", "self_attn.q_proj.bias"},       {"attn_k.bias", "self_attn.k_proj.bias"},
        {"attn_v.bias", "self_attn.v_proj.bias"},       {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_qkv.weight", "self_attn.qkv_proj.weight"}, {"attn_q_norm.weight", "self_attn.q_norm.weight"},
        {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},
        {"post_attention_norm.weight", "post_attention_layernorm.weight"},
        {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"}};
    for (const auto& [from, to] : kCommon)
      if (rest == from) return layer + to;
    if (rest == "ffn_gate_inp.weight") return layer + (s.arch == "llama" ? "block_sparse_moe.gate.weight" : "mlp.gate.weight");
    if (rest == "ffn_up.weight") return layer + (s.fused_gate_up ? "mlp.gate_up_proj.weight" : "mlp.up_proj.weight");
    if (rest == "ffn_norm.weight") return layer + (gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight");
    return "";
  };

  std::vector<OutTensor> out;
  uint64_t total = 0;
  std::string matrix_dtype = "F32";
  for (const WeightTensor& t : model.tensors()) {
    // config.json's rope_scaling says these.
    if (t.name == "rope_freqs.weight" || t.name == "rope_factors_long.weight" || t.name == "rope_factors_short.weight")
      continue;
    if (t.n_dims == 3) {  // merged experts: one HF tensor per expert
      TROUPE_RETURN_IF_ERROR(split_experts(s, t, &out, &total, &matrix_dtype));
      continue;
    }
    const std::string name = hf_name(t.name);
    if (name.empty()) return invalid_argument("tensor '" + t.name + "' has no Hugging Face name here");
    OutTensor o;
    o.name = name;
    if (t.n_dims <= 1) {
      std::vector<float> v = as_f32(t);
      if (gemma && t.name.size() > 12 && t.name.compare(t.name.size() - 12, 12, "_norm.weight") == 0)
        for (float& x : v) x -= 1.0f;  // HF's Gemma RMSNorm scales by 1 + w
      o.dtype = "F32";
      o.shape = {t.ne[0]};
      o.bytes.resize(v.size() * 4);
      std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
    } else {
      auto dt = st_dtype(t.type);
      if (!dt.ok()) return Status(dt.status().code(), "tensor '" + t.name + "': " + dt.status().message());
      o.dtype = *dt;
      matrix_dtype = *dt;
      o.shape = {t.ne[1], t.ne[0]};
      const auto* src = static_cast<const uint8_t*>(t.data);
      const size_t rb = t.nbytes / static_cast<size_t>(t.ne[1]);
      o.bytes.resize(t.nbytes);
      const bool unpermute = permuted && (t.name.find(".attn_q.weight") != std::string::npos ||
                                          t.name.find(".attn_k.weight") != std::string::npos);
      if (!unpermute) {
        std::memcpy(o.bytes.data(), src, t.nbytes);
      } else {
        // GGUF row (head, 2i + j) holds HF row (head, j * hd/2 + i).
        for (int64_t r = 0; r < t.ne[1]; ++r) {
          const int64_t head = r / hd, within = r % hd, i = within / 2, j = within % 2;
          const int64_t hf_row = head * hd + j * (hd / 2) + i;
          std::memcpy(o.bytes.data() + hf_row * rb, src + r * rb, rb);
        }
      }
    }
    total += o.bytes.size();
    out.push_back(std::move(o));
  }

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return invalid_argument(dir + ": cannot create the folder (" + ec.message() + ")");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string f = entry.path().filename().string();
    if (f.rfind("model", 0) == 0 && (f.find(".safetensors") != std::string::npos)) std::filesystem::remove(entry.path(), ec);
  }

  // Weights: one file, or N shards of consecutive tensors.
  const int n = options.shards;
  if (n == 1) {
    std::vector<const OutTensor*> all;
    for (const OutTensor& o : out) all.push_back(&o);
    TROUPE_RETURN_IF_ERROR(write_safetensors(dir + "/model.safetensors", all));
  } else {
    if (static_cast<size_t>(n) > out.size())
      return invalid_argument("--shards " + std::to_string(n) + " exceeds the " + std::to_string(out.size()) + " tensors");
    ojson index = {{"metadata", {{"total_size", total}}}, {"weight_map", ojson::object()}};
    const size_t m = out.size();
    for (int k = 0; k < n; ++k) {  // shard k: tensors [k*m/n, (k+1)*m/n), in file order
      char name[64];
      std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, n);
      std::vector<const OutTensor*> part;
      for (size_t i = k * m / static_cast<size_t>(n); i < (k + 1) * m / static_cast<size_t>(n); ++i) {
        part.push_back(&out[i]);
        index["weight_map"][out[i].name] = name;
      }
      TROUPE_RETURN_IF_ERROR(write_safetensors(dir + "/" + name, part));
    }
    TROUPE_RETURN_IF_ERROR(write_json(dir + "/model.safetensors.index.json", index));
  }

  // config.json as transformers writes it for this architecture.
  const int64_t bos = model.get_int("tokenizer.ggml.bos_token_id").value_or(-1);
  const int64_t eos = model.get_int("tokenizer.ggml.eos_token_id").value_or(-1);
  std::string model_type = s.arch;
  if (arch == "MistralForCausalLM") model_type = "mistral";
  if (s.arch == "gemma3") model_type = "gemma3_text";
  ojson c = {{"architectures", {arch}}, {"model_type", model_type}};
  c["hidden_size"] = s.n_embd;
  c["intermediate_size"] = s.n_ff;
  c["num_hidden_layers"] = s.n_layer;
  c["num_attention_heads"] = s.n_head;
  c["num_key_value_heads"] = s.n_head_kv;
  if (s.key_length > 0 || gemma) c["head_dim"] = hd;
  c["max_position_embeddings"] = s.n_ctx;
  c["rms_norm_eps"] = s.rms_eps;
  c["rope_theta"] = s.rope_theta;
  c["vocab_size"] = s.n_vocab;
  c["tie_word_embeddings"] = s.tied_embeddings;
  c[gemma ? "hidden_activation" : "hidden_act"] = gemma ? "gelu_pytorch_tanh" : "silu";
  c["torch_dtype"] = matrix_dtype == "F32" ? "float32" : matrix_dtype == "F16" ? "float16" : "bfloat16";
  if (bos >= 0) c["bos_token_id"] = bos;
  if (eos >= 0) c["eos_token_id"] = eos;
  if (s.llama3_rope.factor > 0)
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s.llama3_rope.factor},
                         {"low_freq_factor", s.llama3_rope.low_freq_factor},
                         {"high_freq_factor", s.llama3_rope.high_freq_factor},
                         {"original_max_position_embeddings", s.llama3_rope.original_context_length}};
  if (s.arch == "phi3") {
    if (s.sliding_window > 0) c["sliding_window"] = s.sliding_window;
    if (s.rope_original_context > 0) c["original_max_position_embeddings"] = s.rope_original_context;
    // Phi-3.5's long-context RoPE as its config.json has it: the GGUF's two factor tensors
    // as lists; transformers derives the attention factor from the two lengths.
    const WeightTensor* lf = model.tensor("rope_factors_long.weight");
    const WeightTensor* sf = model.tensor("rope_factors_short.weight");
    if (lf != nullptr && sf != nullptr)
      c["rope_scaling"] = {{"type", "longrope"}, {"long_factor", as_f32(*lf)}, {"short_factor", as_f32(*sf)}};
  }
  if (s.arch == "qwen2" || s.arch == "qwen3" || s.arch == "qwen3moe") c["use_sliding_window"] = false;
  if (s.moe()) {  // as transformers' Mixtral, Qwen3-MoE and OLMoE configs name them
    c[s.arch == "llama" ? "num_local_experts" : "num_experts"] = s.n_expert;
    c["num_experts_per_tok"] = s.n_expert_used;
    if (s.arch == "qwen3moe") {
      c["moe_intermediate_size"] = s.expert_ff();
      c["decoder_sparse_step"] = 1;
      c["mlp_only_layers"] = ojson::array();
    }
    if (s.arch != "llama") c["norm_topk_prob"] = s.arch == "qwen3moe";
  }
  if (gemma) {
    const std::string a = s.arch + ".";
    if (auto w = model.get_int(a + "attention.sliding_window")) c["sliding_window"] = *w;
    c["query_pre_attn_scalar"] = hd;
    if (s.arch == "gemma2") {
      c["attn_logit_softcapping"] = model.get_float(a + "attn_logit_softcapping").value_or(50.0);
      c["final_logit_softcapping"] = model.get_float(a + "final_logit_softcapping").value_or(30.0);
    } else {
      c["rope_local_base_freq"] = model.get_float(a + "rope.freq_base_swa").value_or(10000.0);
      c["sliding_window_pattern"] = model.get_int(a + "attention.sliding_window_pattern").value_or(6);
      c["final_logit_softcapping"] = nullptr;
      c["attn_logit_softcapping"] = nullptr;
    }
  }
  TROUPE_RETURN_IF_ERROR(write_json(dir + "/config.json", c));

  // tokenizer.json and tokenizer_config.json: the GGUF's tokenizer in its family's HF layout.
  auto tok = gguf::hf_tokenizer_files(model);
  if (!tok.ok()) return Status(tok.status().code(), "the tokenizer: " + tok.status().message());
  TROUPE_RETURN_IF_ERROR(tokenizer::write_hf_tokenizer_files(*tok, dir));

  ojson g = {{"_from_model_config", true}};
  if (bos >= 0) g["bos_token_id"] = bos;
  if (eos >= 0) g["eos_token_id"] = eos;
  for (const auto& [k, v] : options.generation_config.items()) g[k] = v;
  return write_json(dir + "/generation_config.json", g);
}

}  // namespace troupe::hf
