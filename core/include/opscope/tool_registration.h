// tool_registration.h — how a tool tells the hook when to install it, without the hook naming it: its folder
// declares, in its CMakeLists.txt, `opscope_tool(<library> HEADER <header> REGISTER <function>)`, and the
// hook's build generates the list of those functions (hooks/CMakeLists.txt: registered_tools.cpp). Each
// returns the tool's registration. (Capture and auto-compare, which share the run database, are installed
// by the hook itself: hooks/src/tools.cpp.)
#pragma once

#include <opscope/config.h>
#include <opscope/run_info.h>
#include <opscope/tool.h>

#include <memory>

namespace opscope {

struct ToolRegistration {
  ToolId id;                              // its row in tool.h's table (the order the hook runs it in)
  bool (*enabled)(const Config& config);  // on in this configuration
  // It writes into the result directory (its make() gets the run's RunInfo; without one it is not made).
  bool writes_results = true;
  // Makes the tool when the run starts; may throw (its file cannot be made): it is then off, said once.
  std::unique_ptr<Tool> (*make)(const Config& config, const RunInfo& run) = nullptr;
};

}  // namespace opscope
