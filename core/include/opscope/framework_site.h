// framework_site.h — where in the program a call was made, as its framework declared it (op_call.h's
// OpCall::site and RuntimeCall::site; the backtraces of stacks.h).
#pragma once

#include <opscope/text.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace opscope {

// Where in the program a kernel-library call was made, as its framework declared it (opscope.h's
// opscope_framework_module_push, opscope_framework_op_begin, opscope_framework_backward_begin; torch_mlu
// does for every nn.Module, PyTorch op and autograd node). Interned by the hook: one object per distinct
// value, alive to the end of the process, so a tool may keep the pointer. For a backward call, module and
// source are those of the forward op that made its graph node.
struct FrameworkSite {
  std::uint32_t id = 0;    // from 1, in the order first seen
  std::string module;      // the innermost module's path: "layer1.0.conv1" ("" outside every module)
  std::string source;      // the program's line: "train.py:57 in train_step" ("" when not known)
  std::string forward_op;  // for a backward call, the forward op: "aten::convolution"; else ""
};

// The region name a framework's optimizer step starts with (torch.optim records each step() as
// "Optimizer.step#SGD.step"; torch_mlu declares it with opscope_framework_region_push): FrameworkSite::module
// of the calls inside.
inline constexpr std::string_view kFrameworkOptimizerStep = "Optimizer.step#";

inline std::string siteText(const FrameworkSite* site) {
  return site == nullptr ? std::string() : siteText(site->module, site->source, site->forward_op);
}

}  // namespace opscope
