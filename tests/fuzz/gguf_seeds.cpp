// Writes small valid GGUF files (and a few near-misses) as the fuzzer's seed
// corpus, using the tests' writer so seeds cover every structure the reader knows.
#include <cstdio>
#include <string>
#include <vector>

#include "tests/runtime/model_files/gguf/gguf_writer.hpp"

using troupe::gguf::testing::GgufWriter;
namespace t = troupe::gguf::testing;

namespace {

bool save(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

GgufWriter base(uint32_t version) {
  GgufWriter w;
  w.version = version;
  w.kv_str("general.architecture", "llama");
  w.kv_u32("llama.block_count", 2);
  w.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.kv_bool("tokenizer.ggml.add_bos_token", true);
  w.kv_str_array("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
  w.kv_array<float>("tokenizer.ggml.scores", t::kF32, {0.f, -1.f, -2.f});
  w.kv_array<int32_t>("tokenizer.ggml.token_type", t::kI32, {2, 1, 1});
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  for (uint32_t v : {2u, 3u}) {
    GgufWriter w = base(v);
    w.tensor("token_embd.weight", 0, {4, 3});
    w.tensor("q8", 8, {32, 2});
    ok &= save(dir, "v" + std::to_string(v) + "_basic.gguf", w.build());
  }
  {
    GgufWriter w = base(3);
    const uint32_t types[] = {0, 1, 30, 8, 9, 2, 3, 6, 7, 12, 14, 15};
    for (uint32_t ty : types) {
      const uint64_t ne0 = (ty == 12 || ty == 14 || ty == 15) ? 256 : 32;
      w.tensor("t" + std::to_string(ty), ty, {ne0, 1});
    }
    w.tensor("cube", 0, {1, 2, 1, 2});
    ok &= save(dir, "all_types.gguf", w.build());
  }
  {
    GgufWriter w = base(3);
    w.alignment = 64;
    w.kv_u32("general.alignment", 64);
    w.kv_u64("u64", 1ull << 40);
    w.kv_i64("i64", -5);
    w.kv_f64("f64", 0.25);
    w.kv_u8("u8", 1);
    w.kv_i8("i8", -1);
    w.kv_u16("u16", 2);
    w.kv_i16("i16", -2);
    w.kv_i32("i32", -3);
    t::Bytes& nested = w.kv_raw("nested", t::kArr);
    nested.u32(t::kArr);
    nested.u64(1);
    nested.u32(t::kU8);
    nested.u64(2);
    nested.u8(1);
    nested.u8(2);
    w.tensor("a", 0, {8});
    w.tensor("b", 1, {16});
    ok &= save(dir, "aligned64.gguf", w.build());
  }
  ok &= save(dir, "vocab_only.gguf", base(3).build());
  {
    GgufWriter w = base(1);  // refused version
    ok &= save(dir, "v1.gguf", w.build());
  }
  if (!ok) {
    std::fprintf(stderr, "gguf_seeds: cannot write seeds to %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
