// template.h — the report page's template (viewer/assets/report.html, compiled in by CMake).
#pragma once

#include <string>
#include <string_view>

namespace opscope::viewer {

// The page; the token __OPSCOPE_DATA__ in it stands for the model's JSON.
std::string_view reportTemplate();

// The template's <style> element, for the other pages (opscope diff's, the ranks' view) to look alike.
std::string_view reportStyle();

// Text made safe inside HTML elements and attribute values.
std::string escapeHtml(std::string_view text);

}  // namespace opscope::viewer
