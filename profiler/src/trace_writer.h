// trace_writer.h — turns recorded events into trace.json (Chrome Trace Event Format) and keeps the
// statistics summary.txt and time_measure.csv are made of. Used by one thread at a time (the writer
// thread, then the flush).
#pragma once

#include "events.h"
#include "signatures.h"

#include <opscope/framework_site.h>
#include <opscope/results/trace_file.h>
#include <opscope/run_info.h>

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace opscope::profiler {

using results::kDevicePidBase;  // the layout is the trace's contract: opscope/results/trace_file.h

class TraceWriter {
 public:
  struct Options {
    std::int64_t origin_ns = 0;
    std::uint64_t max_bytes = 0;      // OP_TRACE_MAX_MB: events past it are dropped (counted, not traced)
    std::uint64_t segment_bytes = 0;  // OP_TRACE_SEGMENT_MB: a new file past it (0: one file)
    bool gzip = false;                // OP_TRACE_GZIP: each file is <name>.gz, gzip-compressed
    RunInfo run;
    std::string options_json;  // "otherData" members describing the options in effect
  };

  TraceWriter(Options options, const Signatures& signatures);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Starts a trace (its first file; past Options::segment_bytes the next ones are path with ".1", ".2", …
  // before ".json", each complete) written as path + ".tmp" until close(). Throws std::runtime_error (and
  // notes the error, errors()).
  void open(const std::string& path);
  bool isOpen() const { return file_ != nullptr; }
  // Counts every event of the chunk (from chunk.taken on), and writes it to the open file, if any.
  void consume(const Chunk& chunk);
  // Hands what was written so far to the file system (a killed program then leaves it on disk).
  void flushFile();
  // Writes the closing, flushes, and renames the file to its final name; a file
  // that could not be written whole stays <name>.tmp and its error is kept (errors()).
  void close();

  // summary.txt: per-op table sorted by total device time (also returned for printing).
  std::string summary() const;
  // time_measure.csv: one row per op call, in sequence order (written as path + ".tmp", renamed when
  // whole). "" when written, else the error.
  std::string writeCsv(const std::string& path) const;

  // Over every file of the run: the events in the trace files written whole (files()).
  std::uint64_t eventsWritten() const { return events_in_files_; }
  std::uint64_t eventsDropped() const { return total_dropped_; }
  const std::vector<std::string>& files() const { return files_; }
  // The trace files that could not be made or written whole: "cannot write <path>: <reason>".
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  // "rank R " for one rank of several processes (the processes' names in a merged trace), else "".
  std::string rankPrefix() const {
    return options_.run.rank >= 0 ? "rank " + std::to_string(options_.run.rank) + " " : std::string();
  }
  struct OpStats {
    std::uint64_t calls = 0;
    std::int64_t host_ns = 0;
  };
  struct DeviceStats {
    std::uint64_t tasks = 0;
    std::int64_t total_ns = 0;
    std::int64_t min_ns = 0;
    std::int64_t max_ns = 0;
  };
  struct RuntimeStats {
    std::uint64_t calls = 0;
    std::int64_t host_ns = 0;
    std::uint64_t bytes = 0;
  };
  struct Row {
    const char* framework_outer;  // Event::symbol of the op call
    const FrameworkSite* site;
    std::uint64_t seq;
    std::uint16_t op;
    std::uint32_t signature;
    std::uint32_t thread;
    std::int32_t device;
    std::uint64_t queue;
    std::int64_t host_ns;
    std::uint8_t fallback;
  };

  // Appends e's JSON events to buffer_ (when a file is open and not capped) and returns how many: a flow's
  // end whose start is not written yet waits for it, and is appended (and counted) with it.
  std::uint64_t serialize(const Event& e);
  // The JSON events serialize() writes for e.
  static std::uint64_t jsonEvents(const Event& e);
  // A track's names (metadata events), appended to buffer_ before its first event in the open file; each
  // returns the events appended (0 once named).
  std::uint64_t hostTrack(std::uint32_t tid, std::uint32_t thread);
  std::uint64_t deviceTrack(int device);
  std::uint64_t queueTrack(int device, std::uint64_t queue);
  std::uint64_t ownTrack(int device, std::uint32_t track);
  // A flow's start and end are written together, next to each other, when the second of them is seen: a
  // flow is whole in whichever file it lands in (a segment, a killed run's trace), and its end never comes
  // before its start (Chrome DevTools reads flows in file order and drops an end that comes first). Returns
  // the events appended (0 or 2).
  std::uint64_t flowHalf(std::uint64_t id, std::string text, bool start);
  struct FlowHalf {
    std::string text;  // the s or f event's JSON line
    int segment = 0;   // the file its slice was written in
  };
  std::uint64_t writeFlow(const FlowHalf& start, const FlowHalf& end);
  void emit(const std::string& text);
  void openFile(const std::string& path);
  bool segmentFull() const;
  // The most bytes close() appends (the closing and otherData): the size cap keeps room for them.
  std::uint64_t closingBytes() const;
  // Writes buffer_ (events: its JSON events, set to those of the next file's head), completes the file and
  // opens the trace's next one, naming every track known so far.
  void nextSegment(std::uint64_t& events);
  // Cached: names and signatures never change.
  const std::string& taskName(std::uint32_t id);
  const std::string& signatureJson(std::uint32_t id);

  Options options_;
  const Signatures& signatures_;
  std::FILE* file_ = nullptr;
  gzFile gz_ = nullptr;  // OP_TRACE_GZIP: writes go through it, to a duplicate of file_'s descriptor
  bool gz_failed_ = false;
  std::string path_;
  std::string base_path_;  // the trace's first file: segments are named after it
  int segment_ = 0;        // of the open file: 0 for the first
  std::string buffer_;
  // The open file's:
  std::uint64_t bytes_ = 0;
  std::uint64_t head_bytes_ = 0;   // the open file's head
  std::uint64_t trace_bytes_ = 0;  // the trace's, over its files (OP_TRACE_MAX_MB)
  std::uint64_t events_written_ = 0;
  std::uint64_t events_dropped_ = 0;
  bool capped_ = false;
  // The run's:
  std::uint64_t total_written_ = 0;
  std::uint64_t total_dropped_ = 0;
  std::vector<std::string> files_;
  std::vector<std::string> errors_;
  std::uint64_t events_in_files_ = 0;

  std::map<std::uint16_t, OpStats> ops_;
  std::map<std::string, DeviceStats> device_;      // by task name (a kernel is named after its op)
  std::map<std::string, DeviceStats> own_device_;  // opscope's own tasks, by "<tool>: <task name>"
  std::map<std::string, RuntimeStats> runtime_;
  std::vector<Row> rows_;
  // The framework's frames (modules, PyTorch ops, backward calls) by kind and name: calls, host time in
  // them and in them outside their child frames.
  struct FrameStats {
    std::uint64_t calls = 0;
    std::int64_t total_ns = 0;
    std::int64_t self_ns = 0;
  };
  struct FrameKeyHash {
    std::size_t operator()(const std::pair<std::uint8_t, std::string_view>& k) const {
      return std::hash<std::string_view>()(k.second) * 31 + k.first;
    }
  };
  std::unordered_map<std::pair<std::uint8_t, std::string_view>, FrameStats, FrameKeyHash> frames_;
  std::string label_;  // a module frame's name in the trace, "nn.Module: <path>" (reused)
  // Per OS thread: the host time of the frames ended at each depth whose parent has not ended yet.
  std::unordered_map<std::uint32_t, std::vector<std::int64_t>> child_ns_;
  std::string frameworkTables() const;
  std::unordered_map<std::uint64_t, std::pair<std::int64_t, std::uint32_t>> op_device_;  // seq -> ns, tasks
  // The tracks of the open file, named by its metadata events.
  std::map<std::uint32_t, std::pair<std::uint32_t, long>> host_threads_;  // OS tid -> (thread number, tid)
  std::set<std::pair<int, std::uint64_t>> queues_;                        // (device, queue id)
  std::set<std::pair<int, std::uint32_t>> own_tracks_;  // (device, ToolId + 256 lane): opscope's work
  // opscope's own device work of one tool runs on several queues at once (memcheck paints on the program's
  // queue and its own): a tool's track has lanes, each task on the first whose spans all ended before it
  // started, so that spans on one track never overlap. (device, ToolId) -> each lane's last end.
  std::map<std::pair<int, int>, std::vector<std::int64_t>> own_lane_ends_;
  std::set<int> devices_;  // devices with a track
  // Flows whose other end has not been seen yet (the threads' chunks reach the writer in any order): their
  // JSON text, by id. What is left at the end (a call not recorded, a task still running) is left out.
  std::unordered_map<std::uint64_t, FlowHalf> flow_starts_;
  std::unordered_map<std::uint64_t, FlowHalf> flow_ends_;
  std::unordered_map<std::uint32_t, std::string> signature_json_;
  std::unordered_map<std::uint32_t, std::string> task_names_;
};

// The interned names of device tasks (kernel names, "memcpy H2D", ...): the activity callback runs on
// queue workers and must not allocate per task once a name was seen.
class TaskNames {
 public:
  std::uint32_t intern(const char* name);
  std::string get(std::uint32_t id) const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t> ids_;
};

const TaskNames& taskNames();
TaskNames& mutableTaskNames();

}  // namespace opscope::profiler
