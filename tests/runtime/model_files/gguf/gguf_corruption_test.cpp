// Every way a GGUF file can lie: each must give a clear error (data_loss, or
// not_supported for a real ggml type whose layout troupe does not know) and
// never crash or over-read. Whether a known type can be computed is not the
// reader's question: Platform::verify_quantization answers it.
// Run under ASan (the fuzzer does) to make "never over-read" hard evidence.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/model_files/gguf/gguf_file.hpp"
#include "tests/runtime/model_files/gguf/gguf_writer.hpp"

namespace troupe::gguf {
namespace {

using testing::Bytes;
using testing::GgufWriter;

/// A small valid file touching every structure: scalars, strings, arrays, tensors.
GgufWriter small_writer() {
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.kv_u32("llama.block_count", 2);
  w.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.kv_bool("tokenizer.ggml.add_bos_token", true);
  w.kv_str_array("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
  w.kv_array<int32_t>("tokenizer.ggml.token_type", testing::kI32, {2, 1, 1});
  w.tensor("token_embd.weight", 0, {4, 3});
  w.tensor("q", static_cast<uint32_t>(DType::q8_0), {32, 2});
  return w;
}

/// Parses `bytes` in a buffer of exactly that size (so ASan sees any over-read).
Status parse(const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> exact(bytes);
  exact.shrink_to_fit();
  auto r = GgufFile::from_memory(exact.empty() ? nullptr : exact.data(), exact.size());
  return r.ok() ? Status() : r.status();
}

/// Expects a data_loss whose message contains every one of `needles`.
void expect_data_loss(const std::vector<uint8_t>& bytes, std::initializer_list<std::string> needles) {
  Status st = parse(bytes);
  ASSERT_FALSE(st.ok()) << "accepted a corrupt file";
  EXPECT_EQ(st.code(), StatusCode::data_loss) << st.to_string();
  EXPECT_NE(st.message().find("GGUF byte "), std::string::npos) << st.message();  // says where
  for (const std::string& n : needles) EXPECT_NE(st.message().find(n), std::string::npos) << st.message();
}

TEST(GgufCorruption, SmallFileIsValid) {
  GgufWriter w = small_writer();
  auto bytes = w.build();
  Status st = parse(bytes);
  EXPECT_TRUE(st.ok()) << st.to_string();
}

TEST(GgufCorruption, TruncationAtEveryByte) {
  GgufWriter w = small_writer();
  auto bytes = w.build();
  ASSERT_GT(bytes.size(), 200u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    Status st = parse(cut);
    ASSERT_FALSE(st.ok()) << "accepted a file cut at " << n << " of " << bytes.size();
    EXPECT_EQ(st.code(), StatusCode::data_loss) << n << ": " << st.to_string();
  }
}

TEST(GgufCorruption, TruncatedStories) {
  // The real model cut inside its vocabulary, its tensor infos and its data.
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf", std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 1185376u);
  for (size_t n : {size_t{24}, size_t{100}, size_t{5000}, size_t{12000}, size_t{14000}, size_t{100000},
                   bytes.size() - 1}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    Status st = parse(cut);
    EXPECT_EQ(st.code(), StatusCode::data_loss) << n << ": " << st.to_string();
  }
}

TEST(GgufCorruption, WrongMagic) {
  auto bytes = small_writer().build();
  bytes[0] = 'G';
  bytes[3] = 'L';
  expect_data_loss(bytes, {"magic", "GGUL"});
  expect_data_loss({'G', 'G'}, {"magic"});
  expect_data_loss({}, {"magic"});
}

TEST(GgufCorruption, Versions) {
  for (uint32_t v : {0u, 1u, 4u, 99u, 0x03000000u}) {
    GgufWriter w = small_writer();
    w.version = v;
    Status st = parse(w.build());
    ASSERT_FALSE(st.ok()) << v;
    EXPECT_EQ(st.code(), StatusCode::data_loss);
    EXPECT_NE(st.message().find("version"), std::string::npos) << st.message();
  }
  GgufWriter v1 = small_writer();
  v1.version = 1;
  expect_data_loss(v1.build(), {"version 1 is not supported"});
  GgufWriter v99 = small_writer();
  v99.version = 99;
  expect_data_loss(v99.build(), {"unsupported GGUF version 99"});
  GgufWriter be = small_writer();
  be.version = 0x03000000u;  // version 3 written big-endian
  expect_data_loss(be.build(), {"big-endian"});
}

TEST(GgufCorruption, HugeCounts) {
  for (uint64_t n : {uint64_t{1} << 62, ~uint64_t{0}, uint64_t{1000000}}) {
    GgufWriter t = small_writer();
    t.tensor_count_override = n;
    expect_data_loss(t.build(), {"tensor count"});
    GgufWriter k = small_writer();
    k.kv_count_override = n;
    expect_data_loss(k.build(), {"metadata count"});
  }
  // Counts that fit the bytes but are larger than the entries present.
  GgufWriter k = small_writer();
  k.kv_count_override = 7;
  EXPECT_EQ(parse(k.build()).code(), StatusCode::data_loss);
  GgufWriter t = small_writer();
  t.tensor_count_override = 3;
  EXPECT_EQ(parse(t.build()).code(), StatusCode::data_loss);
}

TEST(GgufCorruption, HugeStringLengths) {
  GgufWriter w = small_writer();
  auto bytes = w.build();
  const auto layout = w.layout();
  for (uint64_t len : {~uint64_t{0}, uint64_t{1} << 63, uint64_t{bytes.size()}}) {
    auto key = bytes;  // a key's length
    std::memcpy(key.data() + layout.kv_start[1], &len, 8);
    expect_data_loss(key, {"length", "key of metadata entry 1", std::to_string(len)});
    auto name = bytes;  // a tensor name's length
    std::memcpy(name.data() + layout.tensor_start[1], &len, 8);
    expect_data_loss(name, {"name of tensor 1"});
  }
  // A string value and a string inside an array.
  GgufWriter s;
  s.kv_raw("general.name", testing::kStr).u64(1ull << 40);
  expect_data_loss(s.build(), {"'general.name'", "1099511627776"});
  GgufWriter a;
  Bytes& raw = a.kv_raw("tokens", testing::kArr);
  raw.u32(testing::kStr);
  raw.u64(2);
  raw.str("ok");
  raw.u64(~0ull);
  expect_data_loss(a.build(), {"element 1 of key 'tokens'"});
}

TEST(GgufCorruption, HugeArrayCounts) {
  for (uint32_t elem : {testing::kU8, testing::kF32, testing::kU64, testing::kStr, testing::kArr}) {
    GgufWriter w;
    Bytes& raw = w.kv_raw("big", testing::kArr);
    raw.u32(elem);
    raw.u64(1ull << 61);
    raw.u64(0);
    expect_data_loss(w.build(), {"'big'", "2305843009213693952"});
  }
}

TEST(GgufCorruption, BadValueTypes) {
  GgufWriter w;
  w.kv_raw("odd", 13).u32(0);
  expect_data_loss(w.build(), {"unknown value type 13", "'odd'"});
  GgufWriter a;
  Bytes& raw = a.kv_raw("odd_elems", testing::kArr);
  raw.u32(0xffffffffu);
  raw.u64(1);
  expect_data_loss(a.build(), {"unknown value type 4294967295"});
}

TEST(GgufCorruption, NestedArrays) {
  // One level of nesting (an array of arrays of scalars) is readable...
  GgufWriter ok;
  Bytes& r = ok.kv_raw("pairs", testing::kArr);
  r.u32(testing::kArr);
  r.u64(2);
  for (int i = 0; i < 2; ++i) {
    r.u32(testing::kU32);
    r.u64(2);
    r.u32(1);
    r.u32(2);
  }
  ok.kv_u32("after", 7);
  auto bytes = ok.build();
  auto f = GgufFile::from_memory(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f.value()->type_of("pairs"), ValueType::array);
  EXPECT_FALSE(f.value()->get_int_array("pairs").has_value());
  EXPECT_EQ(f.value()->get_int("after"), 7);

  // ...deeper nesting is refused, and a self-similar chain cannot recurse without bound.
  GgufWriter deep;
  Bytes& d = deep.kv_raw("deep", testing::kArr);
  for (int i = 0; i < 100000; ++i) {
    d.u32(testing::kArr);
    d.u64(1);
  }
  d.u32(testing::kU8);
  d.u64(0);
  expect_data_loss(deep.build(), {"nests arrays", "'deep'"});
}

TEST(GgufCorruption, DuplicateKey) {
  GgufWriter w = small_writer();
  w.kv_u32("llama.block_count", 3);
  expect_data_loss(w.build(), {"duplicate metadata key 'llama.block_count'"});
}

TEST(GgufCorruption, DuplicateTensorName) {
  GgufWriter w = small_writer();
  w.tensor("q", 0, {4});
  expect_data_loss(w.build(), {"duplicate tensor 'q'"});
}

TEST(GgufCorruption, NDims) {
  for (size_t dims : {size_t{0}, size_t{5}}) {
    GgufWriter w = small_writer();
    w.tensor("bad", 0, std::vector<uint64_t>(dims, 2), std::nullopt, 64);
    expect_data_loss(w.build(), {"'bad' has n_dims " + std::to_string(dims)});
  }
  GgufWriter w = small_writer();
  auto bytes = w.build();
  uint32_t huge = 0xffffffffu;
  std::memcpy(bytes.data() + w.layout().tensor_n_dims[0], &huge, 4);
  expect_data_loss(bytes, {"n_dims 4294967295"});
}

TEST(GgufCorruption, ShapeValues) {
  GgufWriter zero = small_writer();
  zero.tensor("z", 0, {4, 0}, std::nullopt, 0);
  expect_data_loss(zero.build(), {"'z' has ne[1] = 0"});
  GgufWriter neg = small_writer();
  neg.tensor("n", 0, {~0ull}, std::nullopt, 0);
  expect_data_loss(neg.build(), {"'n' has ne[0] = 18446744073709551615"});
  GgufWriter overflow = small_writer();  // each dim fits int64, the product does not
  overflow.tensor("o", 0, {1ull << 32, 1ull << 32}, std::nullopt, 0);
  expect_data_loss(overflow.build(), {"'o' has more elements than fit in 64 bits"});
  GgufWriter bytes_overflow = small_writer();  // elements fit, bytes do not
  bytes_overflow.tensor("b", 0, {1ull << 31, 1ull << 31}, std::nullopt, 0);
  expect_data_loss(bytes_overflow.build(), {"'b' is larger than 2^63 bytes"});
  GgufWriter block = small_writer();
  block.tensor("blk", static_cast<uint32_t>(DType::q4_k), {128, 2}, std::nullopt, 0);
  expect_data_loss(block.build(), {"'blk' has ne[0] = 128, not a multiple of the 256-element blocks of q4_k"});
}

TEST(GgufCorruption, UnknownAndUnsupportedTypes) {
  GgufWriter unknown = small_writer();
  unknown.tensor("u", 1000, {4}, std::nullopt, 16);
  expect_data_loss(unknown.build(), {"'u' has unknown ggml type id 1000"});
  // Real ggml types whose storage layout troupe does not know: not_supported, naming
  // where, the type id and the tensor.
  for (uint32_t id : {16u, 17u, 19u, 21u, 28u}) {
    GgufWriter w = small_writer();
    w.tensor("x", id, {256}, std::nullopt, 1024);
    Status st = parse(w.build());
    ASSERT_FALSE(st.ok()) << id;
    EXPECT_EQ(st.code(), StatusCode::not_supported) << st.to_string();
    EXPECT_NE(st.message().find("GGUF byte "), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("'x'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("id " + std::to_string(id)), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("storage layout"), std::string::npos) << st.message();
  }
  GgufWriter iq2 = small_writer();
  iq2.tensor("x", 16, {256}, std::nullopt, 1024);
  const std::string msg = parse(iq2.build()).message();
  EXPECT_NE(msg.find("iq2_xxs"), std::string::npos) << msg;
  // The list of known layouts is read from dtype_traits, q8_k included.
  EXPECT_NE(msg.find("q8_k"), std::string::npos) << msg;
}

// q8_1 and q8_k have a known layout: the reader accepts them (no CPU kernel reads them
// as weights, which is the platform's refusal, not the reader's) but checks their sizes
// exactly as any other type's.
TEST(GgufCorruption, LayoutKnownTypesAreReadAndStillValidated) {
  for (DType t : {DType::q8_1, DType::q8_k}) {
    SCOPED_TRACE(std::string(to_string(t)));
    const auto id = static_cast<uint32_t>(t);
    const uint64_t block = static_cast<uint64_t>(traits(t).block_elems);
    GgufWriter ok = small_writer();
    ok.tensor("w", id, {block * 2, 3});
    Status st = parse(ok.build());
    EXPECT_TRUE(st.ok()) << st.to_string();
    GgufWriter partial = small_writer();
    partial.tensor("w", id, {block / 2, 3}, std::nullopt, 0);
    expect_data_loss(partial.build(), {"'w' has ne[0] = " + std::to_string(block / 2),
                                       std::to_string(block) + "-element blocks of " + std::string(to_string(t))});
    GgufWriter past_end = small_writer();  // the data section is one block short
    past_end.tensor("w", id, {block * 2, 3});
    auto bytes = past_end.build();
    bytes.resize(bytes.size() - static_cast<size_t>(traits(t).block_bytes));
    EXPECT_EQ(parse(bytes).code(), StatusCode::data_loss) << parse(bytes).to_string();
  }
}

TEST(GgufCorruption, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u, 0x80000000u}) {
    GgufWriter w = small_writer();
    w.kv_u32("general.alignment", a);
    expect_data_loss(w.build(), {"general.alignment", std::to_string(a)});
  }
  GgufWriter s = small_writer();
  s.kv_str("general.alignment", "32");
  expect_data_loss(s.build(), {"general.alignment", "string"});
  GgufWriter neg = small_writer();
  neg.kv_i64("general.alignment", -32);
  expect_data_loss(neg.build(), {"general.alignment", "-32"});
}

TEST(GgufCorruption, MisalignedOffset) {
  GgufWriter w = small_writer();
  w.tensor("m", 0, {4}, 40);
  expect_data_loss(w.build(), {"'m' has data offset 40, not a multiple of the alignment 32"});
}

TEST(GgufCorruption, OffsetPastEnd) {
  for (uint64_t off : {uint64_t{4096}, ~uint64_t{0} & ~uint64_t{31}, uint64_t{1} << 63}) {
    GgufWriter w = small_writer();
    w.tensor("far", 0, {4}, off);
    expect_data_loss(w.build(), {"'far' spans data bytes [" + std::to_string(off)});
  }
  // The last tensor's end one byte past the file.
  GgufWriter w = small_writer();
  auto bytes = w.build();
  bytes.pop_back();
  expect_data_loss(bytes, {"'q' spans data bytes"});
  // Data section itself starts past the end (tensor infos end unaligned at EOF).
  GgufWriter only_infos;
  only_infos.tensor("t", 0, {1});
  auto b = only_infos.build();
  b.resize(only_infos.layout().data_start - 1);
  expect_data_loss(b, {"data section would start at byte"});
}

TEST(GgufCorruption, OverlappingTensors) {
  GgufWriter w = small_writer();
  w.tensor("alias", 0, {4}, 0);  // same bytes as token_embd.weight
  expect_data_loss(w.build(), {"overlaps"});
}

TEST(GgufCorruption, MessagesStayPrintable) {
  GgufWriter w = small_writer();
  w.kv_u32(std::string("bad\x01\xff", 5), 1);
  w.kv_u32(std::string("bad\x01\xff", 5), 2);
  Status st = parse(w.build());
  ASSERT_EQ(st.code(), StatusCode::data_loss);
  EXPECT_NE(st.message().find("'bad\\x01\\xff'"), std::string::npos) << st.message();
}

TEST(GgufCorruption, EveryByteFlipStaysSafe) {
  // Not a proof, but cheap: flip each byte of the small file; parsing must
  // answer (ok or an error) without crashing, and accepted files stay in bounds.
  GgufWriter w = small_writer();
  const auto bytes = w.build();
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t x : {uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x01}}) {
      auto m = bytes;
      m[i] ^= x;
      m.shrink_to_fit();
      auto r = GgufFile::from_memory(m.data(), m.size());
      if (!r.ok()) continue;
      for (const WeightTensor& t : r.value()->tensors()) {
        const auto* p = static_cast<const uint8_t*>(t.data);
        ASSERT_GE(p, m.data());
        ASSERT_LE(p + t.nbytes, m.data() + m.size());
      }
    }
  }
}

}  // namespace
}  // namespace troupe::gguf
