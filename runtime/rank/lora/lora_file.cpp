#include "runtime/rank/lora/lora_file.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "runtime/model_files/gguf/gguf_file.hpp"

namespace troupe::lora {
namespace {

constexpr double kMaxLoraAlpha = 65536;

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// An f32 copy of a 2-D tensor, or an error naming it.
Result<std::vector<float>> to_f32(const WeightTensor& t, const std::string& file) {
  if (t.n_dims != 2)
    return invalid_argument("LoRA adapter " + file + ": tensor " + t.name + " has " + std::to_string(t.n_dims) +
                            " dimensions, not 2");
  const auto n = static_cast<size_t>(t.ne[0] * t.ne[1]);
  std::vector<float> out(n);
  if (t.type == DType::f32) {
    std::memcpy(out.data(), t.data, n * sizeof(float));
  } else if (t.type == DType::f16 || t.type == DType::bf16) {
    const auto* src = static_cast<const uint16_t*>(t.data);
    for (size_t i = 0; i < n; ++i) {
      if (t.type == DType::f16) {
        out[i] = half_to_float(src[i]);
      } else {
        const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
        std::memcpy(&out[i], &bits, sizeof(float));
      }
    }
  } else {
    return invalid_argument("LoRA adapter " + file + ": tensor " + t.name + " is " + std::string(to_string(t.type)) +
                            "; adapters must be f32, f16 or bf16");
  }
  // One NaN or infinity would spread to every logit of every request using the adapter.
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(out[i]))
      return invalid_argument("LoRA adapter " + file + ": tensor " + t.name + " has a non-finite value (" +
                              std::to_string(out[i]) + ") at element " + std::to_string(i));
  return out;
}

WeightTensor view(const WeightTensor& from, const std::vector<float>& data) {
  WeightTensor t;
  t.name = from.name;
  t.type = DType::f32;
  t.n_dims = 2;
  t.ne[0] = from.ne[0];
  t.ne[1] = from.ne[1];
  t.data = data.data();
  t.nbytes = data.size() * sizeof(float);
  return t;
}

}  // namespace

Result<std::unique_ptr<LoraFile>> read_lora_file(const std::string& path) {
  std::error_code ec;
  const auto kind = std::filesystem::status(path, ec).type();
  if (kind == std::filesystem::file_type::not_found || (ec && kind == std::filesystem::file_type::none))
    return not_found("LoRA adapter " + path + ": no such file");
  if (kind == std::filesystem::file_type::directory)
    return invalid_argument("LoRA adapter " + path + " is a directory, not a GGUF file");
  if (kind != std::filesystem::file_type::regular)
    return invalid_argument("LoRA adapter " + path + " is not a regular file (a device, FIFO or socket)");
  auto opened = gguf::GgufFile::open(path);
  if (!opened.ok())
    return invalid_argument("LoRA adapter " + path + " is not a readable GGUF file: " + opened.status().message());
  const gguf::GgufFile& g = **opened;
  const std::string file = path;
  const auto type = g.get_string("general.type");
  if (type != "adapter")
    return invalid_argument("LoRA adapter " + file + ": general.type is " + (type ? "'" + *type + "'" : "missing") +
                            ", expected 'adapter' (a GGUF LoRA adapter from convert_lora_to_gguf.py)");
  const auto adapter_type = g.get_string("adapter.type");
  if (adapter_type != "lora")
    return invalid_argument("LoRA adapter " + file + ": adapter.type is " +
                            (adapter_type ? "'" + *adapter_type + "'" : "missing") + ", expected 'lora'");
  auto out = std::make_unique<LoraFile>();
  out->architecture = g.architecture();
  out->spec.path = path;
  const double alpha = g.get_float("adapter.lora.alpha").value_or(0.0);
  // Trained adapters have alpha of at most a few hundred; a huge one overflows the
  // activations as surely as a NaN does.
  if (!std::isfinite(alpha) || std::fabs(alpha) > kMaxLoraAlpha)
    return invalid_argument("LoRA adapter " + file + ": adapter.lora.alpha is " + std::to_string(alpha) +
                            ", outside -" + std::to_string(static_cast<int>(kMaxLoraAlpha)) + ".." +
                            std::to_string(static_cast<int>(kMaxLoraAlpha)));
  out->spec.alpha = static_cast<float>(alpha);
  // Pair X.lora_a with X.lora_b.
  std::map<std::string, std::pair<const WeightTensor*, const WeightTensor*>> pairs;
  for (const WeightTensor& t : g.tensors()) {
    const std::string& n = t.name;
    const bool a = n.size() > 7 && n.ends_with(".lora_a"), b = n.size() > 7 && n.ends_with(".lora_b");
    if (!a && !b)
      return invalid_argument("LoRA adapter " + file + ": tensor " + n +
                              " is neither <base tensor>.lora_a nor <base tensor>.lora_b");
    auto& p = pairs[n.substr(0, n.size() - 7)];
    (a ? p.first : p.second) = &t;
  }
  if (pairs.empty()) return invalid_argument("LoRA adapter " + file + " has no tensors");
  out->data.reserve(pairs.size() * 2);
  for (const auto& [base, p] : pairs) {
    if (p.first == nullptr || p.second == nullptr)
      return invalid_argument("LoRA adapter " + file + ": " + base + (p.first ? ".lora_b" : ".lora_a") +
                              " is missing (its pair " + base + (p.first ? ".lora_a" : ".lora_b") + " is there)");
    auto a = to_f32(*p.first, file);
    if (!a.ok()) return a.status();
    auto b = to_f32(*p.second, file);
    if (!b.ok()) return b.status();
    out->data.push_back(std::move(*a));
    const std::vector<float>& a_data = out->data.back();
    out->data.push_back(std::move(*b));
    const std::vector<float>& b_data = out->data.back();
    out->spec.targets.push_back(LoraTargetSpec{base, view(*p.first, a_data), view(*p.second, b_data)});
  }
  return out;
}

}  // namespace troupe::lora
