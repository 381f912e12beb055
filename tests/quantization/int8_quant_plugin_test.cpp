// The example quantization plugin (examples/int8_quant) end to end. stories260K (a real,
// trained model) stored as f16 runs with --quantization int8_channel: its matrices become
// per-channel int8 as the worker loads them and the plugin's CPU kernel multiplies them.
// References, both computed here:
//  - the "twin": the same file with each converted matrix replaced by the f32 values the
//    int8 rows stand for (quantized independently in this test: scale = max|w| / 127,
//    q = round(w / scale)). Only the kernels' arithmetic differs, so with an f32 KV cache
//    the logits agree to f32 rounding.
//  - the f16 model itself: the quantization error, which per-channel int8 keeps small.
// Through the CLI: generate with the method, an unknown method listing the registered
// ones, a platform without the kernel declining in one line, and platform-check.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/fp16.hpp"
#include "plugin_host/plugin_host.hpp"
#include "runtime/config/engine_config.hpp"
#include "runtime/core/generation/offline_generator.hpp"
#include "runtime/model_files/gguf/gguf_builder.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "tests/platforms/greedy_steps.hpp"
#include "tests/run_troupe.hpp"
#include "troupe/quantization.hpp"

namespace troupe {
namespace {

using kernels::cpu::fp16_to_fp32;
using kernels::cpu::fp32_to_fp16;

// The CPU platform and the int8_quant plugin, loaded by a plugin host as troupe does.
Platform* cpu_with_int8_plugin() {
  static plugin_host::PluginHost host([] {
    plugin_host::HostOptions o;
    o.plugin_dirs = {std::string(TROUPE_BINARY_DIR) + "/lib/troupe/plugins", INT8_PLUGIN_DIR};
    o.builtin_dirs = {o.plugin_dirs.front()};
    return o;
  }());
  host.load_all();
  auto p = host.activate_platform();
  return p.ok() && (*p)->device_type() == "cpu" ? *p : nullptr;
}

void copy_metadata(const gguf::GgufFile& from, gguf::GgufBuilder& to) {
  for (const std::string& key : from.keys()) {
    switch (*from.type_of(key)) {
      case gguf::ValueType::string:
        to.set_string(key, *from.get_string(key));
        break;
      case gguf::ValueType::float32:
        to.set_f32(key, static_cast<float>(*from.get_float(key)));
        break;
      case gguf::ValueType::boolean:
        to.set_bool(key, *from.get_bool(key));
        break;
      case gguf::ValueType::uint64:
        to.set_u64(key, static_cast<uint64_t>(*from.get_int(key)));
        break;
      case gguf::ValueType::array:
        if (auto s = from.get_string_array(key)) {
          to.set_string_array(key, *s);
        } else if (auto f = from.get_float_array(key)) {
          to.set_f32_array(key, *f);
        } else if (auto i = from.get_int_array(key)) {
          to.set_i32_array(key, std::vector<int32_t>(i->begin(), i->end()));
        }
        break;
      default:
        to.set_u32(key, static_cast<uint32_t>(*from.get_int(key)));
        break;
    }
  }
}

// Which matrices the method converts: 2-D, not an embedding table, not the output head.
bool converted(const WeightTensor& t) {
  return t.n_dims == 2 && t.name.find("embd") == std::string::npos && t.name != "output.weight";
}

// Per-channel symmetric int8 of one row, as the f32 values it stands for (independent of the plugin).
void int8_round_trip(std::vector<float>& row) {
  float amax = 0;
  for (float v : row) amax = std::max(amax, std::fabs(v));
  const float scale = amax / 127.0f;
  for (float& v : row) v = scale > 0 ? std::clamp(std::round(v / scale), -127.0f, 127.0f) * scale : 0.0f;
}

struct Files {
  std::string f16, twin;
  int converted = 0;
};

// stories260K with its matrices in f16 (1-D tensors stay f32), and its int8 twin.
Files write_models() {
  Files out;
  auto file = gguf::GgufFile::open(std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf");
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return out;
  const gguf::GgufFile& src = **file;
  gguf::GgufBuilder f16, twin;
  copy_metadata(src, f16);
  copy_metadata(src, twin);
  for (const WeightTensor& t : src.tensors()) {
    EXPECT_EQ(t.type, DType::f32) << t.name;
    const int64_t ne0 = t.ne[0], rows = t.n_dims == 1 ? 0 : t.rows();
    const auto* f = static_cast<const float*>(t.data);
    if (rows == 0) {
      for (gguf::GgufBuilder* b : {&f16, &twin})
        EXPECT_TRUE(b->add_tensor(t.name, DType::f32, ne0, 0, [=](uint8_t* dst, int64_t, int64_t) {
                       std::copy(f, f + ne0, reinterpret_cast<float*>(dst));
                     }).ok());
      continue;
    }
    auto fill_f16 = [=](uint8_t* dst, int64_t b, int64_t e) {
      auto* h = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = b * ne0; i < e * ne0; ++i) h[i - b * ne0] = fp32_to_fp16(f[i]);
    };
    EXPECT_TRUE(f16.add_tensor(t.name, DType::f16, ne0, rows, fill_f16).ok());
    if (!converted(t)) {
      EXPECT_TRUE(twin.add_tensor(t.name, DType::f16, ne0, rows, fill_f16).ok());
      continue;
    }
    ++out.converted;
    EXPECT_TRUE(twin.add_tensor(t.name, DType::f32, ne0, rows,
                                [=](uint8_t* dst, int64_t b, int64_t e) {
                                  std::vector<float> row(static_cast<size_t>(ne0));
                                  for (int64_t r = b; r < e; ++r) {
                                    for (int64_t i = 0; i < ne0; ++i)
                                      row[static_cast<size_t>(i)] = fp16_to_fp32(fp32_to_fp16(f[r * ne0 + i]));
                                    int8_round_trip(row);
                                    std::copy(row.begin(), row.end(), reinterpret_cast<float*>(dst) + (r - b) * ne0);
                                  }
                                })
                    .ok());
  }
  const std::string base = "/tmp/troupe_int8_quant_" + std::to_string(::getpid());
  out.f16 = base + "_f16.gguf";
  out.twin = base + "_twin.gguf";
  EXPECT_TRUE(f16.write_file(out.f16).ok());
  EXPECT_TRUE(twin.write_file(out.twin).ok());
  return out;
}

const Files& models() {
  static const Files f = write_models();
  static const struct Remove {
    const Files& f;
    ~Remove() {
      std::remove(f.f16.c_str());
      std::remove(f.twin.c_str());
    }
  } remove{f};
  return f;
}

using Steps = testing::GreedySteps;

// Logits after the prompt and after each of 6 greedy steps (teacher-forced on `forced`
// when given, else on the model's own argmax), and the argmax of each.
// kv_f32: an f32 KV cache, so that two computations equal up to f32 rounding stay so (with
// the f16 cache a value near an f16 rounding boundary may land one f16 step, 2^-11, apart).
Steps run(const std::string& path, const std::string& quantization, const std::vector<int32_t>& prompt,
          const std::vector<int32_t>* forced, bool kv_f32 = false) {
  Steps out;
  Platform* platform = cpu_with_int8_plugin();
  EXPECT_NE(platform, nullptr);
  if (!platform) return out;
  EngineConfig config;
  config.parallel.num_threads = 2;
  config.model.max_model_len = 64;
  config.model.quantization = quantization;
  if (kv_f32) config.cache.cache_dtype = "float32";
  auto gen = generation::OfflineGenerator::create(*platform, config, path);
  EXPECT_TRUE(gen.ok()) << gen.status().to_string();
  if (!gen.ok()) return out;
  return testing::greedy_steps(**gen, prompt, forced);
}

// Largest |a - b| over the steps, and the largest |b| (the logit range).
std::pair<double, double> worst_and_spread(const Steps& a, const Steps& b, size_t s) {
  double worst = 0, spread = 0;
  for (size_t v = 0; v < b.logits[s].size(); ++v) {
    spread = std::max(spread, std::fabs(static_cast<double>(b.logits[s][v])));
    worst = std::max(worst, std::fabs(static_cast<double>(a.logits[s][v]) - b.logits[s][v]));
  }
  return {worst, spread};
}

const std::vector<std::vector<int32_t>> kPrompts = {
    {1, 72, 101, 108, 108, 111, 300, 17}, {1, 400, 33, 250, 9}, {1, 260, 261, 262, 263, 264, 265, 266, 267, 268}};

TEST(Int8QuantPlugin, TheMethodIsRegisteredWithItsCpuKernel) {
  ASSERT_NE(cpu_with_int8_plugin(), nullptr);
  const WeightFormat* f = weight_formats::find("int8_channel");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->quantize_row, nullptr);
  EXPECT_EQ(f->row_header_bytes, 4);
  EXPECT_EQ(row_bytes(f->id, 64), 68);
  EXPECT_EQ(weight_formats::load_time_methods(), std::vector<std::string>{"int8_channel"});
  const auto names = cpu_with_int8_plugin()->supported_quantizations();
  EXPECT_NE(std::find(names.begin(), names.end(), "int8_channel"), names.end());
  EXPECT_NE(weight_formats::find_kernel("cpu", "matmul.int8_channel.v1"), nullptr);
}

TEST(Int8QuantPlugin, LogitsMatchTheDequantizedTwinToF32Rounding) {
  const Files& m = models();
  ASSERT_GT(m.converted, 10);  // 7 matrices per layer, 5 layers
  for (const auto& prompt : kPrompts) {
    const Steps twin = run(m.twin, "", prompt, nullptr, /*kv_f32=*/true);
    const Steps got = run(m.f16, "int8_channel", prompt, &twin.ids, /*kv_f32=*/true);
    ASSERT_EQ(twin.logits.size(), 6u);
    ASSERT_EQ(got.logits.size(), 6u);
    for (size_t s = 0; s < got.logits.size(); ++s) {
      const auto [worst, spread] = worst_and_spread(got, twin, s);
      std::printf("twin step %zu: logit range %.3f, largest difference %.6f\n", s, spread, worst);
      EXPECT_GT(spread, 0.1);
      // The same weights; the int8 kernel sums in f32 lanes, the f32 one in its own order.
      EXPECT_LT(worst, 1e-5 * spread) << "step " << s;  // measured: under 1e-6 of the range
    }
  }
}

TEST(Int8QuantPlugin, CloseToTheF16ModelAndTheSameGreedyTokens) {
  const Files& m = models();
  for (const auto& prompt : kPrompts) {
    const Steps f16 = run(m.f16, "", prompt, nullptr);
    const Steps forced = run(m.f16, "int8_channel", prompt, &f16.ids);
    const Steps free_run = run(m.f16, "int8_channel", prompt, nullptr);
    ASSERT_EQ(f16.logits.size(), 6u);
    ASSERT_EQ(forced.logits.size(), 6u);
    for (size_t s = 0; s < f16.logits.size(); ++s) {
      const auto [worst, spread] = worst_and_spread(forced, f16, s);
      std::printf("f16 step %zu: logit range %.3f, largest difference %.5f\n", s, spread, worst);
      // Per-channel int8 moves each weight by at most scale/2 = max|row| / 254 (0.4% of the
      // row's largest weight); through 5 layers that stays a few percent of the logit range.
      EXPECT_LT(worst, 0.05 * spread) << "step " << s;
    }
    EXPECT_EQ(free_run.ids, f16.ids);
  }
}

TEST(Int8QuantPlugin, GenerateThroughTheCliAndItsRefusals) {
  const Files& m = models();
  const std::string env = std::string("env -u TROUPE_PLUGINS -u TROUPE_DEVICE TROUPE_PLUGIN_PATH=") + INT8_PLUGIN_DIR;
  const std::string args = " -p 'Once upon a time' -n 12 --json";
  auto plain = testing::run_troupe("generate " + m.f16 + args, env);
  auto quant = testing::run_troupe("generate " + m.f16 + " --quantization int8_channel" + args, env);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(quant.exit_code, 0) << quant.err;
  EXPECT_NE(quant.err.find("quantized at load to int8_channel"), std::string::npos) << quant.err;
  const auto a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(quant.out);
  EXPECT_EQ(a["token_ids"], b["token_ids"]) << plain.out << "\n" << quant.out;

  auto unknown = testing::run_troupe("generate " + m.f16 + " --quantization fp8" + args, env);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("--quantization fp8: not a registered load-time method (registered: int8_channel;"),
            std::string::npos)
      << unknown.err;
  auto builtin = testing::run_troupe("generate " + m.f16 + " --quantization q4_0" + args, env);
  EXPECT_EQ(builtin.exit_code, 1);
  EXPECT_NE(builtin.err.find("--quantization q4_0: a weight type of GGUF files, not a load-time method"),
            std::string::npos)
      << builtin.err;
  // A model with nothing to convert (its matrices are quantized already).
  auto q40 = testing::run_troupe(
      "generate --load-format dummy --model-shape tiny --weight-type q4_0 --quantization int8_channel" + args, env);
  EXPECT_EQ(q40.exit_code, 1);
  EXPECT_NE(q40.err.find("converts f16, bf16 and f32 matrices at load"), std::string::npos) << q40.err;
  // The sim accelerator has no kernel for the format: it declines in one line naming both.
  const std::string sim_env = std::string("env -u TROUPE_PLUGINS -u TROUPE_DEVICE TROUPE_PLUGIN_PATH=") +
                              SIM_PLUGIN_DIR + ":" + INT8_PLUGIN_DIR;
  auto sim = testing::run_troupe("generate " + m.f16 + " --device sim --quantization int8_channel" + args, sim_env);
  EXPECT_EQ(sim.exit_code, 1);
  EXPECT_NE(sim.err.find("quantization int8_channel is not supported by platform sim"), std::string::npos) << sim.err;
  // serve hands the method to the engine the same way (the sim would serve the f16 file).
  const std::string port = std::to_string(20000 + ::getpid() % 20000);
  auto served = testing::run_troupe("serve " + m.f16 + " --device sim --port " + port + " --quantization int8_channel",
                                    sim_env);
  EXPECT_EQ(served.exit_code, 1);
  EXPECT_NE(served.err.find("quantization int8_channel is not supported by platform sim"), std::string::npos)
      << served.err;
  auto refused = testing::run_troupe("serve " + m.f16 + " --port " + port + " --quantization fp8", env);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("troupe serve: error: --quantization fp8: not a registered load-time method"),
            std::string::npos)
      << refused.err;
}

TEST(Int8QuantPlugin, TroupePluginsListsTheMethod) {
  const std::string env = std::string("env -u TROUPE_PLUGINS -u TROUPE_DEVICE TROUPE_PLUGIN_PATH=") + INT8_PLUGIN_DIR;
  auto r = testing::run_troupe("plugins --json", env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["weight_formats"].size(), 1u) << r.out;
  EXPECT_EQ(j["weight_formats"][0]["name"], "int8_channel");
  EXPECT_EQ(j["weight_formats"][0]["load_time_method"], true);
}

TEST(Int8QuantPlugin, PlatformCheckCoversTheFormat) {
  const std::string cpu_env =
      std::string("env -u TROUPE_PLUGINS -u TROUPE_DEVICE TROUPE_PLUGIN_PATH=") + INT8_PLUGIN_DIR;
  auto cpu =
      testing::run_troupe("platform-check --platform cpu --json --no-speed --filter matmul --threads 2", cpu_env);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.out << cpu.err;
  auto j = nlohmann::json::parse(cpu.out);
  int passed = 0;
  for (const auto& c : j["cases"])
    if (c["dtype"] == "int8_channel") {
      EXPECT_EQ(c["op"], "matmul");
      EXPECT_EQ(c["result"], "pass") << c.dump();
      passed += c["result"] == "pass";
    }
  EXPECT_GE(passed, 5);

  const std::string sim_env = std::string("env -u TROUPE_PLUGINS -u TROUPE_DEVICE TROUPE_PLUGIN_PATH=") +
                              SIM_PLUGIN_DIR + ":" + INT8_PLUGIN_DIR;
  auto sim = testing::run_troupe("platform-check --platform sim --json --no-speed --filter matmul", sim_env);
  ASSERT_EQ(sim.exit_code, 0) << sim.out << sim.err;  // not offered is not a failure
  j = nlohmann::json::parse(sim.out);
  int declined = 0;
  for (const auto& c : j["cases"])
    if (c["dtype"] == "int8_channel") {
      EXPECT_EQ(c["result"], "not offered") << c.dump();
      EXPECT_NE(c["detail"].get<std::string>().find("int8_channel"), std::string::npos) << c.dump();
      ++declined;
    }
  EXPECT_EQ(declined, 1);
}

}  // namespace
}  // namespace troupe
