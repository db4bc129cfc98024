// framework.h — what a program's framework declares through opscope.h (torch_mlu: every nn.Module, PyTorch
// op and autograd node): per thread, the frames the thread is inside (modules, ops, backward calls), the ops'
// names joined (OpCall::framework_op) and the site of the innermost frame (OpCall::site: module, source
// line, and for a backward call the forward op); process-wide, the interned sites and the graph nodes the
// forward ops made, so that a backward call is attributed to its forward.
#pragma once

#include <opscope/op_call.h>

#include <cstdint>
#include <string_view>

namespace opscope::hook {

// The calling thread's framework ops, outermost first ("aten::conv2d > aten::convolution"; "" when none).
// Valid until the thread's next framework call.
std::string_view frameworkOps();

// Whether the calling thread is inside a backward call of the framework (autograd's engine).
bool frameworkInBackward();

// The outermost op of the calling thread's frames ("aten::conv2d"), interned; "" when none.
std::string_view frameworkOuterOp();

// The framework ran the calling thread's innermost op on the CPU (its frame is marked so).
void frameworkMarkFallback();

// The site of the calling thread's innermost frame; null when it is inside none (or past the sites' limit).
const FrameworkSite* frameworkSite();

// The calls of opscope.h, for the calling thread.
void frameworkModulePush(const char* path);
void frameworkRegionPush(const char* name);
void frameworkModulePop();
void frameworkOpBegin(const char* name, std::int64_t node, const char* where);
void frameworkBackwardBegin(const char* name, std::int64_t node);
void frameworkOpPop();

// Interns a site (tests and the hook): the same three strings give the same object. Each string is cut to
// a bound (module 256, source 512, forward_op 256 bytes); null past 65,536 distinct sites.
const FrameworkSite* internSite(std::string_view module, std::string_view source,
                                std::string_view forward_op);

}  // namespace opscope::hook
