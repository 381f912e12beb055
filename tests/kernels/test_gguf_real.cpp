// Real weights: dequantize rows of SmolLM2's Q4_1 and Q8_0 tensors (env
// TROUPE_TEST_MODEL = path of SmolLM2-135M-Instruct.Q4_1.gguf; skipped when
// unset). A minimal GGUF walk keeps this test independent of runtime/.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/quantize.hpp"

namespace troupe::kernels::cpu {
namespace {

struct TensorInfo {
  std::vector<uint64_t> dims;
  uint32_t type = 0;
  uint64_t offset = 0;
};

class Reader {
 public:
  explicit Reader(const std::string& path) : f_(path, std::ios::binary) {}
  bool ok() const { return static_cast<bool>(f_); }
  template <class T>
  T get() {
    T v{};
    f_.read(reinterpret_cast<char*>(&v), sizeof(T));
    return v;
  }
  std::string str() {
    const auto n = get<uint64_t>();
    std::string s(n, '\0');
    f_.read(s.data(), static_cast<std::streamsize>(n));
    return s;
  }
  // Skips a metadata value, returning it as an integer when it is one.
  uint64_t value(uint32_t type) {
    switch (type) {
      case 0: case 1: case 7: return get<uint8_t>();
      case 2: case 3: return get<uint16_t>();
      case 4: case 5: case 6: return get<uint32_t>();
      case 10: case 11: case 12: return get<uint64_t>();
      case 8: str(); return 0;
      case 9: {
        const auto et = get<uint32_t>();
        const auto n = get<uint64_t>();
        for (uint64_t i = 0; i < n; ++i) value(et);
        return 0;
      }
      default: ADD_FAILURE() << "bad metadata type " << type; return 0;
    }
  }
  uint64_t pos() { return static_cast<uint64_t>(f_.tellg()); }
  std::vector<uint8_t> bytes(uint64_t at, uint64_t n) {
    std::vector<uint8_t> b(n);
    f_.seekg(static_cast<std::streamoff>(at));
    f_.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(n));
    return b;
  }

 private:
  std::ifstream f_;
};

class RealModel : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("TROUPE_TEST_MODEL");
    if (path == nullptr || *path == '\0') GTEST_SKIP() << "TROUPE_TEST_MODEL not set";
    reader_ = std::make_unique<Reader>(path);
    ASSERT_TRUE(reader_->ok()) << path;
    ASSERT_EQ(reader_->get<uint32_t>(), 0x46554747u) << "not a GGUF file";
    ASSERT_GE(reader_->get<uint32_t>(), 2u);
    const auto n_tensors = reader_->get<uint64_t>();
    const auto n_kv = reader_->get<uint64_t>();
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < n_kv; ++i) {
      const std::string key = reader_->str();
      const uint64_t v = reader_->value(reader_->get<uint32_t>());
      if (key == "general.alignment") alignment = v;
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
      const std::string name = reader_->str();
      TensorInfo t;
      t.dims.resize(reader_->get<uint32_t>());
      for (auto& d : t.dims) d = reader_->get<uint64_t>();
      t.type = reader_->get<uint32_t>();
      t.offset = reader_->get<uint64_t>();
      tensors_[name] = t;
    }
    data_start_ = (reader_->pos() + alignment - 1) / alignment * alignment;
  }

  // Rows [0, rows) of a 2-D tensor: raw bytes, and the row width.
  std::vector<uint8_t> rows(const std::string& name, DType want, int64_t n_rows, int64_t* in) {
    auto it = tensors_.find(name);
    EXPECT_NE(it, tensors_.end()) << name;
    if (it == tensors_.end()) return {};
    EXPECT_EQ(it->second.type, static_cast<uint32_t>(want)) << name;
    *in = static_cast<int64_t>(it->second.dims[0]);
    return reader_->bytes(data_start_ + it->second.offset, static_cast<uint64_t>(row_bytes(want, *in) * n_rows));
  }

  void check_rows(const std::string& name, DType type) {
    int64_t in = 0;
    const int64_t n_rows = 8;
    const auto raw = rows(name, type, n_rows, &in);
    ASSERT_FALSE(raw.empty());
    const int64_t rb = row_bytes(type, in);
    std::vector<float> w(static_cast<size_t>(in * n_rows));
    for (int64_t r = 0; r < n_rows; ++r) dequantize_row(type, raw.data() + r * rb, w.data() + r * in, in);
    double sum = 0, sq = 0;
    for (float v : w) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v, sq += double(v) * v;
    }
    const double n = static_cast<double>(w.size());
    const double mean = sum / n, rms = std::sqrt(sq / n);
    EXPECT_GT(rms, 1e-3) << name;  // trained weights: small, centred, not degenerate
    EXPECT_LT(rms, 2.0) << name;
    EXPECT_LT(std::fabs(mean), rms) << name;

    // Re-quantizing values that already lie on the file's grid is nearly lossless
    // when our layout matches the file's.
    std::vector<uint8_t> again(static_cast<size_t>(rb));
    std::vector<float> back(static_cast<size_t>(in));
    double err = 0;
    for (int64_t r = 0; r < n_rows; ++r) {
      quantize_row_reference(type, w.data() + r * in, again.data(), in);
      dequantize_row(type, again.data(), back.data(), in);
      for (int64_t i = 0; i < in; ++i) err += std::pow(back[i] - w[r * in + i], 2);
    }
    EXPECT_LT(std::sqrt(err / n), 0.02 * rms) << name;

    // And the fast matmul agrees with the dequantized rows.
    std::vector<float> x(static_cast<size_t>(in * 2));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i));
    std::vector<float> y(static_cast<size_t>(2 * n_rows));
    ThreadPool pool(2);
    matmul(type, raw.data(), in, n_rows, x.data(), 2, y.data(), &pool);
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t r = 0; r < n_rows; ++r) {
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < in; ++i) {
          ref += double(w[r * in + i]) * x[t * in + i];
          mag += std::fabs(double(w[r * in + i]) * x[t * in + i]);
        }
        EXPECT_NEAR(y[t * n_rows + r], ref, 0.01 * mag) << name << " row " << r;
      }
  }

  std::unique_ptr<Reader> reader_;
  std::map<std::string, TensorInfo> tensors_;
  uint64_t data_start_ = 0;
};

TEST_F(RealModel, Q4_1FeedForwardRows) { check_rows("blk.0.ffn_down.weight", DType::q4_1); }
TEST_F(RealModel, Q4_1AttentionRows) { check_rows("blk.7.attn_q.weight", DType::q4_1); }
TEST_F(RealModel, Q8_0EmbeddingRows) { check_rows("token_embd.weight", DType::q8_0); }

}  // namespace
}  // namespace troupe::kernels::cpu
