// flight_recorder_file.h — the contract of flight_recorder.json, which the flight recorder of each rank
// dumps (at a timeout, a failed collective, SIGUSR1, another rank's request, and at exit) and `opscope
// analyze` reads: {"format": kFlightRecorderFormat, "format_version", "rank", "world_size", "pid",
// "reasons", "dumped_unix_ns", "dumped_monotonic_ns", "start_unix_ns", "comms": [FlightRecorderComm, with
// "entries": [FlightRecorderEntry]], "backtraces": {id: [frames]}}.
// (Dumps written before format_version was stored say "version": 1.)
//
// A communicator and each of its entries are typed records here, written by toJson() and read back by
// fromJson(), so that the writer (recorder/) and the reader (analysis/) share one set of names. fromJson()
// reads an untrusted file: a member that is missing or of another type reads as its default.
#pragma once

#include <opscope/results/json_input.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace opscope::results {

inline constexpr std::string_view kFlightRecorderFile = "flight_recorder.json";
inline constexpr std::string_view kFlightRecorderFormat = "opscope-flight-recorder";
inline constexpr std::int64_t kFlightRecorderFormatVersion = 1;
// The largest dump a reader reads.
inline constexpr std::uintmax_t kMaxFlightRecorderFileBytes = std::uintmax_t{256} << 20;

// One transfer of a communicator's ring. Times are the rank's CLOCK_MONOTONIC in nanoseconds (the dump's
// dumped_unix_ns - dumped_monotonic_ns puts them on the Unix clock).
struct FlightRecorderEntry {
  std::int64_t id = 0;     // the recorder's running number, from 1
  std::int64_t seq = 0;    // libmlucl's (a send / recv: per peer and direction)
  std::string collective;  // libmlucl's name of the transfer (opscope::collectiveName)
  std::int64_t count = 0;
  std::string dtype;
  std::string op;  // the reduction ("" for none)
  // calling (the host call has not returned), enqueued, started (the queue reached it), completed, failed
  // (completed after the communicator failed), or refused (libmlucl refused the call)
  std::string state;
  std::int64_t status = 0;  // libmlucl's status of the host call
  std::int64_t queue = 0;
  std::int64_t thread = 0;
  std::int64_t op_seq = 0;  // the op calls the rank had made before it
  std::string last_op;      // the last of them ("" for none)
  // The program's framework ops around the call, outermost first ("c10d::allreduce_": the PyTorch op that
  // issued it) and where in the program (module, source line, forward op: opscope::siteText); "" for none.
  std::string framework_op;
  std::string site;
  bool in_backward = false;  // made inside a backward call of the framework (DDP's gradient buckets)
  std::optional<std::int64_t> calling_ns;  // the host call made
  std::optional<std::int64_t> enqueued_ns, started_ns, completed_ns;
  std::optional<std::int64_t> root;  // broadcast
  std::optional<std::int64_t> peer;  // send / recv
  std::int64_t stack = 0;            // its backtrace's id in "backtraces" (0: none)
};

// One rank's ring of one communicator.
struct FlightRecorderComm {
  std::string comm;  // the communicator's id, the same on every rank
  std::int64_t rank = 0, size = 0;
  bool destroyed = false;
  std::int64_t recorded = 0;  // entries ever recorded (more than ring: the oldest went)
  std::int64_t ring = 0;      // entries the ring holds
  // The last collective (not send / recv) the rank enqueued, that started, that completed.
  std::int64_t last_enqueued = 0, last_started = 0, last_completed = 0;
  std::string error;  // the communicator's error ("" for none)
};

// "c10d::allreduce_ during backward in layer1 at train.py:57": the program's op that issued a transfer.
inline std::string issuedByText(const std::string& framework_op, bool in_backward, const std::string& site) {
  std::string text = framework_op;
  if (in_backward) text += " during backward";
  if (!site.empty()) text += " in " + site;
  return text;
}

namespace flight_recorder_detail {
inline nlohmann::json optionalJson(const std::optional<std::int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}
inline nlohmann::json textOrNull(const std::string& s) {
  return s.empty() ? nlohmann::json() : nlohmann::json(s);
}
}  // namespace flight_recorder_detail

inline nlohmann::json toJson(const FlightRecorderEntry& e) {
  using namespace flight_recorder_detail;
  nlohmann::json j = {{"id", e.id},
                      {"seq", e.seq},
                      {"collective", e.collective},
                      {"count", e.count},
                      {"dtype", e.dtype},
                      {"state", e.state},
                      {"status", e.status},
                      {"queue", e.queue},
                      {"thread", e.thread},
                      {"op_seq", e.op_seq},
                      {"last_op", textOrNull(e.last_op)},
                      {"calling_ns", optionalJson(e.calling_ns)},
                      {"enqueued_ns", optionalJson(e.enqueued_ns)},
                      {"started_ns", optionalJson(e.started_ns)},
                      {"completed_ns", optionalJson(e.completed_ns)},
                      {"stack", e.stack}};
  if (!e.op.empty()) j["op"] = e.op;
  if (!e.framework_op.empty()) j["framework_op"] = e.framework_op;
  if (!e.site.empty()) j["site"] = e.site;
  if (e.in_backward) j["in_backward"] = true;
  if (e.root) j["root"] = *e.root;
  if (e.peer) j["peer"] = *e.peer;
  return j;
}

// The comm's members; its "entries" are the caller's to add.
inline nlohmann::json toJson(const FlightRecorderComm& c) {
  using namespace flight_recorder_detail;
  return {{"comm", c.comm},
          {"rank", c.rank},
          {"size", c.size},
          {"destroyed", c.destroyed},
          {"recorded", c.recorded},
          {"ring", c.ring},
          {"last_enqueued", c.last_enqueued},
          {"last_started", c.last_started},
          {"last_completed", c.last_completed},
          {"error", textOrNull(c.error)}};
}

inline void fromJson(const nlohmann::json& j, FlightRecorderEntry& e) {
  e.id = integer(j, "id").value_or(0);
  e.seq = integer(j, "seq").value_or(0);
  e.collective = text(j, "collective");
  e.count = integer(j, "count").value_or(0);
  e.dtype = text(j, "dtype");
  e.op = text(j, "op");
  e.state = text(j, "state");
  e.status = integer(j, "status").value_or(0);
  e.queue = integer(j, "queue").value_or(0);
  e.thread = integer(j, "thread").value_or(0);
  e.op_seq = integer(j, "op_seq").value_or(0);
  e.last_op = text(j, "last_op");
  e.framework_op = text(j, "framework_op");
  e.site = text(j, "site");
  e.in_backward = j.is_object() && j.contains("in_backward") && j["in_backward"].is_boolean() &&
                  j["in_backward"].get<bool>();
  e.calling_ns = integer(j, "calling_ns");
  e.enqueued_ns = integer(j, "enqueued_ns");
  e.started_ns = integer(j, "started_ns");
  e.completed_ns = integer(j, "completed_ns");
  e.root = integer(j, "root");
  e.peer = integer(j, "peer");
  e.stack = integer(j, "stack").value_or(0);
}

inline void fromJson(const nlohmann::json& j, FlightRecorderComm& c) {
  c.comm = text(j, "comm");
  c.rank = integer(j, "rank").value_or(0);
  c.size = integer(j, "size").value_or(0);
  c.destroyed =
      j.is_object() && j.contains("destroyed") && j["destroyed"].is_boolean() && j["destroyed"].get<bool>();
  c.recorded = integer(j, "recorded").value_or(0);
  c.ring = integer(j, "ring").value_or(0);
  c.last_enqueued = integer(j, "last_enqueued").value_or(0);
  c.last_started = integer(j, "last_started").value_or(0);
  c.last_completed = integer(j, "last_completed").value_or(0);
  c.error = text(j, "error");
}

}  // namespace opscope::results
