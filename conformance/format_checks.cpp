// The weight formats plugins add (troupe/quantization.hpp): the target's matmul of each
// against the computation the format itself defines, independent of any platform: its
// reference dequantize_row, then the matmul in double on the host. Weights are random
// f32 rows through the format's quantize_row. A platform with no kernel for a format
// reports it "not offered" with the platform's own reason (Ops::check_weight_type).
#include <string>
#include <vector>

#include "conformance/check_util.hpp"
#include "conformance/random_data.hpp"
#include "troupe/quantization.hpp"

namespace troupe::conformance {

namespace {

std::string shape_text(int64_t in, int64_t out, int64_t tokens, int64_t stride) {
  return "in=" + std::to_string(in) + " out=" + std::to_string(out) + " tokens=" + std::to_string(tokens) +
         " row_stride=" + std::to_string(stride);
}

// y = x W^T with W's rows dequantized by the format's reference, summed in double.
std::vector<float> reference_matmul(const WeightFormat& f, const std::vector<uint8_t>& w, int64_t stride, int64_t in,
                                    int64_t out, const std::vector<float>& x, int64_t tokens) {
  std::vector<float> row(static_cast<size_t>(in)), y(static_cast<size_t>(tokens * out));
  for (int64_t o = 0; o < out; ++o) {
    f.dequantize_row(w.data() + o * stride, in, row.data());
    for (int64_t t = 0; t < tokens; ++t) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i)
        s += static_cast<double>(row[static_cast<size_t>(i)]) * x[static_cast<size_t>(t * in + i)];
      y[static_cast<size_t>(t * out + o)] = static_cast<float>(s);
    }
  }
  return y;
}

Result<std::vector<float>> target_matmul(Session& s, DType id, const std::vector<uint8_t>& w, int64_t stride,
                                         int64_t in, int64_t out, const std::vector<float>& x, int64_t tokens) {
  CONFORMANCE_ASSIGN(wd, s.put(w.data(), static_cast<int64_t>(w.size())));
  CONFORMANCE_ASSIGN(xd, s.put(x));
  CONFORMANCE_ASSIGN(y, s.scratch(tokens * out * 4));
  WeightTensor wt;
  wt.name = "conformance";
  wt.type = id;
  wt.n_dims = 2;
  wt.ne[0] = in;
  wt.ne[1] = out;
  wt.data = wd;
  wt.nbytes = w.size();
  wt.row_stride = stride;
  s.ops().matmul(wt, xd, tokens, static_cast<float*>(y));
  return s.get(static_cast<float*>(y), tokens * out);
}

}  // namespace

void check_weight_formats(Session& target, const Options& options, Rng& rng, Report* report) {
  if (!selected(options, "ops", "matmul")) return;
  for (const WeightFormat* f : weight_formats::all()) {
    if (weight_formats::is_builtin(f->id))
      continue;  // the GGUF types: the matmul checks against the reference platform
    CaseResult base;
    base.group = "ops";
    base.op = "matmul";
    base.dtype = f->name;
    base.tolerance = kF32Tolerance;  // f32 activations against the same dequantized weights
    if (f->quantize_row == nullptr) {
      report->notes.push_back("weight format " + f->name + " is not checked: it has no quantize_row to make weights");
      continue;
    }
    if (Status s = target.ops().check_weight_type(f->id); !s.ok()) {
      CaseResult c = base;
      c.outcome = Outcome::not_offered;
      c.detail = s.message();
      report->cases.push_back(std::move(c));
      continue;
    }
    struct Shape {
      int64_t in, out, tokens, pad;
    };
    const int64_t b = f->block_elems;
    std::vector<Shape> shapes = {
        {32 * b, 1, 1, 0}, {64 * b, 7, 1, 0}, {128 * b, 33, 5, 0}, {64 * b, 64, 17, 0}, {64 * b, 5, 2, 64}};
    if (b == 1) shapes.push_back({33, 5, 3, 0});  // a row that is not a multiple of any vector width
    for (const Shape& sh : shapes) {
      const int64_t packed = row_bytes(f->id, sh.in);
      const int64_t stride = sh.pad > 0 ? packed + sh.pad : packed;
      std::vector<uint8_t> w(static_cast<size_t>(stride * sh.out), 0);
      for (int64_t o = 0; o < sh.out; ++o) {
        const auto values = random_floats(rng, sh.in);
        f->quantize_row(values.data(), sh.in, w.data() + o * stride);
      }
      const auto x = random_floats(rng, sh.tokens * sh.in);
      CaseResult c = base;
      c.shape = shape_text(sh.in, sh.out, sh.tokens, sh.pad > 0 ? stride : 0);
      const auto want = reference_matmul(*f, w, stride, sh.in, sh.out, x, sh.tokens);
      auto got = target_matmul(target, f->id, w, sh.pad > 0 ? stride : 0, sh.in, sh.out, x, sh.tokens);
      target.clear();
      if (!got.ok()) {
        c.outcome = Outcome::fail;
        c.detail = got.status().to_string();
      } else {
        int64_t at = -1;
        c.worst_error = normalized_error(*got, want, &at);
        c.outcome = c.worst_error <= c.tolerance ? Outcome::pass : Outcome::fail;
        c.detail = "against " + f->name + "'s reference dequantization and an f64 matmul";
        if (at >= 0 && got->size() == want.size())
          c.detail += "; worst at output " + std::to_string(at) + ": got " +
                      std::to_string((*got)[static_cast<size_t>(at)]) + ", reference " +
                      std::to_string(want[static_cast<size_t>(at)]);
      }
      report->cases.push_back(std::move(c));
    }
  }
}

}  // namespace troupe::conformance
