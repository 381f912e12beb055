// A well-behaved general plugin. Each call of register() bumps the process
// environment variable TROUPE_TEST_GOOD_GENERAL_CALLS and logs the count, so
// tests can tell how many times the host ran it.
#include <cstdlib>
#include <string>

#include "troupe/log.hpp"
#include "troupe/model_registry.hpp"
#include "troupe/plugin.hpp"

namespace {

troupe::Result<std::unique_ptr<troupe::Model>> make_test_arch(const troupe::ModelSource&, const troupe::ModelContext&) {
  return troupe::not_supported("TestGoodArch has no implementation");
}

troupe::Status register_good() {
  const char* prev = std::getenv("TROUPE_TEST_GOOD_GENERAL_CALLS");
  int calls = (prev ? std::atoi(prev) : 0) + 1;
  setenv("TROUPE_TEST_GOOD_GENERAL_CALLS", std::to_string(calls).c_str(), 1);
  TROUPE_LOG_INFO("good_general register call {}", calls);
  troupe::model_registry::register_model("TestGoodArch", &make_test_arch);
  return {};
}

}  // namespace

TROUPE_PLUGIN(troupe::general_plugin("good_general", &register_good))
