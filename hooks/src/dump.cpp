// OP_DUMP_ARGS: 1 prints each op's one-line form (name, C symbol, where it ran, its tensors as
// op_format.h writes them); 2 adds every argument; 3 adds tensor values (inputs
// before the op, outputs after it; the queue is synchronized to read them). Everything goes to stderr, one
// write per op so lines of different threads do not interleave.
#include "hook.h"

#include <opscope/describe.h>
#include <opscope/op_format.h>
#include <opscope/tensor_snapshot.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>
#include <type_traits>

namespace opscope::hook {
namespace {

void write(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

void syncQueue(const OpCall& call) {
  static const auto sync = real<decltype(&mlurtQueueSync)>("mlurtQueueSync");
  if (call.queue != nullptr) sync(call.queue);
}

// Values of the tensors whose role is wanted.
std::string values(const OpCall& call, bool inputs) {
  std::string out;
  call.withArgs([&](auto& args) {
    args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
        const bool is_input = meta.reads();
        const bool is_output = meta.writes();
        if (!value.present || (inputs ? !is_input : !is_output)) return;
        try {
          out += fmt::format("opscope:   {} {} = {}\n", inputs ? "before:" : "after: ", meta.name,
                             formatTensorValues(value, snapshotTensor(value)));
        } catch (const std::exception& e) {
          out += fmt::format("opscope:   {}: cannot read: {}\n", meta.name, e.what());
        }
      }
    });
  });
  return out;
}

}  // namespace

void dumpBefore(const OpCall& call, int level) {
  const std::string tensors = tensorsLine(call);
  std::string out =
      fmt::format("opscope: op #{} {} ({}) thread {} device {} queue {}{}{}\n", call.seq, call.name,
                  call.symbol, call.thread, call.device, call.queue_id, tensors.empty() ? "" : ": ", tensors);
  if (level >= 2 && !call.args_ok)
    out += "opscope:   (arguments unreadable: a descriptor is NULL or unset)\n";
  if (level >= 2 && call.args_ok) {
    out += describeArguments(call);
  }
  if (level >= 3 && call.args_ok) {
    syncQueue(call);
    out += values(call, true);
  }
  write(out);
}

void dumpAfter(const OpCall& call, int level) {
  if (level < 3 || !call.args_ok) return;
  if (call.status != MLUOP_STATUS_SUCCESS) {
    write(fmt::format("opscope:   #{} {} returned status {}\n", call.seq, call.name,
                      static_cast<int>(call.status)));
    return;
  }
  syncQueue(call);
  write(values(call, false));
}

namespace {

// OP_DUMP_ARGS as a tool, last in the pipeline: the call's line (and arguments, values) after every other
// tool's before(), its output values after every other tool's after(). It takes every call, also one whose
// arguments could not be read (it says so).
class DumpArgsTool final : public Tool {
 public:
  explicit DumpArgsTool(int level) : level_(level) {}
  ToolId id() const override { return ToolId::kDumpArgs; }
  bool wants(const OpCall&) const override { return true; }
  void before(OpCall& call) override { dumpBefore(call, level_); }
  void after(OpCall& call) override { dumpAfter(call, level_); }

 private:
  int level_;
};

}  // namespace

std::unique_ptr<Tool> makeDumpArgsTool(int level) { return std::make_unique<DumpArgsTool>(level); }

}  // namespace opscope::hook
