// template.h — the report page's template (viewer/assets/report.html, compiled in by CMake).
#pragma once

#include <string_view>

namespace opscope::viewer {

// The page; the token __OPSCOPE_DATA__ in it stands for the model's JSON.
std::string_view reportTemplate();

}  // namespace opscope::viewer
