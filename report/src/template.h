// template.h — the report page's template (report/assets/report.html, compiled in by CMake).
#pragma once

#include <string_view>

namespace opscope::report {

// The page; the token __OPSCOPE_DATA__ in it stands for the model's JSON.
std::string_view reportTemplate();

}  // namespace opscope::report
