// op-replay — re-runs ops captured in capture.db on the simulated MLU (or the CPU reference): checks the
// replay reproduces the captured outputs, compares against the CPU reference (--acc_check), times runs
// (--run_times), and exports tensors for NumPy (--export-npy).
//
// Exit status: 0 all good; 1 an output differs from the capture or an accuracy check failed; 2 bad
// arguments; 3 the database cannot be read (missing, not SQLite, truncated, unknown op id, a damaged op:
// the ops that can be read are still replayed).
#include <opscope/capture/replay.h>
#include <opscope/compare/metrics.h>
#include <opscope/compare/tolerance.h>
#include <opscope/config.h>
#include <opscope/op_format.h>
#include <opscope/private_file.h>
#include <opscope/progress.h>
#include <opscope/rundb/reader.h>
#include <opscope/text.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace opscope::capture;
using namespace opscope::rundb;
using opscope::compare::compareTensors;
using opscope::compare::formatMetrics;
using opscope::compare::toleranceFor;

constexpr const char* kUsage =
    "usage: op-replay DB_OR_DIR [--list] [--op-id N]... [--seq N]... [--name REGEX] [--acc_check]\n"
    "                 [--run_times N] [--sync_time_measure] [--device mlu|cpu] [--export-npy DIR]\n"
    "\n"
    "Re-runs ops captured by opscope (OP_CAPTURE=1) from capture.db or a result directory.\n"
    "  --list               one row per captured op (id, seq, name, input shapes and dtypes, and where\n"
    "                       in the program it was called: module, line), then exit\n"
    "  --op-id N            replay op N (repeatable; default: every op, or those --name selects)\n"
    "  --seq N              replay the op of call number N (opscope's #N; repeatable)\n"
    "  --name REGEX         replay the ops whose name matches REGEX (ECMAScript, whole name)\n"
    "  --acc_check          also run the CPU reference and compare each output (allclose, diffs...)\n"
    "  --run_times N        run each op N times, printing one SyncExecuteTimer line per run\n"
    "  --sync_time_measure  time runs on the device queue (notifiers) instead of on the host\n"
    "  --device mlu|cpu     run on the simulated MLU (default) or on the CPU reference\n"
    "  --export-npy DIR     write every tensor of the selected ops as .npy files\n"
    "Dashed and underscored spellings are both accepted (--acc-check, --op_id...).\n"
    "Exit status: 0 ok, 1 a check failed, 2 bad arguments, 3 the database (or an op of it) cannot be read.\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string db;
  bool list = false;
  std::vector<std::int64_t> op_ids;
  std::vector<std::uint64_t> seqs;
  std::optional<std::string> name;
  bool acc_check = false;
  int run_times = 0;
  bool sync_time = false;
  ReplayDevice device = ReplayDevice::kMlu;
  std::optional<std::string> export_dir;
};

std::int64_t wholeNumber(const std::string& flag, const std::string& v, std::int64_t lo) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || x < lo) {
    throw UsageError(fmt::format("{}: '{}' is not a whole number >= {}", flag, v, lo));
  }
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::optional<std::string> inline_value;
    if (arg.starts_with("--")) {
      if (const auto eq = arg.find('='); eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
      for (auto& c : arg) {
        if (c == '_') c = '-';
      }
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw UsageError(fmt::format("{} needs a value", arg));
      return args[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--list") {
      o.list = true;
    } else if (arg == "--op-id") {
      o.op_ids.push_back(wholeNumber("--op-id", value(), 1));
    } else if (arg == "--seq") {
      o.seqs.push_back(static_cast<std::uint64_t>(wholeNumber("--seq", value(), 1)));
    } else if (arg == "--name") {
      o.name = value();
    } else if (arg == "--acc-check") {
      o.acc_check = true;
    } else if (arg == "--run-times") {
      o.run_times = static_cast<int>(wholeNumber("--run_times", value(), 1));
    } else if (arg == "--sync-time-measure") {
      o.sync_time = true;
    } else if (arg == "--device") {
      const std::string d = value();
      if (d == "mlu") {
        o.device = ReplayDevice::kMlu;
      } else if (d == "cpu") {
        o.device = ReplayDevice::kCpu;
      } else {
        throw UsageError(fmt::format("--device: '{}' is not mlu or cpu", d));
      }
    } else if (arg == "--export-npy") {
      o.export_dir = value();
    } else if (arg.starts_with("-")) {
      throw UsageError(fmt::format("unknown option '{}'", args[i]));
    } else if (o.db.empty()) {
      o.db = arg;
    } else {
      throw UsageError(fmt::format("unexpected argument '{}' (one database at a time)", arg));
    }
  }
  if (o.db.empty()) throw UsageError("no database given");
  return o;
}

// NumPy's dtype string for a dtype; bfloat16 has none and is widened to float32.
const char* npyDescr(mluopDataType_t dtype) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
    case MLUOP_DTYPE_BFLOAT16:
      return "<f4";
    case MLUOP_DTYPE_HALF:
      return "<f2";
    case MLUOP_DTYPE_DOUBLE:
      return "<f8";
    case MLUOP_DTYPE_INT8:
      return "|i1";
    case MLUOP_DTYPE_INT16:
      return "<i2";
    case MLUOP_DTYPE_INT32:
      return "<i4";
    case MLUOP_DTYPE_INT64:
      return "<i8";
    case MLUOP_DTYPE_UINT8:
      return "|u1";
    case MLUOP_DTYPE_BOOL:
      return "|b1";
    case MLUOP_DTYPE_INVALID:
      break;
  }
  return "|u1";
}

// A .npy file, format version 1.0.
void writeNpy(const fs::path& path, const TensorRecord& t) {
  opscope::Bytes data = t.data;
  if (t.dtype == MLUOP_DTYPE_BFLOAT16) {
    data.resize(t.data.size() * 2);
    for (std::size_t i = 0; i < t.data.size() / 2; ++i) {
      std::uint16_t bits;
      std::memcpy(&bits, t.data.data() + 2 * i, 2);
      const float f = mlu::bfloat16ToFloat(bits);
      std::memcpy(data.data() + 4 * i, &f, 4);
    }
  }
  std::string shape = "(";
  for (std::size_t i = 0; i < t.shape.size(); ++i) shape += fmt::format("{}, ", t.shape[i]);
  if (t.shape.size() > 1) shape.resize(shape.size() - 2);
  if (t.shape.size() == 1) shape.pop_back();
  shape += ")";
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", npyDescr(t.dtype), shape);
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const std::uint16_t len = static_cast<std::uint16_t>(header.size());
  const unsigned char len_le[2] = {static_cast<unsigned char>(len & 0xff),
                                   static_cast<unsigned char>(len >> 8)};
  std::string file(reinterpret_cast<const char*>(magic), 8);
  file.append(reinterpret_cast<const char*>(len_le), 2);
  file += header;
  file.append(reinterpret_cast<const char*>(data.data()), data.size());
  if (const std::string error = opscope::writePrivateFile(path.string(), file); !error.empty())
    throw std::runtime_error(error);
}

// A file name part from names read from capture.db (untrusted): letters, digits, '_', '-' and '.' kept,
// anything else (a '/', a NUL) '_', and no name that is all dots: an export never leaves its folder.
std::string safeNamePart(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 64)) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
    out += keep ? c : '_';
  }
  if (out.find_first_not_of('.') == std::string::npos) out.insert(0, "_");
  return out;
}

// "bfloat16[2,3]", as every opscope output writes a tensor (op_format.h).
std::string tensorOf(const TensorRecord& t) {
  return opscope::packedTensorText(mlu::dtypeName(t.dtype), t.shape);
}

int run(const Options& o) {
  // The environment's verdict settings (OP_AUTOCOMPARE_VERDICT and the tolerance variables), so that
  // --acc_check judges an op as auto-compare did in the same environment. Throws on a malformed value.
  const opscope::Config verdict = opscope::configFromEnvironment();
  std::unique_ptr<CaptureReader> reader;
  std::vector<std::int64_t> ids;
  try {
    reader = CaptureReader::open(o.db);
    if (reader->recovered()) {
      std::fprintf(stderr,
                   "op-replay: %s was cut off in the middle of a write (the capturing program was killed?): "
                   "its unfinished last transaction was rolled back; every op committed before it is here\n",
                   reader->path().c_str());
    }
    if (o.list) {
      const auto ops = reader->list();
      std::printf("%6s %8s  %-28s %s\n", "op_id", "seq", "name", "inputs");
      for (const auto& op : ops) {
        std::printf("%6lld %8llu  %-28s %s\n", static_cast<long long>(op.op_id),
                    static_cast<unsigned long long>(op.seq), op.name.c_str(), op.inputs.c_str());
        // Where the program called it (capture.db's sites: untrusted text, printed as text).
        if (!op.site.empty()) std::printf("%16s  in %s\n", "", opscope::printable(op.site).c_str());
      }
      std::printf("%zu ops in %s\n", ops.size(), reader->path().c_str());
      return 0;
    }
    ids = o.op_ids;
    if (!o.seqs.empty()) {
      const auto ops = reader->list();
      for (const std::uint64_t seq : o.seqs) {
        const auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& op) { return op.seq == seq; });
        if (it == ops.end()) {
          throw ReadError(fmt::format("'{}' has no captured op of call number {} (--list shows them)",
                                      reader->path(), seq));
        }
        ids.push_back(it->op_id);
      }
    }
    if (ids.empty()) {
      if (o.name) {
        std::regex re;
        try {
          re = std::regex(*o.name, std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
          throw UsageError(fmt::format("--name: invalid regular expression '{}': {}", *o.name, e.what()));
        }
        for (const auto& op : reader->list()) {
          if (std::regex_match(op.name, re)) ids.push_back(op.op_id);
        }
        if (ids.empty())
          std::fprintf(stderr, "op-replay: no captured op matches --name '%s'\n", o.name->c_str());
      } else {
        ids = reader->ids();
      }
    }
    for (const auto id : o.op_ids) reader->load(id);  // unknown ids are refused before anything runs
  } catch (const ReadError& e) {
    std::fprintf(stderr, "op-replay: %s\n", e.what());
    return 3;
  }

  Replayer replayer(o.device);
  std::optional<Replayer> reference;
  if (o.acc_check && o.device == ReplayDevice::kMlu) reference.emplace(ReplayDevice::kCpu);
  if (o.export_dir && fs::create_directories(*o.export_dir))  // made here: private, as result directories
    fs::permissions(*o.export_dir, fs::perms::owner_all, fs::perm_options::replace);
  int failures = 0, identical = 0, outputs_total = 0, replay_errors = 0, skipped = 0, unreadable = 0;
  // Ops done / total on stderr when it is a terminal. When stdout is the same terminal, the per-op lines
  // are the progress: the status line is erased before each op so that they start on a clean line.
  opscope::ProgressLine progress(stderr);
  const bool stdout_tty = isatty(fileno(stdout)) == 1;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (stdout_tty) progress.clear();
    CapturedOp op;
    try {
      op = reader->load(ids[k]);
    } catch (const ReadError& e) {  // a damaged op: said, and the others still replayed
      std::fprintf(stderr, "op-replay: %s\n", e.what());
      ++unreadable;
      continue;
    }
    const std::string tag = fmt::format("{} #{}", op.name, op.op_id);
    if (op.status != 0) {
      std::printf(
          "op-replay: %s: skipped: the program's call returned status %d, so there are no outputs to check\n",
          tag.c_str(), op.status);
      ++skipped;
      continue;
    }
    if (o.export_dir) {
      for (const auto& t : op.tensors) {
        const std::string suffix = t.dtype == MLUOP_DTYPE_BFLOAT16 ? "_bf16_as_f32" : "";
        writeNpy(
            fs::path(*o.export_dir) / fmt::format("{}_{}_{}_{}{}.npy", op.op_id, safeNamePart(op.name),
                                                  safeNamePart(t.role), safeNamePart(t.arg_name), suffix),
            t);
      }
    }
    // The CPU reference runs on a thread of its own while the device replays the op (it reads only op,
    // which outlives the future: the future is declared after it, so it is destroyed, and waited for,
    // first).
    std::future<ReplayResult> cpu_result;
    if (reference) cpu_result = std::async(std::launch::async, [&] { return reference->run(op); });
    const int runs = std::max(1, o.run_times);
    ReplayResult first;
    for (int r = 0; r < runs; ++r) {
      ReplayResult result = replayer.run(op, o.sync_time);
      if (o.run_times > 0 && result.ok) {
        std::printf("SyncExecuteTimer: %s elapsed %.4f ms\n", op.name.c_str(), result.elapsed_ms);
      }
      if (r == 0) first = std::move(result);
    }
    if (!first.ok) {
      std::printf("op-replay: %s: %s\n", tag.c_str(), first.error.c_str());
      ++replay_errors;
      ++failures;
      continue;
    }
    for (const auto& out : first.outputs) {
      ++outputs_total;
      const TensorRecord* captured = op.find("output", out.arg_index);
      if (captured == nullptr) continue;
      if (captured->dtype != out.dtype || captured->data.size() != out.data.size()) {
        std::printf("op-replay: %s output %s: the capture holds %s, the replay gave %s: not comparable\n",
                    tag.c_str(), out.arg_name.c_str(), tensorOf(*captured).c_str(), tensorOf(out).c_str());
        ++failures;
        continue;
      }
      if (captured->data == out.data) {
        ++identical;
        std::printf("op-replay: %s output %s %s: bit-identical to the capture\n", tag.c_str(),
                    out.arg_name.c_str(), tensorOf(out).c_str());
      } else if (o.device == ReplayDevice::kMlu) {
        const auto m =
            compareTensors(out.dtype, out.data.data(), captured->data.data(),
                           static_cast<std::int64_t>(out.data.size() / mlu::dtypeSize(out.dtype)), {0, 0});
        std::printf("op-replay: %s output %s differs from the capture: %s\n", tag.c_str(),
                    out.arg_name.c_str(), formatMetrics(m).c_str());
        ++failures;
      } else {
        // The CPU reference against what the device computed when the op was captured.
        const auto tol = toleranceFor(verdict, op.op, out.dtype);
        const auto m =
            compareTensors(captured->dtype, captured->data.data(), out.data.data(),
                           static_cast<std::int64_t>(out.data.size() / mlu::dtypeSize(out.dtype)), tol);
        std::printf("op-replay: %s output %s (captured vs CPU)  %s\n", tag.c_str(), out.arg_name.c_str(),
                    formatMetrics(m).c_str());
        if (o.acc_check && !m.allclose) ++failures;
      }
    }
    if (reference) {
      const ReplayResult cpu = cpu_result.get();
      if (!cpu.ok) {
        std::printf("op-replay: %s: the CPU reference failed: %s\n", tag.c_str(), cpu.error.c_str());
        ++failures;
      }
      for (const auto& ref : cpu.outputs) {
        for (const auto& out : first.outputs) {
          if (out.arg_index != ref.arg_index) continue;
          const auto m =
              compareTensors(out.dtype, out.data.data(), ref.data.data(),
                             static_cast<std::int64_t>(out.data.size() / mlu::dtypeSize(out.dtype)),
                             toleranceFor(verdict, op.op, out.dtype));
          std::printf("op-replay: %s output %s  %s\n", tag.c_str(), out.arg_name.c_str(),
                      formatMetrics(m).c_str());
          if (!m.allclose) ++failures;
        }
      }
    }
    progress.update([&] {
      return fmt::format("op-replay: {}/{} ops, {} failed checks, {:.1f} s", k + 1, ids.size(), failures,
                         progress.elapsedSeconds());
    });
  }
  progress.clear();
  std::string notes;
  if (replay_errors > 0) notes += fmt::format(" ({} ops could not be replayed)", replay_errors);
  if (skipped > 0) notes += fmt::format(" ({} failed calls skipped)", skipped);
  if (unreadable > 0) notes += fmt::format(" ({} damaged ops could not be read)", unreadable);
  std::printf(
      "op-replay: replayed %zu ops: %d of %d outputs bit-identical to the capture, %d failed checks%s\n",
      ids.size() - static_cast<std::size_t>(skipped + unreadable), identical, outputs_total, failures,
      notes.c_str());
  std::fflush(stdout);
  if (unreadable > 0) return 3;
  return failures > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "op-replay: %s\n(op-replay --help for usage)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "op-replay: %s\n", e.what());
    return 3;
  }
}
