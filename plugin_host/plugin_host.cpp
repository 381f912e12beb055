#include "plugin_host/plugin_host.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "plugin_host/loader.hpp"
#include "plugin_host/manifest.hpp"
#include "troupe/custom_op.hpp"
#include "troupe/log.hpp"
#include "troupe/plugin.hpp"

namespace troupe::plugin_host {
namespace fs = std::filesystem;

const char* to_string(PluginStatus s) {
  switch (s) {
    case PluginStatus::loaded: return "loaded";
    case PluginStatus::filtered: return "filtered";
    case PluginStatus::failed: return "failed";
    case PluginStatus::refused: return "refused";
  }
  return "unknown";
}

namespace {

constexpr const char* kGroups[] = {kGroupGeneral, kGroupPlatform, kGroupIOProcessor, kGroupStatLogger};

// General plugins register once per process, whichever host loads them
// (vLLM's plugins_loaded flag). Keyed by the library's canonical path.
std::mutex& registered_mutex() {
  static std::mutex mu;
  return mu;
}
std::set<std::string>& registered_libraries() {
  static std::set<std::string> s;
  return s;
}

std::string canonical_or_same(const std::string& path) {
  std::error_code ec;
  auto p = fs::canonical(path, ec);
  return ec ? path : p.string();
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Every call into plugin code goes through here: an exception becomes a reason.
template <class F>
bool guarded(F&& f, const std::string& what, std::string* error) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    *error = what + " threw: " + e.what();
  } catch (...) {
    *error = what + " threw a non-standard exception";
  }
  return false;
}

Status run_register_once(const PluginRecord& rec, const PluginDescriptor& d) {
  std::lock_guard lock(registered_mutex());
  const std::string key = canonical_or_same(rec.library);
  if (registered_libraries().count(key)) {
    TROUPE_LOG_DEBUG("plugin {} already registered in this process", rec.name);
    return {};
  }
  Status st;
  std::string error;
  if (!guarded([&] { st = d.register_fn(); }, "register()", &error)) return internal_error(error);
  if (!st.ok()) return Status(st.code(), "register() failed: " + st.to_string());
  registered_libraries().insert(key);
  return {};
}

}  // namespace

struct PluginHost::Impl {
  HostOptions options;
  mutable std::mutex mu;
  bool loaded = false;
  std::vector<PluginRecord> records;
  std::vector<const PluginDescriptor*> descriptors;  // parallel to records; null unless loaded

  struct Available {
    std::string name;
    Platform* platform;
    size_t candidate;  // index into candidates
  };
  bool probed = false;
  std::vector<PlatformCandidate> candidates;
  std::vector<std::unique_ptr<Platform>> platforms;  // every platform a probe returned
  std::vector<Available> available;                  // in discovery order
  std::optional<size_t> active;                      // index into available
  std::optional<std::string> active_name;

  bool is_builtin_dir(const std::string& dir) const {
    const std::string c = canonical_or_same(dir);
    return std::any_of(options.builtin_dirs.begin(), options.builtin_dirs.end(),
                       [&](const std::string& b) { return canonical_or_same(b) == c; });
  }
  bool allowed(const std::string& name) const {
    if (!options.allowed) return true;
    const auto& a = *options.allowed;
    return std::find(a.begin(), a.end(), name) != a.end();
  }

  void discover();
  void log_discovered() const;
  void load_one(size_t i);
  void probe_platforms();
  bool matches(const Available& a, const std::string& device) const;
  Status can_serve(const Available& a, const PlatformRequest& request) const;
  Status cannot_serve(const Available& a, const Status& why, const PlatformRequest& request) const;
  std::string requested_device(const PlatformRequest& request) const;
  Result<size_t> choose(const PlatformRequest& request) const;
  Result<Platform*> check_active(const PlatformRequest& request) const;
  void activate(size_t index);
};

void PluginHost::Impl::discover() {
  std::map<std::string, std::string> seen;  // name -> manifest that provided it first
  std::set<std::string> searched;           // a directory listed twice is searched once
  for (const auto& dir : options.plugin_dirs) {
    if (!searched.insert(canonical_or_same(dir)).second) continue;
    Status why;
    auto manifests = list_manifests(dir, &why);
    const bool builtin = is_builtin_dir(dir);
    if (!why.ok()) {
      TROUPE_LOG_WARNING("{} (skipped{})", why.message(), builtin ? ", built-in plugin directory" : "");
      continue;
    }
    for (const auto& path : manifests) {
      Manifest m;
      Status st = parse_manifest(path, &m);
      PluginRecord rec;
      rec.name = m.name.empty() ? name_from_manifest_path(path) : m.name;
      rec.group = is_known_group(m.group) ? m.group : "";
      rec.library = m.library;
      rec.manifest = path;
      rec.builtin = builtin;
      if (!st.ok()) {
        rec.status = PluginStatus::failed;
        rec.reason = st.message();
      } else if (auto it = seen.find(rec.name); it != seen.end()) {
        rec.status = PluginStatus::failed;
        rec.reason = "another plugin named " + rec.name + " was found first (" + it->second + ")";
      } else {
        seen.emplace(rec.name, path);
        if (!builtin && !allowed(rec.name)) {
          rec.status = PluginStatus::filtered;
          rec.reason = "not named in TROUPE_PLUGINS (allowed: " +
                       (options.allowed->empty() ? std::string("none") : join(*options.allowed)) + ")";
        } else {
          rec.status = PluginStatus::failed;  // until load_one succeeds
        }
      }
      records.push_back(std::move(rec));
      descriptors.push_back(nullptr);
    }
  }
}

void PluginHost::Impl::log_discovered() const {
  for (const char* group : kGroups) {
    bool any = false;
    for (const auto& r : records) {
      if (r.group != group) continue;
      if (!any) TROUPE_LOG_INFO("Available plugins for group {}:", group);
      any = true;
      TROUPE_LOG_INFO("- {} -> {}", r.name, r.library.empty() ? r.manifest : r.library);
    }
    if (!any) TROUPE_LOG_DEBUG("No plugins for group {} found.", group);
  }
  if (!options.allowed) {
    TROUPE_LOG_INFO("All plugins will be loaded. Set TROUPE_PLUGINS to control which plugins to load.");
  } else {
    for (const auto& name : *options.allowed) {
      bool found = std::any_of(records.begin(), records.end(), [&](const PluginRecord& r) { return r.name == name; });
      if (!found)
        TROUPE_LOG_WARNING("plugin {} is named in TROUPE_PLUGINS but was not found in any plugin directory ({})",
                           name, join(options.plugin_dirs));
    }
  }
}

void PluginHost::Impl::load_one(size_t i) {
  PluginRecord& rec = records[i];
  Manifest m;
  Status st = parse_manifest(rec.manifest, &m);
  if (!st.ok()) {  // the file changed under us since discovery
    rec.reason = st.message();
    return;
  }
  LoadOutcome out = load_library(m);
  if (out.status == PluginStatus::loaded && rec.group == kGroupGeneral) {
    Status reg = run_register_once(rec, *out.descriptor);
    if (!reg.ok()) out = {PluginStatus::failed, reg.message(), nullptr};
  }
  rec.status = out.status;
  rec.reason = out.reason;
  descriptors[i] = out.descriptor;
  if (rec.status == PluginStatus::loaded) {
    TROUPE_LOG_INFO("plugin {} loaded.", rec.name);
  } else {
    TROUPE_LOG_ERROR("plugin {} {}: {}", rec.name, rec.status == PluginStatus::refused ? "refused" : "failed to load",
                     rec.reason);
  }
}

void PluginHost::Impl::probe_platforms() {
  probed = true;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& rec = records[i];
    if (rec.group != kGroupPlatform || rec.status != PluginStatus::loaded || !descriptors[i]) continue;
    PlatformCandidate c;
    c.name = rec.name;
    Platform* p = nullptr;
    std::string error, why_not;
    bool ok = guarded([&] { p = descriptors[i]->platform_probe(&why_not); }, "platform probe", &error);
    if (ok && p) {
      platforms.emplace_back(p);
      ok = guarded([&] {
        c.out_of_tree = p->is_out_of_tree();
        c.device_type = p->device_type();
      }, "platform identity", &error);
    }
    if (!ok) {
      c.reason = error;
      TROUPE_LOG_ERROR("platform plugin {}: {}", rec.name, error);
    } else if (!p) {
      c.reason = why_not.empty() ? "probe returned no platform" : "probe returned no platform: " + why_not;
      TROUPE_LOG_DEBUG("platform plugin {}: {}", rec.name, c.reason);
    } else {
      c.available = true;
      available.push_back({rec.name, p, candidates.size()});
    }
    candidates.push_back(std::move(c));
  }
}

bool PluginHost::Impl::matches(const Available& a, const std::string& device) const {
  return a.name == device || candidates[a.candidate].device_type == device;
}

Status PluginHost::Impl::can_serve(const Available& a, const PlatformRequest& request) const {
  if (!request.can_serve) return {};
  Status st;
  std::string error;
  if (!guarded([&] { st = request.can_serve(*a.platform); }, "platform check", &error)) return internal_error(error);
  return st;
}

// "platform cuda cannot run M: why; platforms that could: cpu"
Status PluginHost::Impl::cannot_serve(const Available& a, const Status& why, const PlatformRequest& request) const {
  std::vector<std::string> could;
  for (const auto& other : available)
    if (other.name != a.name && can_serve(other, request).ok()) could.push_back(other.name);
  return not_supported("platform " + a.name + " cannot run " + (request.what.empty() ? "this model" : request.what) +
                       ": " + why.message() +
                       (could.empty() ? std::string("; no other available platform could either")
                                      : "; platforms that could: " + join(could) +
                                            " (choose one with --device or TROUPE_DEVICE)"));
}

std::string PluginHost::Impl::requested_device(const PlatformRequest& request) const {
  // "" and "auto" both leave the choice to TROUPE_DEVICE, then to the host.
  const bool automatic = request.device.empty() || request.device == "auto";
  const std::string& device = automatic ? options.device : request.device;
  return device == "auto" ? std::string() : device;
}

Result<size_t> PluginHost::Impl::choose(const PlatformRequest& request) const {
  auto names = [](const std::vector<const Available*>& v) {
    std::vector<std::string> n;
    for (const auto* a : v) n.push_back(a->name);
    return join(n);
  };
  const std::string device = requested_device(request);
  if (!device.empty()) {
    for (size_t i = 0; i < available.size(); ++i) {
      if (!matches(available[i], device)) continue;
      if (Status st = can_serve(available[i], request); !st.ok()) return cannot_serve(available[i], st, request);
      return i;
    }
    for (const auto& c : candidates)
      if (c.name == device || c.device_type == device)
        return unavailable("device '" + device + "' was requested (--device or TROUPE_DEVICE), but platform " +
                           c.name + " is not available: " + c.reason);
    std::vector<std::string> known;
    for (const auto& c : candidates) known.push_back(c.name + (c.available ? "" : " (not available)"));
    return not_found("device '" + device + "' was requested (--device or TROUPE_DEVICE), but no platform plugin "
                     "provides it (platforms: " + (known.empty() ? std::string("none") : join(known)) + ")");
  }

  std::vector<const Available*> oot, accel, cpu;
  for (const auto& a : available) {
    if (candidates[a.candidate].out_of_tree)
      oot.push_back(&a);
    else
      (a.platform->platform_enum() == PlatformEnum::cpu ? cpu : accel).push_back(&a);
  }
  auto index_of = [&](const Available* a) { return static_cast<size_t>(a - available.data()); };
  if (oot.size() >= 2)
    return invalid_argument("Only one out-of-tree platform plugin can be activated, but got: " + names(oot) +
                            ". Use TROUPE_PLUGINS to choose one.");
  if (oot.size() == 1) {  // installed on purpose: it wins whenever it can run the model
    if (Status st = can_serve(*oot[0], request); st.ok()) return index_of(oot[0]);
    else
      TROUPE_LOG_INFO("Platform {} is available but cannot run {}: {}", oot[0]->name,
                      request.what.empty() ? "this model" : request.what, st.message());
  }
  // A real accelerator beats the CPU (vLLM: CUDA is chosen over CPU when both are
  // present), but only one that can run the model.
  for (const auto* group : {&accel, &cpu}) {
    std::vector<const Available*> serving;
    for (const auto* a : *group) {
      if (Status st = can_serve(*a, request); st.ok())
        serving.push_back(a);
      else
        TROUPE_LOG_INFO("Platform {} is available but cannot run {}: {}", a->name,
                        request.what.empty() ? "this model" : request.what, st.message());
    }
    if (serving.size() >= 2)
      return invalid_argument("Only one built-in platform can be activated, but got: " + names(serving) +
                              ". Choose one with --device or TROUPE_DEVICE.");
    if (serving.size() == 1) return index_of(serving[0]);
  }
  std::string detail;
  for (const auto& c : candidates) detail += (detail.empty() ? "" : "; ") + c.name + ": " + c.reason;
  if (candidates.empty())
    return not_found("no platform is available: no platform plugin was loaded (plugin directories: " +
                     join(options.plugin_dirs) + ")");
  if (available.empty()) return not_found("no platform is available (" + detail + ")");
  std::string refusals;
  for (const auto& a : available)
    refusals += (refusals.empty() ? "" : "; ") + a.name + ": " + can_serve(a, request).message();
  return not_supported("no available platform can run " + (request.what.empty() ? "this model" : request.what) +
                       " (" + refusals + ")");
}

Result<Platform*> PluginHost::Impl::check_active(const PlatformRequest& request) const {
  const Available& a = available[*active];
  const std::string device = requested_device(request);
  if (!device.empty() && !matches(a, device))
    return invalid_argument("platform " + a.name + " is already active in this process; device '" + device +
                               "' cannot be activated beside it (one platform per process)");
  if (Status st = can_serve(a, request); !st.ok()) return cannot_serve(a, st, request);
  return a.platform;
}

void PluginHost::Impl::activate(size_t index) {
  active = index;
  const Available& winner = available[index];
  active_name = winner.name;
  for (auto& c : candidates)
    if (c.available && c.name != winner.name) c.reason = "available, but platform " + winner.name + " was activated";
  custom_op_registry::set_active_device_type(candidates[winner.candidate].device_type);
  if (!candidates[winner.candidate].out_of_tree) TROUPE_LOG_INFO("Automatically detected platform {}.", winner.name);
  TROUPE_LOG_INFO("Platform plugin {} is activated", winner.name);
}

PluginHost::PluginHost(HostOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}
PluginHost::~PluginHost() = default;

PluginHost& PluginHost::instance() {
  // Leaked on purpose: platforms and loggers point into plugin libraries that
  // stay loaded, and static destruction order across libraries is unknowable.
  static PluginHost* host = new PluginHost(HostOptions::from_environment());
  return *host;
}

void PluginHost::load_all() {
  std::lock_guard lock(impl_->mu);
  if (impl_->loaded) return;
  impl_->loaded = true;
  impl_->discover();
  impl_->log_discovered();
  for (size_t i = 0; i < impl_->records.size(); ++i) {
    const auto& r = impl_->records[i];
    if (r.status == PluginStatus::filtered || !r.reason.empty()) continue;  // filtered or already failed
    impl_->load_one(i);
  }
}

Result<Platform*> PluginHost::activate_platform(const PlatformRequest& request) {
  load_all();
  std::lock_guard lock(impl_->mu);
  if (!impl_->probed) impl_->probe_platforms();
  if (impl_->active) return impl_->check_active(request);
  auto chosen = impl_->choose(request);
  if (!chosen.ok()) {
    TROUPE_LOG_ERROR("{}", chosen.status().message());
    return chosen.status();
  }
  impl_->activate(*chosen);
  return impl_->available[*chosen].platform;
}

Result<std::string> PluginHost::preview_platform(const PlatformRequest& request) {
  load_all();
  std::lock_guard lock(impl_->mu);
  if (!impl_->probed) impl_->probe_platforms();
  if (impl_->active) {
    auto p = impl_->check_active(request);
    if (!p.ok()) return p.status();
    return *impl_->active_name;
  }
  auto chosen = impl_->choose(request);
  if (!chosen.ok()) return chosen.status();
  return impl_->available[*chosen].name;
}

Result<Platform*> PluginHost::platform(const std::string& device) {
  load_all();
  std::lock_guard lock(impl_->mu);
  if (!impl_->probed) impl_->probe_platforms();
  for (const auto& a : impl_->available)
    if (impl_->matches(a, device)) return a.platform;
  for (const auto& c : impl_->candidates)
    if (c.name == device || c.device_type == device)
      return unavailable("platform " + c.name + " is not available: " + c.reason);
  std::vector<std::string> known;
  for (const auto& c : impl_->candidates) known.push_back(c.name + (c.available ? "" : " (not available)"));
  return not_found("no platform plugin provides '" + device + "' (platforms: " +
                   (known.empty() ? std::string("none") : join(known)) + ")");
}

const std::vector<PluginRecord>& PluginHost::records() const { return impl_->records; }
const std::vector<PlatformCandidate>& PluginHost::platform_candidates() const { return impl_->candidates; }
const HostOptions& PluginHost::options() const { return impl_->options; }

std::optional<std::string> PluginHost::activated_platform_name() const {
  std::lock_guard lock(impl_->mu);
  return impl_->active_name;
}

std::vector<std::unique_ptr<StatLogger>> PluginHost::make_stat_loggers(const ConfigView& config, int engine_index) {
  load_all();
  std::vector<std::unique_ptr<StatLogger>> out;
  std::lock_guard lock(impl_->mu);
  for (size_t i = 0; i < impl_->records.size(); ++i) {
    const auto& rec = impl_->records[i];
    const PluginDescriptor* d = impl_->descriptors[i];
    if (rec.group != kGroupStatLogger || rec.status != PluginStatus::loaded || !d) continue;
    StatLogger* logger = nullptr;
    std::string error;
    if (!guarded([&] { logger = d->make_stat_logger(config, engine_index); }, "stat logger factory", &error)) {
      TROUPE_LOG_ERROR("stat logger plugin {}: {}", rec.name, error);
    } else if (!logger) {
      TROUPE_LOG_WARNING("stat logger plugin {} returned no logger", rec.name);
    } else {
      out.emplace_back(logger);
    }
  }
  return out;
}

Result<std::unique_ptr<IOProcessor>> PluginHost::make_io_processor(const std::string& name, const ConfigView& config) {
  load_all();
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> available;
  for (size_t i = 0; i < impl_->records.size(); ++i) {
    const auto& rec = impl_->records[i];
    if (rec.group != kGroupIOProcessor) continue;
    if (rec.name != name) {
      if (rec.status == PluginStatus::loaded) available.push_back(rec.name);
      continue;
    }
    const PluginDescriptor* d = impl_->descriptors[i];
    if (rec.status != PluginStatus::loaded || !d)
      return unavailable("IO processor plugin " + name + " is " + to_string(rec.status) + ": " + rec.reason);
    IOProcessor* p = nullptr;
    std::string error;
    if (!guarded([&] { p = d->make_io_processor(config); }, "IO processor factory", &error))
      return internal_error("IO processor plugin " + name + ": " + error);
    if (!p) return internal_error("IO processor plugin " + name + " returned no processor");
    return std::unique_ptr<IOProcessor>(p);
  }
  return not_found("no IO processor plugin named " + name + " (loaded: " +
                   (available.empty() ? std::string("none") : join(available)) + ")");
}

}  // namespace troupe::plugin_host
