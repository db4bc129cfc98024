// OP_SYNC_EXEC as a tool of the pipeline: after every successful op call (and the other tools' after()),
// the op's queue is synchronized, so that a fault on the device is reported at the op that caused it.
#include "hook.h"

#include <cstdio>

namespace opscope::hook {
namespace {

class SyncExecTool final : public Tool {
 public:
  ToolId id() const override { return ToolId::kSyncExec; }
  bool wants(const OpCall&) const override { return true; }
  void after(OpCall& call) override {
    if (call.status != MLUOP_STATUS_SUCCESS || call.queue == nullptr) return;
    static const auto sync = real<decltype(&mlurtQueueSync)>("mlurtQueueSync");
    static const auto message = real<decltype(&mlurtGetLastErrorMessage)>("mlurtGetLastErrorMessage");
    if (sync(call.queue) != MLURT_SUCCESS) {
      std::fprintf(stderr, "opscope: OP_SYNC_EXEC: %.*s #%llu failed on the device: %s\n",
                   static_cast<int>(call.name.size()), call.name.data(),
                   static_cast<unsigned long long>(call.seq), message());
    }
  }
};

}  // namespace

std::unique_ptr<Tool> makeSyncExecTool() { return std::make_unique<SyncExecTool>(); }

}  // namespace opscope::hook
