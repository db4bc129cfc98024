#include <opscope/tool.h>

#include <nlohmann/json.hpp>

namespace opscope {

nlohmann::json Tool::findings() const { return nullptr; }

}  // namespace opscope
