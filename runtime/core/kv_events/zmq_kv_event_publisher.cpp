// The ZMQ publisher of KV events (kv_event_publisher.hpp), on cppzmq.
#include <zmq.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <optional>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "runtime/core/kv_events/kv_event_publisher.hpp"
#include "troupe/log.hpp"

namespace troupe::engine {
namespace {

std::string be64(int64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<char>(static_cast<uint64_t>(v) & 0xff);
    v = static_cast<int64_t>(static_cast<uint64_t>(v) >> 8);
  }
  return out;
}

int64_t from_be64(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* b = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < m.size() && i < 8; ++i) v = (v << 8) | b[i];
  return static_cast<int64_t>(v);
}

// vLLM's rule: bind a wildcard, ipc or inproc endpoint; connect to any other.
bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0;
}

struct ReplicaSockets {
  zmq::socket_t pub;
  std::optional<zmq::socket_t> replay;
  std::deque<std::pair<int64_t, std::string>> buffer;  // (seq, payload), the last buffer_steps
  int64_t next_seq = 0;
};

class ZmqPublisher final : public KvEventPublisher {
 public:
  ZmqPublisher(KvEventsConfig config, LoraNameFn lora_name) : config_(std::move(config)), lora_name_(std::move(lora_name)) {}

  Status open(int32_t num_replicas) {
    for (int32_t r = 0; r < num_replicas; ++r) {
      auto endpoint = offset_endpoint(config_.endpoint, r);
      if (!endpoint) return endpoint.status();
      ReplicaSockets s{zmq::socket_t(context_, zmq::socket_type::pub), std::nullopt, {}, 0};
      s.pub.set(zmq::sockopt::sndhwm, static_cast<int>(std::min<int64_t>(config_.hwm, INT32_MAX)));
      s.pub.set(zmq::sockopt::linger, 0);
      TROUPE_RETURN_IF_ERROR(attach(s.pub, *endpoint, binds(*endpoint), r, "endpoint"));
      if (config_.replay_endpoint) {
        auto replay = offset_endpoint(*config_.replay_endpoint, r);
        if (!replay) return replay.status();
        s.replay.emplace(context_, zmq::socket_type::router);
        s.replay->set(zmq::sockopt::linger, 0);
        TROUPE_RETURN_IF_ERROR(attach(*s.replay, *replay, /*bind=*/true, r, "replay_endpoint"));
      }
      TROUPE_LOG_INFO("KV events of replica {}: {} {}{}", r, binds(*endpoint) ? "bound to" : "connected to", *endpoint,
                      config_.replay_endpoint ? ", replay on " + offset_endpoint(*config_.replay_endpoint, r).value()
                                              : std::string());
      replicas_.push_back(std::move(s));
    }
    thread_ = std::thread([this] { run(); });
    return {};
  }

  ~ZmqPublisher() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void publish(int32_t replica, const std::vector<sched::KvEvent>& events) override {
    const double ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    {
      std::lock_guard lock(mu_);
      if (static_cast<int64_t>(queue_.size()) >= config_.max_queue_size) {
        if (dropped_++ % 1000 == 0)
          TROUPE_LOG_ERROR("KV events: the publisher's queue is full (max_queue_size {} in --kv-events-config): "
                           "dropped {} batch(es) so far",
                           config_.max_queue_size, dropped_);
        return;
      }
      queue_.push_back({replica, ts, events});
    }
    cv_.notify_one();
  }

 private:
  struct Pending {
    int32_t replica;
    double ts;
    std::vector<sched::KvEvent> events;
  };

  Status attach(zmq::socket_t& socket, const std::string& endpoint, bool bind, int32_t replica, const char* key) {
    try {
      if (bind) socket.bind(endpoint);
      else socket.connect(endpoint);
    } catch (const zmq::error_t& e) {
      return unavailable(std::string("--kv-events-config: cannot ") + (bind ? "bind " : "connect to ") + key + " " +
                         endpoint + " (replica " + std::to_string(replica) + "): " + e.what());
    }
    return {};
  }

  void run() {
    for (;;) {
      std::deque<Pending> batch;
      {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(10), [&] { return stopping_ || !queue_.empty(); });
        batch.swap(queue_);
        if (stopping_ && batch.empty()) return;
      }
      for (Pending& p : batch) send(p);
      serve_replays();
    }
  }

  void send(const Pending& p) {
    if (p.replica < 0 || static_cast<size_t>(p.replica) >= replicas_.size()) return;
    ReplicaSockets& s = replicas_[static_cast<size_t>(p.replica)];
    const int64_t seq = s.next_seq++;
    std::string payload = encode_event_batch(p.ts, p.events, p.replica, lora_name_);
    try {
      s.pub.send(zmq::buffer(config_.topic), zmq::send_flags::sndmore);
      s.pub.send(zmq::buffer(be64(seq)), zmq::send_flags::sndmore);
      s.pub.send(zmq::buffer(payload), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      TROUPE_LOG_ERROR("KV events of replica {}: sending batch {} failed: {}", p.replica, seq, e.what());
    }
    if (s.replay) {
      s.buffer.emplace_back(seq, std::move(payload));
      while (static_cast<int64_t>(s.buffer.size()) > config_.buffer_steps) s.buffer.pop_front();
    }
  }

  // Answers the replay requests waiting on each ROUTER socket (none waits: returns at once).
  void serve_replays() {
    for (size_t r = 0; r < replicas_.size(); ++r) {
      auto& s = replicas_[r];
      if (!s.replay) continue;
      for (;;) {
        std::vector<zmq::message_t> frames;
        try {
          zmq::message_t m;
          if (!s.replay->recv(m, zmq::recv_flags::dontwait)) break;
          frames.push_back(std::move(m));
          while (s.replay->get(zmq::sockopt::rcvmore)) {
            zmq::message_t more;
            (void)s.replay->recv(more, zmq::recv_flags::none);
            frames.push_back(std::move(more));
          }
        } catch (const zmq::error_t& e) {
          TROUPE_LOG_ERROR("KV events replay of replica {}: {}", r, e.what());
          break;
        }
        if (frames.size() != 3 || frames[2].size() != 8) {
          TROUPE_LOG_WARNING("KV events replay of replica {}: an invalid request of {} frame(s) was ignored "
                             "(expected identity, empty, an 8-byte start sequence)",
                             r, frames.size());
          continue;
        }
        replay(s, frames[0], from_be64(frames[2]));
      }
    }
  }

  void replay(ReplicaSockets& s, const zmq::message_t& identity, int64_t start) {
    auto reply = [&](const std::string& seq, const std::string& payload) {
      s.replay->send(zmq::buffer(identity.data(), identity.size()), zmq::send_flags::sndmore);
      s.replay->send(zmq::buffer(std::string()), zmq::send_flags::sndmore);
      s.replay->send(zmq::buffer(seq), zmq::send_flags::sndmore);
      s.replay->send(zmq::buffer(payload), zmq::send_flags::none);
    };
    try {
      for (const auto& [seq, payload] : s.buffer)
        if (seq >= start) reply(be64(seq), payload);
      reply(be64(-1), std::string());  // vLLM's end of replay
    } catch (const zmq::error_t& e) {
      TROUPE_LOG_ERROR("KV events replay: answering failed: {}", e.what());
    }
  }

  KvEventsConfig config_;
  LoraNameFn lora_name_;
  zmq::context_t context_{1};
  std::vector<ReplicaSockets> replicas_;  // the publisher thread's only
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  int64_t dropped_ = 0;
  std::thread thread_;
};

}  // namespace

Result<std::shared_ptr<KvEventPublisher>> make_zmq_kv_event_publisher(const KvEventsConfig& config,
                                                                      int32_t num_replicas, LoraNameFn lora_name) {
  if (config.publisher != "zmq")
    return invalid_argument("--kv-events-config: publisher \"" + config.publisher + "\" publishes nothing");
  auto publisher = std::make_shared<ZmqPublisher>(config, std::move(lora_name));
  TROUPE_RETURN_IF_ERROR(publisher->open(num_replicas));
  return std::shared_ptr<KvEventPublisher>(std::move(publisher));
}

}  // namespace troupe::engine
