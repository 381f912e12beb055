#include "runtime/rank/lora/lora_writer.hpp"

#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/lora/lora_file.hpp"

namespace troupe::lora {
namespace {

// Every metadata entry of `g` into `b` (scalars keep their kind; integer arrays become int32).
Status copy_metadata(const gguf::GgufFile& g, gguf::GgufBuilder& b, const std::string& path) {
  using gguf::ValueType;
  for (const std::string& key : g.keys()) {
    const auto type = g.type_of(key);
    if (!type) continue;
    switch (*type) {
      case ValueType::string: b.set_string(key, *g.get_string(key)); break;
      case ValueType::boolean: b.set_bool(key, *g.get_bool(key)); break;
      case ValueType::float32:
      case ValueType::float64: b.set_f32(key, static_cast<float>(*g.get_float(key))); break;
      case ValueType::uint64:
      case ValueType::int64: b.set_u64(key, static_cast<uint64_t>(*g.get_int(key))); break;
      case ValueType::array:
        if (auto s = g.get_string_array(key)) b.set_string_array(key, std::move(*s));
        else if (auto f = g.get_float_array(key)) b.set_f32_array(key, std::move(*f));
        else if (auto i = g.get_int_array(key)) b.set_i32_array(key, std::vector<int32_t>(i->begin(), i->end()));
        else return invalid_argument(path + ": metadata array " + key + " has an element type this tool cannot copy");
        break;
      default: b.set_u32(key, static_cast<uint32_t>(*g.get_int(key))); break;
    }
  }
  return {};
}

// A tensor added to `b` whose rows are copied from `src` (packed rows of row_bytes).
Status add_copy(gguf::GgufBuilder& b, const WeightTensor& t, const void* src) {
  const int64_t rows = t.n_dims >= 2 ? t.rows() : 0;
  const uint64_t row_bytes = t.nbytes / static_cast<uint64_t>(std::max<int64_t>(1, t.rows()));
  const auto* base = static_cast<const uint8_t*>(src);
  return b.add_tensor(t.name, t.type, t.ne[0], rows, [base, row_bytes](uint8_t* dst, int64_t begin, int64_t end) {
    std::memcpy(dst, base + static_cast<uint64_t>(begin) * row_bytes, static_cast<uint64_t>(end - begin) * row_bytes);
  });
}

}  // namespace

Result<int64_t> write_random_lora(const std::string& base_path, const RandomLoraOptions& o, const std::string& out_path) {
  if (o.rank < 1) return invalid_argument("the rank of a LoRA adapter must be at least 1");
  auto opened = gguf::GgufFile::open(base_path);
  if (!opened.ok()) return opened.status();
  const gguf::GgufFile& g = **opened;
  std::vector<std::string> kinds = o.kinds;
  if (kinds.empty()) kinds = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  gguf::GgufBuilder b;
  b.set_string("general.architecture", g.architecture());
  b.set_string("general.type", "adapter");
  b.set_string("adapter.type", "lora");
  b.set_f32("adapter.lora.alpha", o.alpha);
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<float> normal(0.0f, o.stddev);
  auto random = [&](int64_t n) {
    auto v = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
    for (float& x : *v) x = normal(rng);
    return v;
  };
  auto add = [&b](const std::string& name, int64_t ne0, int64_t ne1, std::shared_ptr<std::vector<float>> v) {
    return b.add_tensor(name, DType::f32, ne0, ne1, [v, ne0](uint8_t* dst, int64_t begin, int64_t end) {
      std::memcpy(dst, v->data() + begin * ne0, static_cast<size_t>((end - begin) * ne0) * sizeof(float));
    });
  };
  int64_t count = 0;
  for (int layer = 0;; ++layer) {
    bool any = false;
    for (const std::string& kind : kinds) {
      const std::string name = "blk." + std::to_string(layer) + "." + kind + ".weight";
      const WeightTensor* w = g.tensor(name);
      if (w == nullptr) continue;
      any = true;
      if (o.mergeable && (w->type != DType::f32 || w->n_dims != 2))
        return invalid_argument(base_path + ": " + name + " is " + std::string(to_string(w->type)) +
                                "; --merged-output merges only into f32 matrices (an f32 copy of the model: "
                                "troupe make-gguf --weight-type f32, or llama-quantize ... F32); nothing was written");
      const int64_t in = w->ne[0], out = w->rows();
      TROUPE_RETURN_IF_ERROR(add(name + ".lora_a", in, o.rank, random(in * o.rank)));
      TROUPE_RETURN_IF_ERROR(add(name + ".lora_b", o.rank, out, random(o.rank * out)));
      ++count;
    }
    if (!any) break;
  }
  if (count == 0) return invalid_argument(base_path + " has none of the tensors blk.N.{" + kinds.front() + ",...}.weight");
  TROUPE_RETURN_IF_ERROR(b.write_file(out_path));
  return count;
}

Status write_merged_model(const std::string& base_path, const std::string& adapter_path, const std::string& out_path) {
  auto opened = gguf::GgufFile::open(base_path);
  if (!opened.ok()) return opened.status();
  const gguf::GgufFile& g = **opened;
  auto adapter = read_lora_file(adapter_path);
  if (!adapter.ok()) return adapter.status();
  std::map<std::string, const LoraTargetSpec*> targets;
  for (const LoraTargetSpec& t : (*adapter)->spec.targets) targets[t.base_name] = &t;
  gguf::GgufBuilder b;
  TROUPE_RETURN_IF_ERROR(copy_metadata(g, b, base_path));
  std::vector<std::shared_ptr<std::vector<float>>> merged_data;
  for (const WeightTensor& w : g.tensors()) {
    auto it = targets.find(w.name);
    if (it == targets.end()) {
      TROUPE_RETURN_IF_ERROR(add_copy(b, w, w.data));
      continue;
    }
    const LoraTargetSpec& t = *it->second;
    if (w.type != DType::f32 || w.n_dims != 2)
      return invalid_argument(base_path + ": " + w.name + " is not a 2-D f32 matrix; only those can be merged");
    const int64_t in = w.ne[0], out = w.ne[1], rank = t.a.ne[1];
    if (t.a.ne[0] != in || t.b.ne[1] != out || t.b.ne[0] != rank)
      return invalid_argument(adapter_path + ": the shapes of " + w.name + "'s lora_a/lora_b do not fit it");
    const float alpha = (*adapter)->spec.alpha;
    const float scale = alpha != 0 ? alpha / static_cast<float>(rank) : 1.0f;
    auto m = std::make_shared<std::vector<float>>(static_cast<size_t>(in * out));
    std::memcpy(m->data(), w.data, m->size() * sizeof(float));
    const auto* A = static_cast<const float*>(t.a.data);  // [rank][in]
    const auto* B = static_cast<const float*>(t.b.data);  // [out][rank]
    for (int64_t o = 0; o < out; ++o)
      for (int64_t r = 0; r < rank; ++r) {
        const float s = scale * B[o * rank + r];
        float* row = m->data() + o * in;
        for (int64_t i = 0; i < in; ++i) row[i] += s * A[r * in + i];
      }
    WeightTensor packed = w;
    packed.nbytes = m->size() * sizeof(float);
    TROUPE_RETURN_IF_ERROR(add_copy(b, packed, m->data()));
    merged_data.push_back(std::move(m));
    targets.erase(it);
  }
  if (!targets.empty())
    return invalid_argument(adapter_path + ": " + targets.begin()->first + " is not a tensor of " + base_path);
  return b.write_file(out_path);
}

}  // namespace troupe::lora
