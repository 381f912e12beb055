// `troupe platform-check [--platform NAME] [--json] [--filter OP]`: checks a
// platform plugin against the CPU platform with the conformance kit
// (conformance): every op, the attention backend, the communicator,
// the Worker contract on stories260K against its golden tokens, and the
// optional features. Exits 0 when nothing failed, 1 otherwise.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "plugin_host/plugin_host.hpp"
#include "conformance/conformance.hpp"
#include "runtime/model_files/gguf/gguf_file.hpp"
#include "runtime/rank/models/builtin_models.hpp"

namespace troupe::apps {
namespace {

namespace fs = std::filesystem;
namespace conf = troupe::conformance;

// The model and golden tokens ship with troupe: <prefix>/share/troupe/conformance (the
// build tree has the same layout beside bin/).
std::string default_data_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "share/troupe/conformance";
  return (exe.parent_path().parent_path() / "share" / "troupe" / "conformance").string();
}

Result<std::vector<conf::GoldenCase>> read_goldens(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("golden file " + path + " not found");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("cases") || !j["cases"].is_array())
    return data_loss("golden file " + path + " is not JSON with a \"cases\" array");
  std::vector<conf::GoldenCase> out;
  for (const auto& c : j["cases"]) {
    conf::GoldenCase g;
    try {
      g.prompt_ids = c.at("prompt_ids").get<std::vector<int32_t>>();
      g.output_ids = c.at("output_ids").get<std::vector<int32_t>>();
      g.margins = c.at("top1_top2_logit_margin").get<std::vector<double>>();
    } catch (const nlohmann::json::exception& e) {
      return data_loss("golden file " + path + ": " + e.what());
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::string fmt_err(double e) {
  if (!std::isfinite(e)) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%.1e", e);
  return b;
}

void print_text(const conf::Report& r, const std::string& target_name, const std::string& reference_name) {
  std::printf("troupe platform-check: platform %s (%s) against reference %s (%s)\n\n", r.platform.c_str(),
              target_name.c_str(), r.reference.c_str(), reference_name.c_str());
  std::printf("%-13s %-25s %-8s %-58s %-9s %-9s %s\n", "group", "op", "dtype", "shape", "worst err", "tolerance",
              "result");
  for (const auto& c : r.cases) {
    const bool compared = c.group == "ops" || c.group == "attention" || c.group == "communicator";
    std::printf("%-13s %-25s %-8s %-58s %-9s %-9s %s\n", c.group.c_str(), c.op.c_str(), c.dtype.c_str(),
                c.shape.c_str(), compared && c.outcome != conf::Outcome::skipped ? fmt_err(c.worst_error).c_str() : "",
                compared ? fmt_err(c.tolerance).c_str() : "", conf::to_string(c.outcome));
    if ((c.outcome != conf::Outcome::pass || !compared) && !c.detail.empty())
      std::printf("%14s%s\n", "", c.detail.c_str());
  }
  if (!r.speeds.empty()) {
    std::printf("\nSpeed (one representative shape; %s, and the reference %s):\n", r.platform.c_str(),
                r.reference.c_str());
    for (const auto& s : r.speeds)
      std::printf("  %-16s %-6s %-48s %10.2f %-8s (%s %.2f)\n", s.op.c_str(), s.dtype.c_str(), s.shape.c_str(),
                  s.target, s.unit.c_str(), r.reference.c_str(), s.reference);
  }
  if (!r.notes.empty()) {
    std::printf("\nNotes:\n");
    for (const auto& n : r.notes) std::printf("  %s\n", n.c_str());
  }
  std::string failed;  // each failing op once, in order
  for (const auto& c : r.cases)
    if (c.outcome == conf::Outcome::fail && failed.find(" " + c.op + ",") == std::string::npos) failed += " " + c.op + ",";
  if (!failed.empty()) std::printf("\nFailed ops:%s\n", failed.substr(0, failed.size() - 1).c_str());
  std::printf("\n%d passed, %d failed, %d not offered, %d skipped: %s\n", r.count(conf::Outcome::pass),
              r.count(conf::Outcome::fail), r.count(conf::Outcome::not_offered), r.count(conf::Outcome::skipped),
              r.passed() ? "PASS" : "FAIL");
  std::fflush(stdout);
}

nlohmann::json to_json(const conf::Report& r, const std::string& target_name) {
  nlohmann::json j;
  j["platform"] = r.platform;
  j["device_name"] = target_name;
  j["reference"] = r.reference;
  j["passed"] = r.passed();
  j["counts"] = {{"pass", r.count(conf::Outcome::pass)},
                 {"fail", r.count(conf::Outcome::fail)},
                 {"not_offered", r.count(conf::Outcome::not_offered)},
                 {"skipped", r.count(conf::Outcome::skipped)}};
  j["cases"] = nlohmann::json::array();
  for (const auto& c : r.cases) {
    nlohmann::json e = {{"group", c.group}, {"op", c.op},         {"shape", c.shape},
                        {"dtype", c.dtype}, {"result", conf::to_string(c.outcome)}, {"detail", c.detail}};
    if (c.outcome == conf::Outcome::fail) e["result"] = "fail";
    e["worst_error"] = std::isfinite(c.worst_error) ? nlohmann::json(c.worst_error) : nlohmann::json("inf");
    e["tolerance"] = c.tolerance;
    j["cases"].push_back(std::move(e));
  }
  j["speeds"] = nlohmann::json::array();
  for (const auto& s : r.speeds)
    j["speeds"].push_back({{"op", s.op}, {"shape", s.shape}, {"dtype", s.dtype}, {"unit", s.unit},
                           {"value", s.target}, {"reference_value", s.reference}});
  j["notes"] = r.notes;
  return j;
}

struct CheckOptions {
  std::string platform;
  std::string filter;
  std::string model;
  std::string golden;
  bool json = false;
  bool no_speed = false;
  int threads = 0;
};

int run(const CheckOptions& o) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "troupe platform-check: error: %s\n", m.c_str());
    return 1;
  };
  auto& host = plugin_host::PluginHost::instance();
  plugin_host::PlatformRequest request;
  request.device = o.platform;
  request.what = "the conformance check";
  auto target = host.activate_platform(request);
  if (!target.ok()) return fail(target.status().message());
  auto reference = host.platform("cpu");
  if (!reference.ok()) return fail("the reference platform: " + reference.status().message());
  runtime::register_builtin_models();

  conf::Options options;
  options.filter = o.filter;
  options.measure_speed = !o.no_speed;
  options.num_threads = o.threads;
  conf::Report report;
  conf::check_kernels(**target, **reference, options, &report);

  const std::string dir = default_data_dir();
  const std::string model_path = o.model.empty() ? dir + "/stories260K.gguf" : o.model;
  const std::string golden_path = o.golden.empty() ? dir + "/stories260K_llamacpp.json" : o.golden;
  auto goldens = read_goldens(golden_path);
  auto file = gguf::GgufFile::open(model_path);
  if (!goldens.ok() || !file.ok()) {
    conf::CaseResult c;
    c.group = "worker";
    c.op = "model_files";
    c.outcome = conf::Outcome::fail;
    c.detail = !file.ok() ? file.status().to_string() : goldens.status().to_string();
    report.cases.push_back(std::move(c));
  } else {
    gguf::GgufModelSource source(std::shared_ptr<const gguf::GgufFile>(std::move(*file)));
    conf::check_worker(**target, source, *goldens, options, &report);
    report.notes.push_back("worker contract: model " + model_path + ", golden tokens " + golden_path);
  }
  if (report.cases.empty()) return fail("no check matches --filter '" + o.filter + "'");
  if (o.json) {
    std::cout << to_json(report, (*target)->device_name(0)).dump(2) << std::endl;
  } else {
    print_text(report, (*target)->device_name(0), (*reference)->device_name(0));
  }
  return report.passed() ? 0 : 1;
}

CommandRegistration platform_check_command(
    "platform-check", "Check a platform plugin's ops, attention, communicator and worker against the CPU platform",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<CheckOptions>();
      sub.add_option("--platform", o->platform,
                     "The platform to check: a platform plugin's name or device type (default: the one troupe "
                     "activates, TROUPE_DEVICE when set)");
      sub.add_flag("--json", o->json, "Print the report as JSON (for CI)");
      sub.add_option("--filter", o->filter,
                     "Run only the checks whose op contains this text (matmul, rms_norm, paged_attention, all_gather, "
                     "execute_model, sleep_mode...) or of this group (ops, attention, communicator, worker, feature)");
      sub.add_option("--model", o->model, "The model of the worker check (default: the stories260K troupe ships)");
      sub.add_option("--golden", o->golden, "Its golden greedy tokens (default: the ones troupe ships)");
      sub.add_flag("--no-speed", o->no_speed, "Skip the speed lines");
      sub.add_option("--threads", o->threads, "Threads for platforms that take a thread count (default: their own)");
      return [o]() { return run(*o); };
    });

}  // namespace
}  // namespace troupe::apps
