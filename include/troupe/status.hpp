// Expected failures as values: Status (ok or an error with a message) and
// Result<T> (a T or a Status). Nothing throws across the plugin boundary.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace troupe {

enum class StatusCode {
  ok = 0,
  invalid_argument,  // bad input from a caller (a request, a flag, a file)
  not_found,         // a named thing does not exist (model, plugin, tensor)
  not_supported,     // valid, but this platform/build cannot do it
  out_of_range,      // sizes, offsets, token ids past their limits
  data_loss,         // a malformed or truncated file
  resource_exhausted,// memory, KV blocks, queue slots
  unavailable,       // a peer (worker, node) is gone or not ready
  internal,          // a bug: should not happen
};

const char* to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }
  bool ok() const { return code_ == StatusCode::ok; }
  explicit operator bool() const { return ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "invalid_argument: message" (or "ok").
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::invalid_argument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::not_found, std::move(m)}; }
inline Status not_supported(std::string m) { return {StatusCode::not_supported, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::out_of_range, std::move(m)}; }
inline Status data_loss(std::string m) { return {StatusCode::data_loss, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::resource_exhausted, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::unavailable, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::internal, std::move(m)}; }

/// A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {          // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::internal, "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status ok_status;
    return ok() ? ok_status : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace troupe

/// Propagate a failed Status from the current function.
#define TROUPE_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::troupe::Status troupe_status_ = (expr);   \
    if (!troupe_status_.ok()) return troupe_status_; \
  } while (0)
