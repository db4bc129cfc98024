#include <opscope/report/report.h>

#include "template.h"

#include <stdexcept>
#include <string_view>

namespace opscope::report {

std::string renderHtml(const nlohmann::json& model) {
  // The model goes into a <script type="application/json"> element: every "<" (only ever inside a JSON
  // string) is written "\u003c", the same string, so that no text in it can close the element or open
  // "<!--" in it (which would change how the HTML parser reads the rest of the script).
  const std::string json = model.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string data;
  data.reserve(json.size() + json.size() / 64);
  for (const char c : json) {
    if (c == '<') {
      data += "\\u003c";
    } else {
      data += c;
    }
  }
  const std::string_view page = reportTemplate();
  static constexpr std::string_view kToken = "__OPSCOPE_DATA__";
  const auto at = page.find(kToken);
  if (at == std::string_view::npos) throw std::logic_error("report template: no " + std::string(kToken));
  std::string out;
  out.reserve(page.size() + data.size());
  out.append(page.substr(0, at));
  out += data;
  out.append(page.substr(at + kToken.size()));
  return out;
}

// The report page's stylesheet (report/assets/report.html), so that the diff page looks like the report.
std::string_view reportStyle() {
  const std::string_view page = reportTemplate();
  const auto from = page.find("<style>"), to = page.find("</style>");
  if (from == std::string_view::npos || to == std::string_view::npos || to < from)
    throw std::logic_error("report template: no <style> element");
  return page.substr(from, to + 8 - from);
}

}  // namespace opscope::report
