#include "runtime/model_files/source/quantizing_source.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace troupe::engine {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class QuantizingSource final : public ModelSource {
 public:
  QuantizingSource(std::unique_ptr<ModelSource> base, const WeightFormat& method)
      : base_(std::move(base)), method_(method) {}

  std::string architecture() const override { return base_->architecture(); }
  std::optional<int64_t> get_int(std::string_view key) const override { return base_->get_int(key); }
  std::optional<double> get_float(std::string_view key) const override { return base_->get_float(key); }
  std::optional<std::string> get_string(std::string_view key) const override { return base_->get_string(key); }
  // The converted copies stay resident; the file's pages (what the model no longer reads) go.
  Status release_pages() const override { return base_->release_pages(); }

  const WeightTensor* tensor(std::string_view name) const override {
    const WeightTensor* t = base_->tensor(name);
    if (t == nullptr || !converts_at_load(method_, *t)) return t;
    std::lock_guard lock(mu_);
    auto it = converted_.find(name);
    if (it != converted_.end()) return &it->second.tensor;
    Converted c = convert(*t);
    if (c.data == nullptr) return t;  // no memory for the copy: the model reads the original
    return &converted_.emplace(std::string(name), std::move(c)).first->second.tensor;
  }

 private:
  struct Converted {
    WeightTensor tensor;
    std::unique_ptr<void, FreeDeleter> data;
  };

  Converted convert(const WeightTensor& t) const {
    const WeightFormat* from = weight_formats::find(t.type);
    const int64_t n = t.ne[0], rows = t.rows();
    const int64_t out_row = row_bytes(method_.id, n);
    const int64_t in_row = t.row_stride > 0 ? t.row_stride : row_bytes(t.type, n);
    Converted c;
    const auto bytes = static_cast<size_t>((out_row * rows + 63) / 64 * 64);
    c.data.reset(std::aligned_alloc(64, bytes));
    if (c.data == nullptr || from == nullptr || from->dequantize_row == nullptr) return Converted{};
    std::vector<float> row(static_cast<size_t>(n));
    auto* dst = static_cast<uint8_t*>(c.data.get());
    const auto* src = static_cast<const uint8_t*>(t.data);
    for (int64_t r = 0; r < rows; ++r) {
      from->dequantize_row(src + r * in_row, n, row.data());
      method_.quantize_row(row.data(), n, dst + r * out_row);
    }
    c.tensor = t;
    c.tensor.type = method_.id;
    c.tensor.data = c.data.get();
    c.tensor.nbytes = static_cast<uint64_t>(out_row * rows);
    c.tensor.row_stride = 0;
    return c;
  }

  std::unique_ptr<ModelSource> base_;
  const WeightFormat& method_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Converted, std::less<>> converted_;
};

}  // namespace

bool converts_at_load(const WeightFormat& method, const WeightTensor& t) {
  if (t.n_dims != 2 || t.data == nullptr) return false;
  if (t.type != DType::f16 && t.type != DType::bf16 && t.type != DType::f32) return false;
  // Embedding tables are read by row, not multiplied; the output head stays as vLLM leaves lm_head.
  if (t.name.find("embd") != std::string::npos || t.name == "output.weight") return false;
  return row_bytes(method.id, t.ne[0]) > 0;
}

Result<std::unique_ptr<ModelSource>> quantize_at_load(std::unique_ptr<ModelSource> base, const WeightFormat& method) {
  if (method.quantize_row == nullptr)
    return invalid_argument("weight format " + method.name + " is not a load-time quantization method");
  if (!base) return invalid_argument("quantize_at_load: no model source");
  return std::unique_ptr<ModelSource>(new QuantizingSource(std::move(base), method));
}

const WeightFormat* load_time_method(std::string_view quantization) {
  const WeightFormat* f = weight_formats::find(quantization);
  return f != nullptr && f->quantize_row != nullptr ? f : nullptr;
}

}  // namespace troupe::engine
