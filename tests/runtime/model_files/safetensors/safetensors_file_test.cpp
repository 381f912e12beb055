// The safetensors reader: valid files from the test writer, every kind of
// corruption (each must give a data_loss naming what is wrong, never a crash),
// and the real all-MiniLM-L6-v2 weights when TROUPE_MINILM_DIR is set.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/model_files/safetensors/safetensors_file.hpp"
#include "safetensors_writer.hpp"

namespace troupe::safetensors {
namespace {

using testing::SafetensorsWriter;

Result<std::unique_ptr<SafetensorsFile>> parse(const std::vector<uint8_t>& bytes) {
  return SafetensorsFile::from_memory(bytes.data(), bytes.size(), "test.safetensors");
}

/// Parses `bytes`, expects a failure with `code` whose message contains every fragment.
void expect_error(const std::vector<uint8_t>& bytes, StatusCode code, std::vector<std::string> fragments) {
  auto r = parse(bytes);
  ASSERT_FALSE(r.ok()) << "parsed a corrupt file";
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  fragments.push_back("test.safetensors: ");
  for (const std::string& f : fragments) {
    EXPECT_NE(r.status().message().find(f), std::string::npos)
        << "message '" << r.status().message() << "' lacks '" << f << "'";
  }
}

std::vector<uint8_t> with_header(const std::string& header, size_t data_bytes = 16) {
  return SafetensorsWriter::raw(header, std::vector<uint8_t>(data_bytes, 0));
}

SafetensorsWriter sample() {
  SafetensorsWriter w;
  w.metadata["format"] = "pt";
  w.add_f32("linear.weight", {3, 2}, {1, 2, 3, 4, 5, 6});  // [out=3, in=2]
  w.add("half", "F16", {4}, {0x00, 0x3c, 0x00, 0x40, 0x00, 0x42, 0x00, 0x44});  // 1, 2, 3, 4
  w.add("brain", "BF16", {2, 1, 1}, {0x80, 0x3f, 0x00, 0x40});                     // 1, 2
  w.add("ids", "I64", {1, 2}, std::vector<uint8_t>(16, 0));
  w.add_f32("scale", {}, {0.5f});
  return w;
}

TEST(SafetensorsFile, ReadsTensorsShapesAndData) {
  const auto bytes = sample().build();
  auto r = parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const SafetensorsFile& f = **r;
  EXPECT_EQ(f.file_size(), bytes.size());
  EXPECT_EQ(f.header_bytes() % 8, 0u);
  EXPECT_EQ(f.data_bytes(), 24u + 8 + 4 + 16 + 4);
  EXPECT_EQ(f.entries().size(), 5u);
  ASSERT_EQ(f.tensors().size(), 4u);  // ids (I64) is not usable

  const WeightTensor* w = f.tensor("linear.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->type, DType::f32);
  EXPECT_EQ(w->n_dims, 2);
  EXPECT_EQ(w->ne[0], 2);  // in: the fastest dimension
  EXPECT_EQ(w->ne[1], 3);  // out
  EXPECT_EQ(w->nbytes, 24u);
  EXPECT_EQ(w->rows(), 3);
  const auto* v = static_cast<const float*>(w->data);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[5], 6.0f);
  EXPECT_EQ(static_cast<const uint8_t*>(w->data), bytes.data() + 8 + f.header_bytes());

  const WeightTensor* h = f.tensor("half");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type, DType::f16);
  EXPECT_EQ(h->ne[0], 4);
  const WeightTensor* b = f.tensor("brain");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, DType::bf16);
  EXPECT_EQ(b->n_dims, 3);
  EXPECT_EQ(b->ne[0], 1);
  EXPECT_EQ(b->ne[1], 1);
  EXPECT_EQ(b->ne[2], 2);
  const WeightTensor* s = f.tensor("scale");  // a scalar
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->n_dims, 1);
  EXPECT_EQ(s->ne[0], 1);
  EXPECT_EQ(*static_cast<const float*>(s->data), 0.5f);

  // File order (by data offset); every entry points at its WeightTensor.
  std::vector<std::string> names;
  for (const TensorEntry& e : f.entries()) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"linear.weight", "half", "brain", "ids", "scale"}));
  for (const TensorEntry& e : f.entries()) {
    if (e.weight_index >= 0) {
      EXPECT_EQ(&f.tensors()[e.weight_index], f.tensor(e.name));
    }
  }
  ASSERT_EQ(f.metadata().size(), 1u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
}

TEST(SafetensorsFile, UnsupportedDtypeIsRefusedByName) {
  const auto bytes = sample().build();
  auto r = parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->tensor("ids"), nullptr);
  const TensorEntry* e = (*r)->entry("ids");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, "I64");
  EXPECT_EQ(e->shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(e->weight_index, -1);
  auto ids = (*r)->require_tensor("ids");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), StatusCode::not_supported);
  EXPECT_NE(ids.status().message().find("test.safetensors: tensor 'ids' has dtype I64"), std::string::npos)
      << ids.status().message();
  auto missing = (*r)->require_tensor("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
  EXPECT_NE(missing.status().message().find("'nope'"), std::string::npos);
  auto ok = (*r)->require_tensor("half");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (*r)->tensor("half"));
}

TEST(SafetensorsFile, ShapesTroupeCannotUseAreListedNotFatal) {
  SafetensorsWriter w;
  w.add_filled("five_dims", "F32", {1, 1, 2, 1, 1}, 4);
  w.add_filled("empty", "F32", {0, 3}, 4);
  w.add_filled("f8", "F8_E4M3", {4}, 1);
  w.add_filled("nibbles", "F4", {4}, 0);  // 4 x 4 bits
  w.tensors.back().bytes.assign(2, 0x11);
  w.add_filled("future", "Q9_Z", {3}, 1);  // unknown dtype: size cannot be checked
  w.add_filled("ok", "F32", {2}, 4);
  const auto bytes = w.build();
  auto r = parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->entries().size(), 6u);
  ASSERT_EQ((*r)->tensors().size(), 1u);
  EXPECT_EQ((*r)->tensors()[0].name, "ok");
  struct Case {
    const char* name;
    const char* fragment;
  };
  for (const Case& c : {Case{"five_dims", "5 dimensions"}, Case{"empty", "a dimension is 0"},
                        Case{"f8", "dtype F8_E4M3"}, Case{"nibbles", "dtype F4"}, Case{"future", "'Q9_Z'"}}) {
    auto t = (*r)->require_tensor(c.name);
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_EQ(t.status().code(), StatusCode::not_supported);
    EXPECT_NE(t.status().message().find(c.fragment), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find(c.name), std::string::npos) << t.status().message();
  }
}

TEST(SafetensorsFile, EmptyHeaderAndUnpaddedHeaderAreValid) {
  auto r = parse(SafetensorsWriter::raw("{}", {}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE((*r)->tensors().empty());
  SafetensorsWriter w;
  w.header_align = 1;
  w.add_f32("x", {1}, {2.0f});
  const auto unpadded = w.build();  // from_memory: the buffer must outlive the file
  auto r2 = parse(unpadded);
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  ASSERT_NE((*r2)->tensor("x"), nullptr);
  float x = 0;
  std::memcpy(&x, (*r2)->tensor("x")->data, 4);  // may be unaligned: copy
  EXPECT_EQ(x, 2.0f);
  // Trailing bytes after the last tensor and gaps between tensors are tolerated.
  auto padded = w.build();
  padded.resize(padded.size() + 100, 0);
  EXPECT_TRUE(parse(padded).ok());
}

TEST(SafetensorsCorruption, TruncatedHeaderLength) {
  expect_error({1, 2, 3}, StatusCode::data_loss, {"byte 0", "inside the 8-byte header length"});
  expect_error({}, StatusCode::data_loss, {"byte 0"});
}

TEST(SafetensorsCorruption, HeaderLengthPastTheFile) {
  expect_error(SafetensorsWriter::raw("{}", {}, 3), StatusCode::data_loss,
               {"byte 0", "header length 3 runs past the end of the file (10 bytes)"});
  expect_error(SafetensorsWriter::raw("{}", {}, 200'000'000), StatusCode::data_loss,
               {"byte 0", "exceeds the limit"});
  expect_error(SafetensorsWriter::raw("{}", {}, ~0ull), StatusCode::data_loss, {"byte 0"});
  // A truncated file: the header claims more than is left.
  auto bytes = sample().build();
  const uint64_t n = bytes.size();
  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + 40);
  (void)n;
  expect_error(cut, StatusCode::data_loss, {"runs past the end of the file (40 bytes)"});
}

TEST(SafetensorsCorruption, DataTruncated) {
  auto bytes = sample().build();
  bytes.resize(bytes.size() - 3);
  expect_error(bytes, StatusCode::data_loss, {"tensor 'scale'", "but the data section holds"});
}

TEST(SafetensorsCorruption, BadJson) {
  expect_error(with_header("{\"a\": "), StatusCode::data_loss, {"byte 14", "not valid JSON"});
  expect_error(with_header("{\"a\" 1}"), StatusCode::data_loss, {"byte 13", "not valid JSON"});
  expect_error(with_header("{} trailing"), StatusCode::data_loss, {"byte 13", "not valid JSON: parse error at line 1, column 6", "last read: '{} tra'"});
  expect_error(with_header(std::string("{\"\xff\": 1}")), StatusCode::data_loss, {"not valid JSON"});
  expect_error(with_header(std::string("\0\0", 2)), StatusCode::data_loss, {"byte 8", "not valid JSON"});
  expect_error(with_header(""), StatusCode::data_loss, {"not valid JSON"});
}

TEST(SafetensorsCorruption, WrongTypes) {
  expect_error(with_header("[1, 2]"), StatusCode::data_loss, {"byte 8", "header is a JSON array, expected an object"});
  expect_error(with_header(R"({"t": 5})"), StatusCode::data_loss, {"tensor 't' is a JSON number"});
  expect_error(with_header(R"({"t": {"shape": [1], "data_offsets": [0, 4]}})"), StatusCode::data_loss,
               {"tensor 't' has no \"dtype\""});
  expect_error(with_header(R"({"t": {"dtype": 1, "shape": [1], "data_offsets": [0, 4]}})"), StatusCode::data_loss,
               {"\"dtype\" that is not a string"});
  expect_error(with_header(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})"), StatusCode::data_loss,
               {"tensor 't' has no \"shape\""});
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": 4, "data_offsets": [0, 4]}})"), StatusCode::data_loss,
               {"\"shape\" that is not an array"});
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})"),
               StatusCode::data_loss, {"shape[0] = -1"});
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})"),
               StatusCode::data_loss, {"shape[0] = 1.5"});
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": [1, "2"], "data_offsets": [0, 4]}})"),
               StatusCode::data_loss, {"shape[1] = a JSON string"});
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": [1]}})"), StatusCode::data_loss,
               {"no \"data_offsets\""});
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})"),
               StatusCode::data_loss, {"not an array [begin, end]"});
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, -4]}})"),
               StatusCode::data_loss, {"data_offsets [0, -4]"});
  expect_error(with_header(R"({"__metadata__": [1]})"), StatusCode::data_loss, {"__metadata__ is a JSON array"});
  // Non-string metadata values are skipped, not fatal.
  auto r = parse(with_header(R"({"__metadata__": {"a": "b", "n": 1}})"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->metadata().size(), 1u);
}

TEST(SafetensorsCorruption, OffsetsPastTheEnd) {
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})", 16),
               StatusCode::data_loss, {"tensor 't' has data_offsets [8, 24] but the data section holds 16 bytes"});
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 16),
               StatusCode::data_loss, {"begin is after end"});
  expect_error(
      with_header(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551615, 4]}})", 16),
      StatusCode::data_loss, {"expected two integers"});
}

TEST(SafetensorsCorruption, SizeMismatch) {
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})", 16),
               StatusCode::data_loss, {"tensor 't' (F32, shape [2, 2]) needs 16 bytes but its data_offsets [0, 12] span 12"});
  expect_error(with_header(R"({"t": {"dtype": "I64", "shape": [3], "data_offsets": [0, 16]}})", 16),
               StatusCode::data_loss, {"needs 24 bytes"});
  expect_error(with_header(R"({"t": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}})", 16),
               StatusCode::data_loss, {"not a whole number of bytes"});
  expect_error(with_header(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})",
                           16),
               StatusCode::data_loss, {"more elements than fit in 64 bits"});
  expect_error(with_header(R"({"t": {"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 16]}})",
                           16),
               StatusCode::data_loss, {"larger than 2^64 bits"});
}

TEST(SafetensorsCorruption, OverlappingTensors) {
  expect_error(with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                           16),
               StatusCode::data_loss, {"byte ", "tensor 'b'", "overlaps tensor 'a'"});
  // Empty tensors overlap nothing.
  auto r = parse(with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                  "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
                             16));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
}

TEST(SafetensorsCorruption, EveryPrefixAndByteFlipIsHandled) {
  // No crash and a message for every truncation and every single-byte corruption.
  const auto good = sample().build();
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<ptrdiff_t>(n));
    auto r = parse(cut);
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t x : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      auto bad = good;
      bad[i] ^= x;
      auto r = parse(bad);
      if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
    }
  }
}

TEST(SafetensorsFile, OpenNamesThePath) {
  auto missing = SafetensorsFile::open("/nonexistent/model.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
  EXPECT_NE(missing.status().message().find("/nonexistent/model.safetensors"), std::string::npos);

  const std::string path = ::testing::TempDir() + "safetensors_test_" + std::to_string(getpid()) + ".safetensors";
  {
    auto bytes = sample().build();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
  }
  auto r = SafetensorsFile::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->name(), path);
  ASSERT_NE((*r)->tensor("linear.weight"), nullptr);
  EXPECT_EQ(static_cast<const float*>((*r)->tensor("linear.weight")->data)[2], 3.0f);
  {
    std::ofstream(path, std::ios::binary) << "{\"not\": \"safetensors\"}";
  }
  auto bad = SafetensorsFile::open(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::data_loss);
  EXPECT_EQ(bad.status().message().rfind(path + ": safetensors byte 0:", 0), 0u) << bad.status().message();
  std::remove(path.c_str());
}

TEST(SafetensorsFile, RealMiniLm) {
  const char* dir = std::getenv("TROUPE_MINILM_DIR");
  if (dir == nullptr || *dir == '\0') GTEST_SKIP() << "TROUPE_MINILM_DIR is not set (scripts/fetch-model.sh all-MiniLM-L6-v2)";
  auto r = SafetensorsFile::open(std::string(dir) + "/model.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const SafetensorsFile& f = **r;
  // 103 F32 weights (embeddings 5, 6 layers x 16, pooler 2) and the I64 position_ids buffer.
  EXPECT_EQ(f.entries().size(), 104u);
  EXPECT_EQ(f.tensors().size(), 103u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.data_bytes(), 90856960u);
  const WeightTensor* emb = f.tensor("embeddings.word_embeddings.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::f32);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(emb->ne[0], 384);
  EXPECT_EQ(emb->ne[1], 30522);
  EXPECT_EQ(emb->nbytes, 384u * 30522u * 4u);
  const auto* e = static_cast<const float*>(emb->data);
  EXPECT_EQ(e[0], -0.019989013671875f);
  EXPECT_EQ(e[384 * 7592 + 5], 0.10515915602445602f);  // row of "hello"
  const WeightTensor* ln = f.tensor("embeddings.LayerNorm.weight");
  ASSERT_NE(ln, nullptr);
  EXPECT_EQ(ln->n_dims, 1);
  EXPECT_EQ(ln->ne[0], 384);
  const WeightTensor* ff = f.tensor("encoder.layer.5.intermediate.dense.weight");  // [1536, 384]
  ASSERT_NE(ff, nullptr);
  EXPECT_EQ(ff->ne[0], 384);
  EXPECT_EQ(ff->ne[1], 1536);
  auto pos = f.require_tensor("embeddings.position_ids");
  ASSERT_FALSE(pos.ok());
  EXPECT_EQ(pos.status().code(), StatusCode::not_supported);
  for (const WeightTensor& t : f.tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 4, 0u) << t.name;
  }
}

}  // namespace
}  // namespace troupe::safetensors
