// Builds safetensors files in memory for tests and fuzz seeds: valid files
// from a list of tensors, or raw files from any header text and data bytes.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace troupe::safetensors::testing {

struct SafetensorsWriter {
  struct Tensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, std::string> metadata;
  std::vector<Tensor> tensors;  // laid out in this order
  size_t header_align = 8;      // pad the JSON with spaces to this multiple (1: no padding)

  SafetensorsWriter& add(std::string name, std::string dtype, std::vector<int64_t> shape,
                         std::vector<uint8_t> bytes) {
    tensors.push_back({std::move(name), std::move(dtype), std::move(shape), std::move(bytes)});
    return *this;
  }
  SafetensorsWriter& add_f32(std::string name, std::vector<int64_t> shape, const std::vector<float>& values) {
    std::vector<uint8_t> bytes(values.size() * 4);
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return add(std::move(name), "F32", std::move(shape), std::move(bytes));
  }
  /// `count` elements of `elem_bytes` each, filled with a byte pattern.
  SafetensorsWriter& add_filled(std::string name, std::string dtype, std::vector<int64_t> shape, size_t elem_bytes) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<uint8_t> bytes(n * elem_bytes);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
    return add(std::move(name), std::move(dtype), std::move(shape), std::move(bytes));
  }

  nlohmann::ordered_json header() const {
    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    if (!metadata.empty()) h["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const Tensor& t : tensors) {
      h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
      offset += t.bytes.size();
    }
    return h;
  }

  std::vector<uint8_t> data() const {
    std::vector<uint8_t> d;
    for (const Tensor& t : tensors) d.insert(d.end(), t.bytes.begin(), t.bytes.end());
    return d;
  }

  std::vector<uint8_t> build() const { return raw(header().dump(), data(), std::nullopt, header_align); }

  /// A file with this header text and data; `length` overrides the 8-byte header length.
  static std::vector<uint8_t> raw(std::string header_text, const std::vector<uint8_t>& data,
                                  std::optional<uint64_t> length = std::nullopt, size_t align = 1) {
    while (align > 1 && header_text.size() % align != 0) header_text += ' ';
    const uint64_t n = length.value_or(header_text.size());
    // One allocation, filled in place (g++ 12 warns, wrongly, on inserts into an 8-byte vector).
    std::vector<uint8_t> out(8 + header_text.size() + data.size());
    std::memcpy(out.data(), &n, 8);
    std::copy(header_text.begin(), header_text.end(), out.begin() + 8);
    std::copy(data.begin(), data.end(), out.begin() + 8 + static_cast<std::ptrdiff_t>(header_text.size()));
    return out;
  }
};

}  // namespace troupe::safetensors::testing
