// regions.h — the regions of a program (opscope.h's opscope_region_begin/end; the Python package's
// `with opscope.compare():`): while one is open, the tool it names takes the calls it covers — made on any
// thread, or on the thread that opened it only, and among those the ones its list selects.
//
// A tool installed for regions only (hook.h's ToolEntry::regional) asks here for every call; the cost of a
// run that opens no region is nothing (no tool is regional).
#pragma once

#include <opscope/config.h>
#include <opscope/op_call.h>
#include <opscope/tool.h>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace opscope::hook {

// Some open region of tool covers this call (its thread, and its list matches): call.region is set to the
// innermost such region's label.
bool regionTakes(ToolId tool, OpCall& call);
// Some open region of tool covers the calling thread (for runtime calls and framework frames, which have
// no op to select by).
bool regionCovers(ToolId tool);
// The label of the innermost open region of any tool covering the calling thread ("" when none): the
// label a call gets from regions of tools that are on for the whole run.
std::string_view regionLabel();

// Opens a region; filter null: every call. thread: the thread number it is limited to, or none (all).
// Returns its id (from 1). The label is kept to the end of the process.
int openRegion(ToolId tool, std::string label, std::optional<OpFilter> filter,
               std::optional<std::uint32_t> thread);
// Closes it; false when no region of that id is open.
bool closeRegion(int id);
// How many regions of tool were opened so far (their default labels count them).
int regionsOpened(ToolId tool);
// run.json's findings["regions"]: {"regions": [{label, tool, opened, calls, taken}], "other_regions"}, by
// label; null when no region was opened. calls: the library calls made inside the label's regions (the
// innermost of their thread); taken: those the region's tool took.
nlohmann::json regionFindings();

}  // namespace opscope::hook
