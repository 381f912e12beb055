// Writes small safetensors files (valid ones and near-misses) as the fuzzer's
// seed corpus, using the tests' writer.
#include <cstdio>
#include <string>
#include <vector>

#include "tests/runtime/model_files/safetensors/safetensors_writer.hpp"

using troupe::safetensors::testing::SafetensorsWriter;

namespace {

bool save(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  {
    // The shape of a BERT checkpoint, shrunk.
    SafetensorsWriter w;
    w.metadata["format"] = "pt";
    w.add_filled("embeddings.position_ids", "I64", {1, 4}, 8);
    w.add_filled("embeddings.word_embeddings.weight", "F32", {6, 4}, 4);
    w.add_filled("embeddings.LayerNorm.weight", "F32", {4}, 4);
    w.add_filled("encoder.layer.0.attention.self.query.weight", "F32", {4, 4}, 4);
    w.add_filled("pooler.dense.bias", "F32", {4}, 4);
    ok &= save(dir, "bert.safetensors", w.build());
  }
  {
    SafetensorsWriter w;
    const char* dtypes[] = {"F32", "F16", "BF16", "F64", "I64", "U64", "I32", "U32", "I16", "U16",
                            "I8",  "U8",  "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0", "C64"};
    const int bytes[] = {4, 2, 2, 8, 8, 8, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1, 8};
    for (size_t i = 0; i < std::size(dtypes); ++i) w.add_filled(std::string("t_") + dtypes[i], dtypes[i], {2, 1}, bytes[i]);
    w.add_filled("f4", "F4", {2}, 0);
    w.tensors.back().bytes.assign(1, 0x21);
    w.add_filled("scalar", "F32", {}, 4);
    w.add_filled("empty", "F16", {0, 5}, 2);
    w.add_filled("cube", "BF16", {1, 2, 1, 2}, 2);
    w.add_filled("five", "F32", {1, 1, 1, 1, 2}, 4);
    ok &= save(dir, "all_dtypes.safetensors", w.build());
  }
  {
    SafetensorsWriter w;
    w.header_align = 1;
    w.add_f32("x", {3}, {1, 2, 3});
    ok &= save(dir, "unaligned.safetensors", w.build());
  }
  ok &= save(dir, "empty.safetensors", SafetensorsWriter::raw("{}", {}));
  ok &= save(dir, "metadata_only.safetensors", SafetensorsWriter::raw(R"({"__metadata__":{"a":"b","c":"d"}})", {}));
  ok &= save(dir, "overlap.safetensors",
             SafetensorsWriter::raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    std::vector<uint8_t>(12, 1)));
  ok &= save(dir, "escapes.safetensors",
             SafetensorsWriter::raw(R"({"\u00e9\ud83e\udd99":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                                    std::vector<uint8_t>(1, 7)));
  return ok ? 0 : 1;
}
