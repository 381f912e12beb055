// The communicator of the target against the reference's, for a world of one
// rank (the world platform-check can build in one process): every collective
// must leave exactly the reference's bytes. A world of more ranks needs several
// processes and is not checked here.
#include <string>

#include "conformance/check_util.hpp"
#include "conformance/random_data.hpp"

namespace troupe::conformance {

void check_communicator(Session& target, Session& reference, const Options& options, Rng& rng, Report* report) {
  const char* ops[] = {"all_reduce", "all_gather", "reduce_scatter", "gather", "broadcast"};
  bool any = false;
  for (const char* op : ops) any |= selected(options, "communicator", op);
  if (!any) return;
  auto tc = target.communicator();
  auto rc = reference.communicator();
  if (!rc.ok()) {
    report->notes.push_back("communicator not checked: the reference has none: " + rc.status().message());
    return;
  }
  if (!tc.ok()) {
    CaseResult c;
    c.group = "communicator";
    c.op = "make_device_communicator";
    c.shape = "world=1";
    c.outcome = Outcome::fail;
    c.detail = tc.status().to_string();
    report->cases.push_back(std::move(c));
    return;
  }
  if ((*tc)->world_size() != 1 || (*tc)->rank() != 0) {
    CaseResult c;
    c.group = "communicator";
    c.op = "make_device_communicator";
    c.shape = "world=1";
    c.outcome = Outcome::fail;
    c.detail = "asked for rank 0 of 1, got rank " + std::to_string((*tc)->rank()) + " of " +
               std::to_string((*tc)->world_size());
    report->cases.push_back(std::move(c));
    return;
  }
  DeviceCommunicator* comms[2] = {tc->get(), rc->get()};
  auto comm_of = [&](Session& s) { return &s == &target ? comms[0] : comms[1]; };
  for (const char* op : ops) {
    if (!selected(options, "communicator", op)) continue;
    for (int64_t count : {1, 1000}) {
      const auto in = random_floats(rng, count);
      CaseResult c;
      c.group = "communicator";
      c.op = op;
      c.shape = "world=1 count=" + std::to_string(count);
      c.dtype = "f32";
      c.tolerance = 0;  // a world of one moves bytes: nothing may change
      const std::string name = op;
      compare_case(target, reference, report, std::move(c), [&](Session& s) -> Result<std::vector<float>> {
        DeviceCommunicator& comm = *comm_of(s);
        CONFORMANCE_ASSIGN(buf, s.put(in));
        CONFORMANCE_ASSIGN(out, s.scratch(count * 4));
        Status st;
        float* result = static_cast<float*>(out);
        if (name == "all_reduce") {
          st = comm.all_reduce(buf, count, DType::f32);
          result = buf;
        } else if (name == "all_gather") {
          st = comm.all_gather(buf, out, count, DType::f32);
        } else if (name == "reduce_scatter") {
          st = comm.reduce_scatter(buf, out, count, DType::f32);
        } else if (name == "gather") {
          st = comm.gather(buf, out, count, DType::f32, 0);
        } else {
          st = comm.broadcast(buf, count, DType::f32, 0);
          result = buf;
        }
        TROUPE_RETURN_IF_ERROR(st);
        return s.get(result, count);
      });
    }
  }
  ConfigValues two;
  (void)two.set_int("parallel.tensor_parallel_size", 2);  // ConfigValues takes any name
  auto id = target.platform().make_communicator_id(two);
  report->notes.push_back(
      "communicator: checked for a world of 1 rank; send/recv need a peer and are not checked; a world of 2 ranks " +
      std::string(id.ok() ? "is offered by the platform but not checked (it needs several processes)"
                          : "is not offered by the platform (" + id.status().message() + ")"));
}

}  // namespace troupe::conformance
