#include "trace_writer.h"

#include <opscope/op_call.h>
#include <opscope/text.h>

#include "../../runtime/common/no_destructor.h"

#include <mlu/dtype.h>
#include <mlu/op_args.h>

#include <opscope/private_file.h>
#include <opscope/tool.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>

#include <unistd.h>

namespace opscope::profiler {
namespace {

struct NameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct LocalNames {
  std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> ids;
};
thread_local LocalNames t_names;

const char* runtimeCategory(RuntimeCallKind kind) {
  switch (kind) {
    case RuntimeCallKind::kCollective:
    case RuntimeCallKind::kCommInit:
    case RuntimeCallKind::kCommDestroy:
      return "collective";
    case RuntimeCallKind::kMemcpy:
    case RuntimeCallKind::kMemcpyAsync:
      return "memcpy";
    case RuntimeCallKind::kMemset:
    case RuntimeCallKind::kMemsetAsync:
      return "memset";
    default:
      return "mlu_runtime";
  }
}

// A flow's id in the JSON: the op's seq, or 2^52 + the runtime call's number. Kept below 2^53 so that a
// JavaScript reader (chrome://tracing, DevTools) parses every id exactly.
std::uint64_t flowId(std::uint64_t correlation) {
  return (correlation & kRuntimeCorrelationBit)
             ? (std::uint64_t{1} << 52) | (correlation & ~kRuntimeCorrelationBit)
             : correlation;
}

bool isOpCorrelation(std::uint64_t c) {
  return c != 0 && (c & (kRuntimeCorrelationBit | kToolCorrelationBit)) == 0;
}

// opscope's own device work: the tool that enqueued it, else -1.
int ownTool(std::uint64_t correlation) {
  if ((correlation & kToolCorrelationBit) == 0) return -1;
  const std::uint64_t tool = correlation & 0xff;
  return tool < static_cast<std::uint64_t>(ToolId::kCount) ? static_cast<int>(tool) : -1;
}

// The device track of a tool's own work (its tasks on any queue of the device): above any queue id; lane L
// of tool T is track T + 256 L (tids stay 32-bit, for the Perfetto importer).
constexpr std::uint64_t kOwnTrackBase = 0xFFFF0000;
constexpr std::uint32_t kOwnLaneStride = 256;
constexpr std::size_t kOwnLanes = 16;

std::string_view ownTrackName(int tool) { return kToolRows[tool].name; }

// The category of a device task: the category of the call that enqueued it (so that a viewer can bind the
// flow between them: Chrome DevTools matches a flow event to the slice of the same ts, thread and cat).
const char* deviceCategory(const Event& e) {
  if (isOpCorrelation(e.correlation)) return "mlu_op";
  switch (static_cast<mlurtActivityKind_t>(e.sub)) {
    case MLURT_ACTIVITY_KERNEL:
      return e.correlation == 0 ? "kernel" : "mlu_runtime";
    case MLURT_ACTIVITY_MEMCPY:
      return "memcpy";
    case MLURT_ACTIVITY_MEMSET:
      return "memset";
    default:
      return "mlu_runtime";
  }
}

const char* fallbackName(std::uint8_t f) {
  switch (static_cast<OpCall::Fallback>(f)) {
    case OpCall::Fallback::kForced:
      return "forced";
    case OpCall::Fallback::kAutomatic:
      return "automatic";
    case OpCall::Fallback::kNone:
      break;
  }
  return "";
}

std::string toolsName(std::uint8_t bits) {
  std::string name;
  auto add = [&](std::uint8_t bit, const char* what) {
    if ((bits & bit) == 0) return;
    if (!name.empty()) name += " + ";
    name += what;
  };
  add(kToolCapture, "capture");
  add(kToolCompare, "autocompare");
  add(kToolOverflow, "overflow check");
  return "opscope: " + name;
}

// Microseconds with the nanoseconds as an exact fraction ("1234.567"); negative values clamp to 0.
struct Us {
  std::int64_t ns;
};

// A span's times from the trace's origin, written as its "ts" and "dur" members.
struct SpanTimes {
  std::int64_t start_ns;
  std::int64_t end_ns;
};

// Appends the pieces of a JSON text to a string without formatting or allocating per piece: strings as
// they are (the caller quotes and escapes), integers in decimal, Us as microseconds. The writer thread
// serializes every event through it.
struct Json {
  std::string& out;
  void put(std::string_view s) { out += s; }
  void put(const char* s) { out += s; }
  void put(const std::string& s) { out += s; }
  template <typename T>
  requires std::is_integral_v<T>
  void put(T v) {
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }
  // dur is shortened by the nanosecond that would put ts + dur, as a reader adds them in doubles, past the
  // end as it reads that time (228516.008 + 8.996 > 228525.004): a span that ends where the next one on its
  // track starts then never overlaps it, and readers that drop partly overlapping spans keep both.
  void put(SpanTimes t) {
    const std::int64_t start = std::max<std::int64_t>(0, t.start_ns);
    const std::int64_t end = std::max(start, t.end_ns);
    std::int64_t dur = end - start;
    const double from = static_cast<double>(start) / 1e3;
    const double to = static_cast<double>(end) / 1e3;
    while (dur > 0 && from + static_cast<double>(dur) / 1e3 > to) --dur;
    put("\"ts\":");
    put(Us{start});
    put(",\"dur\":");
    put(Us{dur});
  }
  void put(Us t) {
    const std::int64_t ns = std::max<std::int64_t>(0, t.ns);
    put(ns / 1000);
    const auto frac = static_cast<int>(ns % 1000);
    const char digits[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                            static_cast<char>('0' + frac % 10)};
    out.append(digits, 4);
  }
  template <typename... T>
  void operator()(const T&... pieces) {
    (put(pieces), ...);
  }
};

// Appends "key":value members to a JSON object, with the commas between them.
struct Members {
  Json& j;
  bool first = true;
  template <typename T>
  void operator()(std::string_view key, const T& value) {
    j(first ? "\"" : ",\"", key, "\":", value);
    first = false;
  }
};

std::string ms(std::int64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) / 1e6); }

// A collective's args: which transfer of which communicator (the merged trace of a run's ranks joins the
// ranks' spans of one transfer by comm and seq), and what it moved.
void collectiveMembers(Members& args, RuntimeCallKind kind, const Event& e) {
  const auto& v = e.scalar;
  const auto signedAt = [&](std::size_t i) { return static_cast<std::int64_t>(v[i]); };
  args("comm", v[0]);
  args("rank", signedAt(6));
  args("world", v[7]);
  if (kind != RuntimeCallKind::kCollective) return;
  const auto collective =
      static_cast<Collective>(std::min<std::uint16_t>(e.op, static_cast<std::uint16_t>(Collective::kCount)));
  args("collective", fmt::format("\"{}\"", collectiveName(collective)));
  args("seq", v[1]);
  if (collective == Collective::kBarrier) return;
  args("count", v[2]);
  // (A refused call's dtype may be any number: only a known one is cast to the enum.)
  args("dtype", fmt::format("\"{}\"", v[3] >= MLUOP_DTYPE_FLOAT && v[3] <= MLUOP_DTYPE_BOOL
                                          ? mlu::dtypeName(static_cast<mluopDataType_t>(v[3]))
                                          : std::string_view("invalid")));
  if (const std::string_view op = reduceOpName(signedAt(4)); !op.empty())
    args("op", fmt::format("\"{}\"", op));
  if (collective == Collective::kBroadcast) args("root", signedAt(5));
  if (isPointToPoint(collective)) args("peer", signedAt(5));
}

}  // namespace

std::uint32_t TaskNames::intern(const char* name) {
  const std::string_view key = name == nullptr ? std::string_view("?") : std::string_view(name);
  const auto it = t_names.ids.find(key);
  if (it != t_names.ids.end()) return it->second;
  std::uint32_t id = 0;
  {
    std::lock_guard lock(mutex_);
    const auto [global, inserted] = ids_.emplace(std::string(key), static_cast<std::uint32_t>(names_.size()));
    if (inserted) names_.emplace_back(key);
    id = global->second;
  }
  t_names.ids.emplace(std::string(key), id);
  return id;
}

std::string TaskNames::get(std::uint32_t id) const {
  std::lock_guard lock(mutex_);
  return id < names_.size() ? names_[id] : std::string("?");
}

TaskNames& mutableTaskNames() {
  // Process-wide, as the names are: a kernel name means the same for every profiler in the process. Never
  // destroyed: the trace is finished by an exit handler that may run after static destructors.
  static mlu::NoDestructor<TaskNames> names;
  return names.get();
}
const TaskNames& taskNames() { return mutableTaskNames(); }

TraceWriter::TraceWriter(Options options, const Signatures& signatures)
    : options_(std::move(options)), signatures_(signatures) {}

void TraceWriter::open(const std::string& path) {
  if (file_ != nullptr) close();
  openFile(path);
  base_path_ = path;
  segment_ = 0;
  trace_bytes_ = bytes_;
  capped_ = false;
  host_threads_.clear();
  queues_.clear();
  own_tracks_.clear();
  own_lane_ends_.clear();
  devices_.clear();
  flow_starts_.clear();
  flow_ends_.clear();
}

void TraceWriter::openFile(const std::string& name) {
  const std::string path = options_.gzip ? name + ".gz" : name;
  const std::string tmp = path + ".tmp";
  file_ = createPrivateFile(tmp).release();  // closed by close()
  if (file_ != nullptr && options_.gzip) {
    // zlib's default level: about 10x smaller (llama_train), and the writer thread keeps up.
    const int fd = dup(fileno(file_));
    gz_ = fd < 0 ? nullptr : gzdopen(fd, "wb6");
    if (gz_ == nullptr) {
      if (fd >= 0) ::close(fd);
      std::fclose(std::exchange(file_, nullptr));
      errno = ENOMEM;
    }
  }
  if (file_ == nullptr) {
    std::string error = fmt::format("cannot write {}: {}", tmp, std::strerror(errno));
    noteWriteError(error);
    errors_.push_back(error);
    throw std::runtime_error(error);
  }
  path_ = path;
  bytes_ = 0;
  events_written_ = 0;
  events_dropped_ = 0;
  // The first event (the host's name) opens the array, so every later event starts with a comma.
  std::string head = "{\"traceEvents\":[\n";
  head += fmt::format(
      "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":\"{}host (pid {})\"}}}}",
      options_.run.pid, rankPrefix(), options_.run.pid);
  head += fmt::format(
      ",\n{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"args\":{{\"sort_index\":0}}}}",
      options_.run.pid);
  emit(head);
  head_bytes_ = bytes_;
  events_written_ = 2;
  total_written_ += 2;
}

bool TraceWriter::segmentFull() const {
  if (options_.segment_bytes == 0 || file_ == nullptr || capped_) return false;
  const std::uint64_t used = bytes_ + buffer_.size();
  // A sixteenth left for the next event and the closing; a file holds at least one event.
  return used > head_bytes_ && used + options_.segment_bytes / 16 > options_.segment_bytes;
}

void TraceWriter::nextSegment(std::uint64_t& events) {
  emit(buffer_);
  events_written_ += events;
  total_written_ += events;
  buffer_.clear();
  events = 0;
  // The tracks named so far are named again at the head of the next file; flows still waiting for their
  // other end, and the size cap, go on across files.
  const auto threads = host_threads_;
  const auto devices = devices_;
  const auto queues = queues_;
  const auto own = own_tracks_;
  const int next = segment_ + 1;
  close();
  try {
    openFile(results::segmentPath(base_path_, next));
  } catch (const std::runtime_error&) {
    return;  // said (errors(), run.json); the files before are whole, later events are not traced
  }
  segment_ = next;
  host_threads_.clear();
  devices_.clear();
  queues_.clear();
  own_tracks_.clear();
  for (const auto& [tid, info] : threads) events += hostTrack(tid, info.first);
  for (const int device : devices) events += deviceTrack(device);
  for (const auto& [device, queue] : queues) events += queueTrack(device, queue);
  for (const auto& [device, tool] : own) events += ownTrack(device, tool);
}

TraceWriter::~TraceWriter() {
  if (gz_ != nullptr) gzclose(gz_);
  if (file_ != nullptr) std::fclose(file_);
}

void TraceWriter::emit(const std::string& text) {
  if (file_ == nullptr) return;
  if (gz_ != nullptr) {
    if (!text.empty() && gzwrite(gz_, text.data(), static_cast<unsigned>(text.size())) == 0)
      gz_failed_ = true;
  } else {
    std::fwrite(text.data(), 1, text.size(), file_);
  }
  bytes_ += text.size();
  trace_bytes_ += text.size();
}

const std::string& TraceWriter::taskName(std::uint32_t id) {
  auto [it, inserted] = task_names_.try_emplace(id);
  if (inserted) it->second = taskNames().get(id);
  return it->second;
}

const std::string& TraceWriter::signatureJson(std::uint32_t id) {
  auto [it, inserted] = signature_json_.try_emplace(id);
  if (inserted) it->second = signatures_.get(id).json;
  return it->second;
}

void TraceWriter::consume(const Chunk& chunk) {
  const std::size_t n = chunk.count.load(std::memory_order_acquire);
  if (n <= chunk.taken) return;
  buffer_.clear();
  std::uint64_t events = 0;   // JSON events in buffer_
  std::uint64_t dropped = 0;  // JSON events left out once the file is capped
  for (std::size_t i = chunk.taken; i < n; ++i) {
    if (segmentFull()) nextSegment(events);  // OP_TRACE_SEGMENT_MB: the next file, trace.<n>.json
    events += serialize(chunk.events[i]);
    if (capped_) dropped += jsonEvents(chunk.events[i]);
  }
  if (file_ == nullptr) return;
  events_dropped_ += dropped;
  total_dropped_ += dropped;
  if (!capped_ && options_.max_bytes > 0 &&
      trace_bytes_ + buffer_.size() + closingBytes() > options_.max_bytes) {
    capped_ = true;
    std::fprintf(stderr,
                 "opscope: profiler: OP_TRACE_MAX_MB=%llu reached; %s keeps the first %llu events and later "
                 "ones are left out (the summary still counts them)\n",
                 static_cast<unsigned long long>(options_.max_bytes >> 20), path_.c_str(),
                 static_cast<unsigned long long>(events_written_));  // (of this file: the last of the trace)
  }
  if (capped_) {
    events_dropped_ += events;
    total_dropped_ += events;
    return;
  }
  emit(buffer_);
  events_written_ += events;
  total_written_ += events;
}

// Each track's names are written just before its first event in the file (not at the end), so that a file
// cut short by a killed program still names every track it has.

std::uint64_t TraceWriter::hostTrack(std::uint32_t tid, std::uint32_t thread) {
  if (!host_threads_.try_emplace(tid, thread, static_cast<long>(tid)).second) return 0;
  const long pid = options_.run.pid;
  const std::string name = static_cast<long>(tid) == pid ? fmt::format("thread {} (main)", thread)
                                                         : fmt::format("thread {}", thread);
  auto it = std::back_inserter(buffer_);
  fmt::format_to(
      it, ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":\"{}\"}}}}",
      pid, tid, name);
  fmt::format_to(it,
                 ",\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_"
                 "index\":{}}}}}",
                 pid, tid, thread);
  return 2;
}

std::uint64_t TraceWriter::deviceTrack(int device) {
  if (!devices_.insert(device).second) return 0;
  const long dpid = kDevicePidBase + device;
  auto it = std::back_inserter(buffer_);
  fmt::format_to(
      it, ",\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":\"{}MLU {}\"}}}}", dpid,
      rankPrefix(), device);
  fmt::format_to(it,
                 ",\n{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"args\":{{\"sort_"
                 "index\":{}}}}}",
                 dpid, device + 1);
  return 2;
}

std::uint64_t TraceWriter::queueTrack(int device, std::uint64_t queue) {
  if (!queues_.insert({device, queue}).second) return 0;
  fmt::format_to(std::back_inserter(buffer_),
                 ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":"
                 "\"queue {}\"}}}}",
                 kDevicePidBase + device, queue, queue);
  return 1;
}

std::uint64_t TraceWriter::ownTrack(int device, std::uint32_t track) {
  if (!own_tracks_.insert({device, track}).second) return 0;
  const long dpid = kDevicePidBase + device;
  const int tool = static_cast<int>(track % kOwnLaneStride);
  const std::uint64_t tid = kOwnTrackBase + track;
  auto it = std::back_inserter(buffer_);
  fmt::format_to(it,
                 ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":"
                 "\"opscope {}\"}}}}",
                 dpid, tid, ownTrackName(tool));
  fmt::format_to(it,
                 ",\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_"
                 "index\":{}}}}}",
                 dpid, tid, tid);
  return 2;
}

std::uint64_t TraceWriter::flowHalf(std::uint64_t id, std::string text, bool start) {
  auto& mine = start ? flow_starts_ : flow_ends_;
  auto& others = start ? flow_ends_ : flow_starts_;
  FlowHalf half{std::move(text), segment_};
  const auto other = others.find(id);
  if (other == others.end()) {
    mine[id] = std::move(half);
    return 0;
  }
  const FlowHalf match = std::move(other->second);
  others.erase(other);
  return start ? writeFlow(half, match) : writeFlow(match, half);
}

std::uint64_t TraceWriter::writeFlow(const FlowHalf& start, const FlowHalf& end) {
  // Both slices it joins must be in this file: a flow across two segments is left out of both.
  if (start.segment != segment_ || end.segment != segment_) return 0;
  buffer_ += start.text;
  buffer_ += end.text;
  return 2;
}

std::uint64_t TraceWriter::jsonEvents(const Event& e) {
  switch (e.kind) {
    case EventKind::kOp:
      return e.enqueued > 0 && e.sub == 0 ? 2 : 1;
    case EventKind::kRuntime:
      return e.enqueued > 0 ? 2 : 1;
    case EventKind::kDevice:
      return e.flow_end ? 2 : 1;
    case EventKind::kTools:
    case EventKind::kMemory:
    case EventKind::kStep:
    case EventKind::kFramework:
      break;
  }
  return 1;
}

std::uint64_t TraceWriter::serialize(const Event& e) {
  Json j{buffer_};
  const auto ts = [&](std::int64_t ns) { return Us{ns - options_.origin_ns}; };
  const auto span = [&](std::int64_t start, std::int64_t end) {
    return SpanTimes{start - options_.origin_ns, end - options_.origin_ns};
  };
  const long pid = options_.run.pid;
  switch (e.kind) {
    case EventKind::kOp: {
      const auto op = static_cast<mlu::OpId>(e.op);
      OpStats& stats = ops_[e.op];
      ++stats.calls;
      stats.host_ns += e.end_ns - e.start_ns;
      rows_.push_back({e.symbol, static_cast<const FrameworkSite*>(e.site), e.correlation, e.op, e.name,
                       e.thread, e.device, e.queue, e.end_ns - e.start_ns, e.sub});
      if (capped_ || file_ == nullptr) return 0;
      std::uint64_t names = hostTrack(e.tid, e.thread);
      const std::string_view cat = e.sub != 0 ? "fallback" : "mlu_op";
      j(",\n{\"ph\":\"X\",\"cat\":\"", cat, "\",\"name\":\"", mlu::opName(op), "\",\"pid\":", pid,
        ",\"tid\":", e.tid, ",", span(e.start_ns, e.end_ns), ",\"args\":{\"op_id\":", e.op,
        ",\"seq\":", e.correlation, ",\"device\":", e.device, ",\"queue\":", e.queue, signatureJson(e.name));
      appendScalarMembers(buffer_, op, e);
      if (e.sub != 0) j(",\"fallback\":\"", fallbackName(e.sub), "\"");
      if (e.status != 0) j(",\"status\":", e.status);
      if (e.region != nullptr) {  // the program's label, escaped
        j(",\"region\":");
        appendJsonString(buffer_, e.region);
      }
      j("}}");
      if (e.enqueued > 0 && e.sub == 0) {
        std::string start;
        Json{start}(",\n{\"ph\":\"s\",\"cat\":\"mlu_op\",\"name\":\"mlu_op\",\"id\":", flowId(e.correlation),
                    ",\"pid\":", pid, ",\"tid\":", e.tid, ",\"ts\":", ts(e.start_ns), "}");
        return names + 1 + flowHalf(flowId(e.correlation), std::move(start), true);
      }
      return names + 1;
    }
    case EventKind::kRuntime: {
      const auto kind = static_cast<RuntimeCallKind>(e.sub);
      const char* symbol = e.symbol == nullptr ? "mlurt?" : e.symbol;
      RuntimeStats& stats = runtime_[symbol];
      ++stats.calls;
      stats.host_ns += e.end_ns - e.start_ns;
      stats.bytes += e.value;
      if (capped_ || file_ == nullptr) return 0;
      std::uint64_t names = hostTrack(e.tid, e.thread);
      const std::string_view cat = runtimeCategory(kind);
      j(",\n{\"ph\":\"X\",\"cat\":\"", cat, "\",\"name\":\"", std::string_view(symbol), "\",\"pid\":", pid,
        ",\"tid\":", e.tid, ",", span(e.start_ns, e.end_ns), ",\"args\":{");
      Members args{j};
      if (e.enqueued > 0) args("correlation", e.correlation & ~kRuntimeCorrelationBit);  // its device work's
      if (e.value > 0) args("bytes", e.value);
      if (e.queue != 0) args("queue", e.queue);
      if (e.status != 0) args("status", e.status);
      if (e.scalars == kScalarSlots) collectiveMembers(args, kind, e);
      j("}}");
      if (e.enqueued > 0) {
        std::string start;
        Json{start}(",\n{\"ph\":\"s\",\"cat\":\"", cat, "\",\"name\":\"", cat,
                    "\",\"id\":", flowId(e.correlation), ",\"pid\":", pid, ",\"tid\":", e.tid,
                    ",\"ts\":", ts(e.start_ns), "}");
        return names + 1 + flowHalf(flowId(e.correlation), std::move(start), true);
      }
      return names + 1;
    }
    case EventKind::kTools: {
      if (capped_ || file_ == nullptr) return 0;
      std::uint64_t names = hostTrack(e.tid, e.thread);
      j(",\n{\"ph\":\"X\",\"cat\":\"opscope\",\"name\":\"", toolsName(e.sub), "\",\"pid\":", pid,
        ",\"tid\":", e.tid, ",", span(e.start_ns, e.end_ns), ",\"args\":{\"op\":\"",
        mlu::opName(static_cast<mlu::OpId>(e.op)), "\",\"seq\":", e.correlation, "}}");
      return names + 1;
    }
    case EventKind::kDevice: {
      const std::string& name = taskName(e.name);
      const std::int64_t dur = e.end_ns - e.start_ns;
      if (const int tool = ownTool(e.correlation); tool >= 0) {
        // opscope's own work: on a track of the tool's, in figures of its own, never the program's.
        DeviceStats& own = own_device_[fmt::format("{}: {}", ownTrackName(tool), name)];
        ++own.tasks;
        own.total_ns += dur;
        if (capped_ || file_ == nullptr) return 0;
        // Its lane: the first whose spans all ended before it started (the last lane takes the rest).
        std::vector<std::int64_t>& ends = own_lane_ends_[{e.device, tool}];
        std::size_t lane = 0;
        while (lane < ends.size() && ends[lane] > e.start_ns) ++lane;
        if (lane == ends.size() && lane < kOwnLanes) ends.push_back(e.end_ns);
        lane = std::min(lane, ends.size() - 1);
        ends[lane] = std::max(ends[lane], e.end_ns);
        const auto track =
            static_cast<std::uint32_t>(tool) + kOwnLaneStride * static_cast<std::uint32_t>(lane);
        const std::uint64_t names = deviceTrack(e.device) + ownTrack(e.device, track);
        j(",\n{\"ph\":\"X\",\"cat\":\"opscope\",\"name\":");
        appendJsonString(buffer_, name);
        j(",\"pid\":", kDevicePidBase + e.device, ",\"tid\":", kOwnTrackBase + track, ",",
          span(e.start_ns, e.end_ns), ",\"args\":{\"queue\":", e.queue);
        if (e.value > 0) j(",\"bytes\":", e.value);
        if (e.status != 0) j(",\"status\":", e.status);
        j("}}");
        return names + 1;
      }
      DeviceStats& stats = device_[name];
      if (stats.tasks == 0 || dur < stats.min_ns) stats.min_ns = dur;
      stats.max_ns = std::max(stats.max_ns, dur);
      ++stats.tasks;
      stats.total_ns += dur;
      if (isOpCorrelation(e.correlation)) {
        auto& [ns, tasks] = op_device_[e.correlation];
        ns += dur;
        ++tasks;
      }
      if (capped_ || file_ == nullptr) return 0;
      const std::uint64_t names = deviceTrack(e.device) + queueTrack(e.device, e.queue);
      // A transfer of the collective library runs as a kernel named mlucl_<collective>.
      const std::string_view cat =
          std::string_view(name).starts_with("mlucl_") ? "collective" : deviceCategory(e);
      const long dpid = kDevicePidBase + e.device;
      j(",\n{\"ph\":\"X\",\"cat\":\"", cat, "\",\"name\":");
      appendJsonString(buffer_, name);
      j(",\"pid\":", dpid, ",\"tid\":", e.queue, ",", span(e.start_ns, e.end_ns), ",\"args\":{");
      Members args{j};
      if (isOpCorrelation(e.correlation)) args("seq", e.correlation);
      if (e.correlation & kRuntimeCorrelationBit)
        args("correlation", e.correlation & ~kRuntimeCorrelationBit);
      if (e.value > 0) args("bytes", e.value);
      if (e.status != 0) args("status", e.status);
      j("}}");
      if (!e.flow_end) return names + 1;
      std::string end;
      Json{end}(",\n{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"", cat, "\",\"name\":\"", cat,
                "\",\"id\":", flowId(e.correlation), ",\"pid\":", dpid, ",\"tid\":", e.queue,
                ",\"ts\":", ts(e.start_ns), "}");
      return names + 1 + flowHalf(flowId(e.correlation), std::move(end), false);
    }
    case EventKind::kFramework: {
      // A module, PyTorch op or backward call: its figures (self: outside the frames inside it, which end
      // before it on its thread), then its span, which nests the library's op spans of its thread.
      const std::string_view name = e.symbol != nullptr ? std::string_view(e.symbol) : std::string_view("?");
      const std::int64_t dur = e.end_ns - e.start_ns;
      std::vector<std::int64_t>& child = child_ns_[e.tid];
      const std::size_t depth = std::min<std::uint64_t>(e.value, 255);
      if (child.size() < depth + 2) child.resize(depth + 2, 0);
      FrameStats& stats = frames_[{e.sub, name}];
      ++stats.calls;
      stats.total_ns += dur;
      stats.self_ns += dur - child[depth + 1];
      child[depth + 1] = 0;
      child[depth] += dur;
      if (capped_ || file_ == nullptr) return 0;
      std::uint64_t names = hostTrack(e.tid, e.thread);
      const auto kind = static_cast<FrameworkFrame::Kind>(e.sub);
      // Kineto's categories: a module is a python_function, an op or autograd node a cpu_op.
      const std::string_view cat = e.op != 0                               ? "fallback"
                                   : kind == FrameworkFrame::Kind::kRegion ? "user_annotation"
                                   : kind == FrameworkFrame::Kind::kModule ? "python_function"
                                                                           : "cpu_op";
      j(",\n{\"ph\":\"X\",\"cat\":\"", cat, "\",\"name\":");
      if (kind == FrameworkFrame::Kind::kModule) {
        label_.assign("nn.Module: ").append(name);
        appendJsonString(buffer_, label_);
      } else {
        appendJsonString(buffer_, name);
      }
      j(",\"pid\":", pid, ",\"tid\":", e.tid, ",", span(e.start_ns, e.end_ns), ",\"args\":{");
      Members args{j};
      if (const auto* site = static_cast<const FrameworkSite*>(e.site); site != nullptr) {
        // The program's names, escaped.
        auto text = [&](const char* key, const std::string& value) {
          if (value.empty()) return;
          args(key, std::string_view());  // "key": (the value written raw, here nothing)
          appendJsonString(buffer_, value);
        };
        text("module", site->module);
        text("source", site->source);
        text("forward_op", site->forward_op);
      }
      if (e.op != 0) args("fallback", std::string_view("true"));
      j("}}");
      return names + 1;
    }
    case EventKind::kStep: {
      // PyTorch's name and category for a step, which trace analyses look for.
      if (capped_ || file_ == nullptr) return 0;
      std::uint64_t names = hostTrack(e.tid, e.thread);
      j(",\n{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#", e.correlation,
        "\",\"pid\":", pid, ",\"tid\":", e.tid, ",", span(e.start_ns, e.end_ns),
        ",\"args\":{\"step\":", e.correlation, "}}");
      return names + 1;
    }
    case EventKind::kMemory: {
      if (capped_ || file_ == nullptr) return 0;
      const std::uint64_t names = deviceTrack(e.device);
      // The program's memory; opscope's (sub 1: what its tools hold themselves) on a counter of its own.
      j(",\n{\"ph\":\"C\",\"name\":\"", e.sub == 0 ? "device memory" : "opscope device memory",
        "\",\"pid\":", kDevicePidBase + e.device, ",\"ts\":", ts(e.start_ns),
        ",\"args\":{\"bytes\":", e.value, "}}");
      return names + 1;
    }
  }
  return 0;
}

void TraceWriter::flushFile() {
  if (gz_ != nullptr) {
    gzflush(gz_, Z_SYNC_FLUSH);  // what was written so far inflates from the file as it is
  } else if (file_ != nullptr) {
    std::fflush(file_);
  }
}

std::uint64_t TraceWriter::closingBytes() const {
  // The fixed text and counts (under 400 bytes), the command line escaped (at most six bytes a character),
  // the start time and the options.
  return 400 + 6 * options_.run.command_line.size() + options_.run.start_time_iso.size() +
         options_.options_json.size();
}

void TraceWriter::close() {
  if (file_ == nullptr) return;
  std::string out;
  auto it = std::back_inserter(out);
  const long pid = options_.run.pid;
  out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"opscope\",\"format_version\":";
  out += std::to_string(results::kTraceFormatVersion);
  out += ",\"version\":\"0.1.0\",\"command\":";
  appendJsonString(out, options_.run.command_line);
  fmt::format_to(
      it,
      ",\"pid\":{},\"rank\":{},\"world_size\":{},\"start_time\":\"{}\",\"clock\":\"CLOCK_MONOTONIC, ts in "
      "microseconds from the run's start\",\"origin_monotonic_ns\":{}",
      pid, options_.run.rank, options_.run.world_size, options_.run.start_time_iso, options_.origin_ns);
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  out += ",\"host\":";  // with origin_monotonic_ns: ranks on one host share that clock
  appendJsonString(out, host);
  fmt::format_to(it, ",\"events_written\":{},\"events_dropped\":{},\"segment\":{}", events_written_,
                 events_dropped_, segment_);
  if (!options_.options_json.empty()) out += "," + options_.options_json;
  out += "}}\n";
  emit(out);
  const std::string tmp = path_ + ".tmp";
  if (gz_ != nullptr) {
    const bool failed = gzclose(std::exchange(gz_, nullptr)) != Z_OK || std::exchange(gz_failed_, false);
    if (failed) {
      std::fclose(std::exchange(file_, nullptr));
      std::string error = fmt::format("cannot write {}: the compressed write failed", tmp);
      noteWriteError(error);
      errors_.push_back(std::move(error));
      return;
    }
  }
  // A write that failed (a full disk) is said, and the unfinished file stays trace.json.tmp: never a
  // trace.json that looks whole.
  if (std::string error = closeChecked(UniqueFile(std::exchange(file_, nullptr)), tmp); !error.empty()) {
    errors_.push_back(std::move(error));
    return;
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    std::string error = fmt::format("cannot write {}: {}", path_, std::strerror(errno));
    noteWriteError(error);
    errors_.push_back(std::move(error));
    return;
  }
  files_.push_back(path_);
  events_in_files_ += events_written_;
}

std::string TraceWriter::summary() const {
  struct Line {
    std::string name;
    std::uint64_t calls = 0;
    std::int64_t host_ns = 0;
    DeviceStats device;
  };
  std::vector<Line> lines;
  std::int64_t device_total = 0;
  for (const auto& [op, stats] : ops_) {
    Line line;
    line.name = std::string(mlu::opName(static_cast<mlu::OpId>(op)));
    line.calls = stats.calls;
    line.host_ns = stats.host_ns;
    if (const auto it = device_.find(line.name); it != device_.end()) line.device = it->second;
    device_total += line.device.total_ns;
    lines.push_back(std::move(line));
  }
  std::sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return a.device.total_ns != b.device.total_ns ? a.device.total_ns > b.device.total_ns : a.name < b.name;
  });
  std::uint64_t calls = 0;
  std::int64_t host_total = 0;
  for (const Line& l : lines) {
    calls += l.calls;
    host_total += l.host_ns;
  }
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(
      it, "opscope profiler: {} op calls, {} ms of device time in ops, {} ms of host time in op calls\n",
      calls, ms(device_total), ms(host_total));
  fmt::format_to(it, "{:<36} {:>8} {:>14} {:>12} {:>12} {:>12} {:>14} {:>12} {:>8}\n", "Name", "Calls",
                 "Device total", "Device mean", "Device min", "Device max", "Host total", "Host mean",
                 "Device %");
  for (const Line& l : lines) {
    const std::int64_t mean =
        l.device.tasks ? l.device.total_ns / static_cast<std::int64_t>(l.device.tasks) : 0;
    const double share =
        device_total > 0 ? 100.0 * static_cast<double>(l.device.total_ns) / static_cast<double>(device_total)
                         : 0.0;
    fmt::format_to(it, "{:<36} {:>8} {:>11} ms {:>9} ms {:>9} ms {:>9} ms {:>11} ms {:>9} ms {:>7.2f}%\n",
                   l.name, l.calls, ms(l.device.total_ns), ms(mean), ms(l.device.min_ns), ms(l.device.max_ns),
                   ms(l.host_ns), ms(l.calls ? l.host_ns / static_cast<std::int64_t>(l.calls) : 0), share);
  }
  out += frameworkTables();
  if (!runtime_.empty()) {
    fmt::format_to(it, "\n{:<36} {:>8} {:>14} {:>16}\n", "Runtime call", "Calls", "Host total", "Bytes");
    for (const auto& [symbol, stats] : runtime_) {
      fmt::format_to(it, "{:<36} {:>8} {:>11} ms {:>16}\n", symbol, stats.calls, ms(stats.host_ns),
                     stats.bytes);
    }
  }
  bool other = false;
  for (const auto& [name, stats] : device_) {
    bool is_op = false;
    for (const Line& l : lines) is_op = is_op || l.name == name;
    if (is_op) continue;
    if (!other) fmt::format_to(it, "\n{:<36} {:>8} {:>14}\n", "Other device task", "Tasks", "Device total");
    other = true;
    fmt::format_to(it, "{:<36} {:>8} {:>11} ms\n", name, stats.tasks, ms(stats.total_ns));
  }
  if (!own_device_.empty()) {
    fmt::format_to(it, "\n{:<36} {:>8} {:>14}\n", "opscope's own device work", "Tasks", "Device total");
    for (const auto& [name, stats] : own_device_) {
      fmt::format_to(it, "{:<36} {:>8} {:>11} ms\n", name, stats.tasks, ms(stats.total_ns));
    }
  }
  if (total_dropped_ > 0) {
    fmt::format_to(it, "\n(trace capped by OP_TRACE_MAX_MB: {} events left out of the trace)\n",
                   total_dropped_);
  }
  return out;
}

// The views of a framework's program (PyTorch's key_averages() and module hierarchy): by PyTorch op and by
// module, each with its frames' calls and host time (self: outside the frames inside it) and the device
// time of the library calls made in it (the outermost op of each call; the innermost module). "" when the
// program declared no frames.
std::string TraceWriter::frameworkTables() const {
  if (frames_.empty()) return "";
  std::map<std::string_view, std::int64_t> device_by_op, device_by_module;
  std::int64_t device_total = 0;
  for (const Row& r : rows_) {
    const auto it = op_device_.find(r.seq);
    if (it == op_device_.end()) continue;
    device_total += it->second.first;
    if (r.framework_outer != nullptr) device_by_op[r.framework_outer] += it->second.first;
    if (r.site != nullptr && !r.site->module.empty()) device_by_module[r.site->module] += it->second.first;
  }
  struct Line {
    std::string_view name;
    FrameStats host;
    std::int64_t device_ns = 0;
  };
  std::vector<Line> ops, modules;
  for (const auto& [key, stats] : frames_) {
    const bool module = key.first == static_cast<std::uint8_t>(FrameworkFrame::Kind::kModule) ||
                        key.first == static_cast<std::uint8_t>(FrameworkFrame::Kind::kRegion);
    const auto& device = module ? device_by_module : device_by_op;
    const auto d = device.find(key.second);
    (module ? modules : ops).push_back({key.second, stats, d != device.end() ? d->second : 0});
  }
  constexpr std::size_t kShown = 40;
  std::string out;
  auto it = std::back_inserter(out);
  auto table = [&](std::vector<Line>& lines, const char* title, const char* head) {
    std::sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
      return a.device_ns != b.device_ns           ? a.device_ns > b.device_ns
             : a.host.total_ns != b.host.total_ns ? a.host.total_ns > b.host.total_ns
                                                  : a.name < b.name;
    });
    fmt::format_to(it, "\n{}\n{:<48} {:>8} {:>14} {:>14} {:>14} {:>8}\n", title, head, "Calls", "Host total",
                   "Host self", "Device total", "Device %");
    for (std::size_t i = 0; i < lines.size() && i < kShown; ++i) {
      const Line& l = lines[i];
      const double share = device_total > 0
                               ? 100.0 * static_cast<double>(l.device_ns) / static_cast<double>(device_total)
                               : 0.0;
      fmt::format_to(it, "{:<48} {:>8} {:>11} ms {:>11} ms {:>11} ms {:>7.2f}%\n", l.name.substr(0, 48),
                     l.host.calls, ms(l.host.total_ns), ms(l.host.self_ns), ms(l.device_ns), share);
    }
    if (lines.size() > kShown) fmt::format_to(it, "({} more)\n", lines.size() - kShown);
  };
  if (!ops.empty())
    table(ops, "By framework op (device: the library calls each op made, as the outermost op around them):",
          "Framework op");
  if (!modules.empty())
    table(modules, "By module (device: the library calls made in it, outside its submodules):", "Module");
  return out;
}

std::string TraceWriter::writeCsv(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  UniqueFile file = createPrivateFile(tmp);
  std::FILE* f = file.get();
  if (f == nullptr) {
    std::string error = fmt::format("cannot write {}: {}", tmp, std::strerror(errno));
    noteWriteError(error);
    return error;
  }
  std::vector<Row> rows = rows_;
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.seq < b.seq; });
  std::fputs(
      "name,seq,thread,device,queue,host_ms,device_ms,device_tasks,fallback,shapes,framework_op,module\n", f);
  std::map<std::uint32_t, std::string> shapes;
  for (const Row& r : rows) {
    auto [pos, inserted] = shapes.try_emplace(r.signature);
    if (inserted) pos->second = signatures_.get(r.signature).shapes;
    std::int64_t device_ns = 0;
    std::uint32_t tasks = 0;
    if (const auto it = op_device_.find(r.seq); it != op_device_.end())
      std::tie(device_ns, tasks) = it->second;
    const std::string line = fmt::format(
        "{},{},{},{},{},{:.6f},{:.6f},{},{},\"{}\",\"{}\",\"{}\"\n",
        mlu::opName(static_cast<mlu::OpId>(r.op)), r.seq, r.thread, r.device, r.queue,
        static_cast<double>(r.host_ns) / 1e6, static_cast<double>(device_ns) / 1e6, tasks,
        fallbackName(r.fallback), pos->second,
        csvQuoted(r.framework_outer != nullptr ? std::string_view(r.framework_outer) : std::string_view()),
        csvQuoted(r.site != nullptr ? std::string_view(r.site->module) : std::string_view()));
    std::fputs(line.c_str(), f);
  }
  // What a full disk cut short stays time_measure.csv.tmp, as the trace does.
  if (std::string error = closeChecked(std::move(file), tmp); !error.empty()) return error;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string error = fmt::format("cannot write {}: {}", path, std::strerror(errno));
    noteWriteError(error);
    return error;
  }
  return "";
}

}  // namespace opscope::profiler
