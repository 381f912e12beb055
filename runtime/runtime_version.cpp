// The runtime library's version string; the rest of runtime/ lives in subfolders.
namespace troupe::runtime {
const char* version() { return "0.1.0"; }
}  // namespace troupe::runtime
