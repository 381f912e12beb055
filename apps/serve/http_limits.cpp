#include "apps/serve/http_limits.hpp"

#include <climits>

namespace troupe::apps::serve {
namespace {

RequestLimiter* self_of(http_parser* p) { return static_cast<RequestLimiter*>(p->data); }

}  // namespace

RequestLimiter::RequestLimiter(RequestLimits limits) : limits_(limits) {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
  http_parser_settings_init(&settings_);
  settings_.on_url = &RequestLimiter::on_url;
  settings_.on_header_field = &RequestLimiter::on_header_bytes;
  settings_.on_header_value = &RequestLimiter::on_header_bytes;
  settings_.on_headers_complete = &RequestLimiter::on_headers_complete;
  settings_.on_body = &RequestLimiter::on_body;
  settings_.on_message_complete = &RequestLimiter::on_message_complete;
}

bool RequestLimiter::count_head(size_t n) {
  head_bytes_ += n;
  if (head_bytes_ <= limits_.max_head_bytes) return true;
  verdict_ = Verdict::head_too_large;
  http_parser_pause(&parser_, 1);
  return false;
}

int RequestLimiter::on_url(http_parser* p, const char*, size_t n) {
  self_of(p)->count_head(n);
  return 0;
}

int RequestLimiter::on_header_bytes(http_parser* p, const char*, size_t n) {
  self_of(p)->count_head(n);
  return 0;
}

// A declared length above the limit is refused here, before the body is read.
int RequestLimiter::on_headers_complete(http_parser* p) {
  auto* self = self_of(p);
  if (p->content_length != ULLONG_MAX && p->content_length > self->limits_.max_body_bytes) {
    self->verdict_ = Verdict::body_too_large;
    http_parser_pause(p, 1);
  }
  return 0;
}

// A chunked body is refused once its running total passes the limit.
int RequestLimiter::on_body(http_parser* p, const char*, size_t n) {
  auto* self = self_of(p);
  self->body_bytes_ += n;
  if (self->body_bytes_ > self->limits_.max_body_bytes) {
    self->verdict_ = Verdict::body_too_large;
    http_parser_pause(p, 1);
  }
  return 0;
}

// Stops the parser at the end of each request, so that the next one's first byte is known.
int RequestLimiter::on_message_complete(http_parser* p) {
  self_of(p)->message_done_ = true;
  http_parser_pause(p, 1);
  return 0;
}

RequestLimiter::Fed RequestLimiter::feed(const char* data, size_t n) {
  Fed out;
  if (verdict_ != Verdict::ok) {
    out.verdict = verdict_;
    out.detail = detail_;
    return out;
  }
  if (passthrough_) {
    out.pass = n;
    return out;
  }
  constexpr size_t kBefore = SIZE_MAX;  // the request being read began in an earlier chunk
  size_t start = message_bytes_ == 0 ? 0 : kBefore;
  size_t off = 0;
  while (off < n) {
    const size_t k = http_parser_execute(&parser_, &settings_, data + off, n - off);
    off += k;
    message_bytes_ += k;
    if (verdict_ != Verdict::ok) {
      out.pass = start == kBefore ? 0 : start;
      out.verdict = verdict_;
      return out;
    }
    const auto err = HTTP_PARSER_ERRNO(&parser_);
    if (err == HPE_PAUSED && message_done_) {
      http_parser_pause(&parser_, 0);
      message_done_ = false;
      head_bytes_ = 0;
      body_bytes_ = 0;
      message_bytes_ = 0;
      start = off;
      if (parser_.upgrade) {
        passthrough_ = true;
        break;
      }
      continue;
    }
    if (err != HPE_OK) {
      verdict_ = err == HPE_HEADER_OVERFLOW ? Verdict::head_too_large : Verdict::malformed;
      detail_ = std::string(http_errno_name(err)) + ": " + http_errno_description(err);
      out.pass = start == kBefore ? 0 : start;
      out.verdict = verdict_;
      out.detail = detail_;
      return out;
    }
    if (parser_.upgrade) {
      passthrough_ = true;
      break;
    }
    if (k == 0) break;  // nothing consumed and no error: wait for more bytes
  }
  out.pass = n;
  return out;
}

}  // namespace troupe::apps::serve
