// counting_custom_op: overrides three ops of the model's forward pass with
// wrappers that count their calls and delegate to the platform's Ops, so the
// output stays identical while the counts prove the overrides ran. At exit the
// counts go to the file named by COUNTING_CUSTOM_OP_FILE (when set).
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "troupe/named_ops/custom_ops.hpp"
#include "troupe/plugin.hpp"

namespace {

using namespace troupe::custom_ops;

std::atomic<long> rms_norm_calls{0}, rope_calls{0}, silu_calls{0};

void counting_rms_norm(troupe::Ops& ops, const float* x, const float* w, int64_t n, int64_t dim, float eps,
                       float* out) {
  ++rms_norm_calls;
  RmsNorm::native(ops, x, w, n, dim, eps, out);
}

void counting_rope(troupe::Ops& ops, float* x, const int32_t* pos, int64_t n, int heads, int head_dim, float theta,
                   bool neox) {
  ++rope_calls;
  RotaryEmbedding::native(ops, x, pos, n, heads, head_dim, theta, neox);
}

void counting_silu_and_mul(troupe::Ops& ops, const float* gate, const float* up, int64_t n, float* out) {
  ++silu_calls;
  SiluAndMul::native(ops, gate, up, n, out);
}

void write_counts() {
  const char* path = std::getenv("COUNTING_CUSTOM_OP_FILE");
  if (path == nullptr || *path == '\0') return;
  if (std::FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "rms_norm %ld\nrotary_embedding %ld\nsilu_and_mul %ld\n", rms_norm_calls.load(),
                 rope_calls.load(), silu_calls.load());
    std::fclose(f);
  }
}

troupe::Status register_counting_ops() {
  register_oot<RmsNorm>(&counting_rms_norm);
  register_oot<RotaryEmbedding>(&counting_rope);
  register_oot<SiluAndMul>(&counting_silu_and_mul);
  static const bool once = [] { return std::atexit(&write_counts) == 0; }();  // registration may run twice
  if (!once) return troupe::internal_error("counting_custom_op: cannot register its exit report");
  return {};
}

}  // namespace

TROUPE_PLUGIN(troupe::general_plugin("counting_custom_op", &register_counting_ops))
